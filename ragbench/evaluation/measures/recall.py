"""``recall@k`` = |relevant in top k| / |relevant|."""

from ragbench.evaluation.measures.base import rank_measure


@rank_measure("recall", version=1)
def recall(top, ideal, n_relevant: int, k: int, gain: str) -> float:
    return float((top > 0).sum()) / n_relevant
