"""``ndcg@k`` = DCG@k / IDCG@k with DCG@k = sum_{i=1..k} gain(rel(d_i)) / log2(i + 1).

IDCG@k is the DCG of the ideal ordering of **all judged documents** of the query (the full judged pool, not only
those retrieved). The gain convention is named in the config (:func:`~ragbench.evaluation.measures.base.gain`):
``exponential`` (ranx ``ndcg_burges``) or ``linear`` (trec_eval's ``ndcg_cut``, ranx ``ndcg``); they agree on
binary labels.
"""

import numpy as np

from ragbench.evaluation.measures.base import gain as gain_of
from ragbench.evaluation.measures.base import rank_measure


@rank_measure("ndcg", version=1)
def ndcg(top, ideal, n_relevant: int, k: int, gain: str) -> float:
    discounts = 1.0 / np.log2(np.arange(2, len(top) + 2))
    best = np.sort(ideal)[::-1][:k]
    idcg = float((gain_of(best, gain) / np.log2(np.arange(2, len(best) + 2))).sum())
    return float((gain_of(top, gain) * discounts).sum()) / idcg if idcg > 0 else 0.0
