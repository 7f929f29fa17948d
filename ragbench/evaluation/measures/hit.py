"""``hit@k`` = 1 if any relevant document is in the top k, else 0 (success@k)."""

from ragbench.evaluation.measures.base import rank_measure


@rank_measure("hit", version=1)
def hit(top, ideal, n_relevant: int, k: int, gain: str) -> float:
    return float((top > 0).any())
