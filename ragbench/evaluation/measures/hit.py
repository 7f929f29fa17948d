"""``hit@k`` = 1 if any relevant document is in the top k, else 0 (success@k)."""

import numpy as np

from ragbench.evaluation.measures.base import RankedBatch, rank_measure


@rank_measure("hit", version=1, batched=True)
def hit(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    return (batch.top(k) > 0).any(axis=1).astype(np.float64)
