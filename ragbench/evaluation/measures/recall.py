"""``recall@k`` = |relevant in top k| / |relevant|."""

import numpy as np

from ragbench.evaluation.measures.base import RankedBatch, rank_measure


@rank_measure("recall", version=1, batched=True)
def recall(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    return (batch.top(k) > 0).sum(axis=1) / batch.n_relevant
