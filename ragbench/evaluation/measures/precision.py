"""``precision@k`` = |relevant in top k| / k (divides by k even when fewer than k were retrieved, as trec_eval)."""

from ragbench.evaluation.measures.base import rank_measure


@rank_measure("precision", version=1)
def precision(top, ideal, n_relevant: int, k: int, gain: str) -> float:
    return float((top > 0).sum()) / k
