"""``precision@k`` = |relevant in top k| / k (divides by k even when fewer than k were retrieved, as trec_eval)."""

import numpy as np

from ragbench.evaluation.measures.base import RankedBatch, rank_measure


@rank_measure("precision", version=1, batched=True)
def precision(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    return (batch.top(k) > 0).sum(axis=1) / k
