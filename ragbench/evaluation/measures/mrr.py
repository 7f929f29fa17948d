"""``mrr@k`` = 1 / rank of the first relevant document if that rank <= k, else 0 (reciprocal rank, averaged)."""

import numpy as np

from ragbench.evaluation.measures.base import RankedBatch, rank_measure


@rank_measure("mrr", version=1, batched=True)
def mrr(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    relevant = batch.top(k) > 0
    return np.where(relevant.any(axis=1), 1.0 / (relevant.argmax(axis=1) + 1), 0.0)
