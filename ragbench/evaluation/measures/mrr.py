"""``mrr@k`` = 1 / rank of the first relevant document if that rank <= k, else 0 (reciprocal rank, averaged)."""

import numpy as np

from ragbench.evaluation.measures.base import rank_measure


@rank_measure("mrr", version=1)
def mrr(top, ideal, n_relevant: int, k: int, gain: str) -> float:
    first = np.flatnonzero(top > 0)
    return 1.0 / (first[0] + 1) if len(first) else 0.0
