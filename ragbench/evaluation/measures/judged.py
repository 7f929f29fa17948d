"""``judged@k`` = |judged documents in the top k| / min(k, |retrieved|): the share of the top-k *documents* that
carry a judgment (any qrel row of the query, relevance 0 included), as ir_measures' ``Judged@k``; 0 when nothing
was retrieved. Queries without a relevant label are NaN, as for every rank measure.

It is label coverage, not retrieval quality: a low judged@k means the other measures count unjudged documents as
not relevant, so they are a lower bound. It is never a primary measure and never compared
(:data:`COVERAGE_MEASURES`); reports show it beside the primary (:mod:`ragbench.reporting.label_coverage`).
"""

import numpy as np

from ragbench.evaluation.measures.base import UNJUDGED, RankedBatch, rank_measure

#: rank measures that describe the labels rather than the ranking: not a primary, not in any comparison, not
#: computed on chunks
COVERAGE_MEASURES = ("judged",)


@rank_measure("judged", version=1, batched=True)
def judged(batch: RankedBatch, k: int, gain: str) -> np.ndarray:
    ranked = batch.top_lengths(k)  # positions past a query's last document are UNJUDGED: never counted
    counted = (batch.top(k) != UNJUDGED).sum(axis=1)
    return np.where(ranked > 0, counted / np.maximum(ranked, 1), 0.0)
