"""Rank metrics as value objects, computed per query and aggregated explicitly (in the style of ``ir_measures``).

Conventions (relevant = relevance label > 0; ``rel(d)`` = the label, 0 when unjudged; ranks 1-based):

* ``recall@k``    = |relevant in top k| / |relevant|
* ``precision@k`` = |relevant in top k| / k            (divides by k even when fewer than k were retrieved)
* ``mrr@k``       = 1 / rank of the first relevant document if that rank <= k, else 0
* ``hit@k``       = 1 if any relevant document is in the top k, else 0
* ``ndcg@k``      = DCG@k / IDCG@k, DCG@k = sum_{i=1..k} gain(rel(d_i)) / log2(i + 1); IDCG@k is the DCG of the
  ideal ordering of **all judged documents** of the query (the full judged pool, not only those retrieved).
  Gain conventions: ``exponential`` gain(r) = 2^r - 1 (Burges et al. 2005; ranx ``ndcg_burges``) and ``linear``
  gain(r) = r (Järvelin & Kekäläinen 2002; trec_eval's ``ndcg_cut``, pytrec_eval, ranx ``ndcg``, scikit-learn).
  They agree on binary labels.

A query with no relevant label gets NaN for every measure: it is excluded from means and counted separately
(``n_unlabelled``), never scored 1.0 or 0.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from ragbench.config.sweep import MetricsSpec

PER_QUERY_SCHEMA = {"query_id": pl.String, "measure": pl.String, "value": pl.Float64}


@dataclass(frozen=True)
class Measure:
    """A measure at a cutoff, e.g. ``Measure("ndcg", 10)`` is ``ndcg@10``."""

    name: str
    k: int
    gain: str = "exponential"

    def __str__(self) -> str:
        return f"{self.name}@{self.k}"

    def compute(self, gains: np.ndarray, ideal: np.ndarray, n_relevant: int) -> float:
        """Value for one query. ``gains``: labels of the ranked docs in order; ``ideal``: all judged labels."""
        if n_relevant == 0:
            return math.nan
        top = gains[: self.k]
        hits = top > 0
        match self.name:
            case "recall":
                return float(hits.sum()) / n_relevant
            case "precision":
                return float(hits.sum()) / self.k
            case "hit":
                return float(hits.any())
            case "mrr":
                first = np.flatnonzero(hits)
                return 1.0 / (first[0] + 1) if len(first) else 0.0
            case "ndcg":
                g = _gain(top, self.gain)
                discounts = 1.0 / np.log2(np.arange(2, len(top) + 2))
                best = np.sort(ideal)[::-1][: self.k]
                idcg = float((_gain(best, self.gain) / np.log2(np.arange(2, len(best) + 2))).sum())
                return float((g * discounts).sum()) / idcg if idcg > 0 else 0.0
        raise ValueError(f"unknown measure {self.name!r}")


def _gain(labels: np.ndarray, convention: str) -> np.ndarray:
    labels = np.clip(labels.astype(np.float64), 0, None)
    return np.exp2(labels) - 1.0 if convention == "exponential" else labels


def measures_from_spec(spec: MetricsSpec) -> list[Measure]:
    return [Measure(name, k, spec.gain) for name in spec.measures for k in spec.cutoffs]


def evaluate_per_query(doc_run: pl.DataFrame, qrels: pl.DataFrame, query_ids: list[str],
                       measures: list[Measure]) -> pl.DataFrame:
    """Per-query values (long format: query_id, measure, value) for every query in ``query_ids``.

    ``doc_run`` has ``query_id, rank, doc_id``; ``qrels`` has ``query_id, doc_id, relevance``. Queries absent from
    ``doc_run`` retrieved nothing (all measures 0 when labelled).
    """
    labels: dict[str, dict[str, int]] = {}
    for q, d, r in qrels.select("query_id", "doc_id", "relevance").iter_rows():
        labels.setdefault(q, {})[d] = r
    ranked: dict[str, list[str]] = {q: [] for q in query_ids}
    for q, docs in doc_run.sort(["query_id", "rank"]).group_by("query_id", maintain_order=True).agg("doc_id")\
            .iter_rows():
        ranked[q] = docs
    rows_q, rows_m, rows_v = [], [], []
    for q in query_ids:
        judged = labels.get(q, {})
        n_rel = sum(1 for r in judged.values() if r > 0)
        gains = np.array([judged.get(d, 0) for d in ranked.get(q, [])], dtype=np.float64)
        ideal = np.array(list(judged.values()), dtype=np.float64)
        for m in measures:
            rows_q.append(q)
            rows_m.append(str(m))
            rows_v.append(m.compute(gains, ideal, n_rel))
    return pl.DataFrame({"query_id": rows_q, "measure": rows_m, "value": rows_v}, schema=PER_QUERY_SCHEMA)


def aggregate(per_query: pl.DataFrame) -> pl.DataFrame:
    """Mean of each measure over labelled queries (NaN excluded), with ``n`` scored and ``n_unlabelled``."""
    return (per_query.group_by("measure", maintain_order=True)
            .agg(pl.col("value").filter(pl.col("value").is_not_nan()).mean().alias("mean"),
                 pl.col("value").is_not_nan().sum().cast(pl.Int64).alias("n"),
                 pl.col("value").is_nan().sum().cast(pl.Int64).alias("n_unlabelled")))
