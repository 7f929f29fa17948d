"""``ndcg@k`` = DCG@k / IDCG@k with DCG@k = sum_{i=1..k} gain(rel(d_i)) / log2(i + 1).

IDCG@k is the DCG of the ideal ordering of **all judged documents** of the query (the full judged pool, not only
those retrieved). The gain convention is named in the config (:func:`~ragbench.evaluation.measures.base.gain`):
``exponential`` (ranx ``ndcg_burges``) or ``linear`` (trec_eval's ``ndcg_cut``, ranx ``ndcg``); they agree on
binary labels.
"""

import numpy as np

from ragbench.evaluation.measures.base import RankedBatch, rank_measure, row_sums
from ragbench.evaluation.measures.base import gain as gain_of


@rank_measure("ndcg", version=1, batched=True)
def ndcg(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    top, best = batch.top(k), batch.ideal[:, :k]
    dcg = row_sums(gain_of(top, gain) * (1.0 / np.log2(np.arange(2, top.shape[1] + 2))), batch.top_lengths(k))
    idcg = row_sums(gain_of(best, gain) / np.log2(np.arange(2, best.shape[1] + 2)), np.minimum(batch.n_judged, k))
    return np.where(idcg > 0, dcg / idcg, 0.0)
