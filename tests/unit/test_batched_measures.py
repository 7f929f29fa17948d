"""The built-in rank measures take every query at once: their values are those of the one-query formulas, bit for bit.

Stored results are reused across code versions (a measure's value changes only under a new measure version), so the
batched measures must not move a value by even one unit in the last place. The reference here is each formula
written for one query, as trec_eval computes it per query (sums in numpy's own order over the query's ranked
documents); the runs are short and long, tied, graded, partly unjudged, with unlabelled queries and queries that
retrieved nothing.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from ragbench.evaluation.measures import UNJUDGED, Measure, rank_measure
from ragbench.evaluation.measures.base import RANK_MEASURES, row_sums
from ragbench.evaluation.metrics import evaluate_per_query


def _gain(labels: np.ndarray, convention: str) -> np.ndarray:
    labels = np.clip(labels.astype(np.float64), 0, None)
    return np.exp2(labels) - 1.0 if convention == "exponential" else labels


def _one_query(name: str, top: np.ndarray, ideal: np.ndarray, n_rel: int, k: int, gain: str) -> float:
    """The textbook formula for one query (``top``: labels of its first min(k, ranked) documents)."""
    if name == "recall":
        return float((top > 0).sum()) / n_rel
    if name == "precision":
        return float((top > 0).sum()) / k
    if name == "hit":
        return float((top > 0).any())
    if name == "mrr":
        first = np.flatnonzero(top > 0)
        return 1.0 / (first[0] + 1) if len(first) else 0.0
    if name == "judged":
        return float((top != UNJUDGED).sum()) / len(top) if len(top) else 0.0
    best = np.sort(ideal)[::-1][:k]  # ndcg: the ideal from the full judged pool
    idcg = float((_gain(best, gain) / np.log2(np.arange(2, len(best) + 2))).sum())
    dcg = float((_gain(top, gain) * (1.0 / np.log2(np.arange(2, len(top) + 2)))).sum())
    return dcg / idcg if idcg > 0 else 0.0


def _random_case(seed: int, n_queries: int = 200, n_docs: int = 300):
    rng = np.random.default_rng(seed)
    run, qrels = [], []
    for q in range(n_queries):
        n = int(rng.choice([0, 1, 2, 7, 8, 9, 10, 15, 16, 17, 33, 100]))  # around numpy's 8-wide summation blocks
        for r, d in enumerate(rng.choice(n_docs, size=n, replace=False)):
            run.append((f"q{q}", r + 1, f"d{d}", float(rng.integers(0, 12))))  # few distinct scores: ties
        for d in rng.choice(n_docs, size=int(rng.choice([0, 1, 3, 9, 17, 60])), replace=False):
            qrels.append((f"q{q}", f"d{d}", int(rng.choice([0, 0, 1, 2, 3]))))
    run = pl.DataFrame(run, schema={"query_id": pl.String, "rank": pl.Int64, "doc_id": pl.String,
                                    "score": pl.Float64}, orient="row")
    qrels = pl.DataFrame(qrels, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int64},
                         orient="row")
    return run, qrels, [f"q{q}" for q in range(n_queries + 3)]  # 3 queries with neither run nor labels


def _reference(run: pl.DataFrame, qrels: pl.DataFrame, query_ids: list[str], measures: list[Measure]) -> dict:
    order = run.sort(["query_id", "score", "doc_id"], descending=[False, True, True])  # trec_eval's order
    labels = {}
    for q, d, r in qrels.iter_rows():
        labels.setdefault(q, {})[d] = r
    out = {}
    for q in query_ids:
        judged = labels.get(q, {})
        n_rel = sum(r > 0 for r in judged.values())
        ranked = np.array([judged.get(d, UNJUDGED) for d in order.filter(pl.col("query_id") == q)["doc_id"]],
                          dtype=np.float64)
        ideal = np.array(list(judged.values()), dtype=np.float64)
        for m in measures:
            out[(q, str(m))] = (_one_query(m.name, ranked[:m.k], ideal, n_rel, m.k, m.gain) if n_rel else math.nan)
    return out


@pytest.mark.parametrize("seed,gain", [(0, "exponential"), (1, "exponential"), (2, "linear"), (3, "linear")])
def test_batched_measures_equal_the_one_query_formulas_bit_for_bit(seed, gain):
    run, qrels, query_ids = _random_case(seed)
    measures = [Measure(name, k, gain) for name in ("recall", "precision", "mrr", "ndcg", "hit", "judged")
                for k in (1, 3, 5, 9, 10, 20, 100)]
    expected = _reference(run, qrels, query_ids, measures)
    got = evaluate_per_query(run, qrels, query_ids, measures)
    assert got.height == len(expected)
    differ = [(q, m, v, expected[(q, m)]) for q, m, v in got.iter_rows()
              if not (v == expected[(q, m)] or (math.isnan(v) and math.isnan(expected[(q, m)])))]
    assert differ == [], differ[:5]


def test_row_sums_add_each_row_as_numpy_adds_it_alone():
    rng = np.random.default_rng(7)
    values = rng.random((300, 130))
    lengths = rng.integers(0, 131, size=300)
    values[np.arange(130)[None, :] >= lengths[:, None]] = 0.0  # past a row's length: zeros, as a padded ranking
    sums = row_sums(values, lengths)
    alone = np.array([values[i, :n].sum() for i, n in enumerate(lengths)])
    assert (sums.view(np.int64) == alone.view(np.int64)).all()
    # the padded row summed whole associates differently: the reason row_sums exists
    assert (values.sum(axis=1) != alone).any()


def test_a_measure_written_for_one_query_gets_each_labelled_query_alone():
    seen = []

    @rank_measure("one_at_a_time")
    def one_at_a_time(top, ideal, n_relevant, k, gain):
        seen.append((top.tolist(), ideal.tolist(), n_relevant))
        return float(len(top))

    try:
        run = pl.DataFrame({"query_id": ["a", "a", "a", "b"], "rank": [1, 2, 3, 1], "doc_id": ["x", "y", "z", "x"]})
        qrels = pl.DataFrame({"query_id": ["a", "a", "a", "b"], "doc_id": ["y", "w", "v", "x"],
                              "relevance": [2, 0, 1, 0]})
        out = evaluate_per_query(run, qrels, ["a", "b"], [Measure("one_at_a_time", 2)])
    finally:
        RANK_MEASURES.pop("one_at_a_time")
    # all of a's judged labels (more than the cutoff), highest first; b has no relevant label: NaN, never called
    assert seen == [([UNJUDGED, 2], [2, 1, 0], 2)]
    assert out["value"][0] == 2.0 and math.isnan(out["value"][1])
