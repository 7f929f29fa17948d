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

**Order and ties** (trec_eval 9's rule, :func:`ragbench.core.schemas.canonical_order`): before anything is
judged, each query's documents are sorted by score descending, the scores compared as 32-bit floats (as trec_eval
stores them), and equal scores are broken by document id **descending** (byte order); the run's own ``rank``
column is ignored when it has a ``score`` column. A chunk run is first reduced to documents by
:func:`ragbench.evaluation.judging.document_run` (a document scores its best chunk). With linear gain every measure
then equals trec_eval's (``recall_k``, ``P_k``, ``recip_rank`` when ``k`` >= the run's length, ``ndcg_cut_k``,
``success_k``), checked to 1e-12 by ``tests/unit/test_trec_eval.py``; exponential gain equals trec_eval's ``ndcg_cut``
on labels mapped to ``2^r - 1``, and ranx's ``ndcg_burges``.

**Unlabelled.** A query is *unlabelled* when no judged document has relevance > 0 (judged only non-relevant, or
not judged at all). It gets NaN for every measure: it is excluded from means and counted separately
(``n_unlabelled``), never scored 1.0 or 0.0. :attr:`ragbench.data.dataset.Dataset.n_unlabelled` counts the same
queries.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field, field_validator

from ragbench.core.measure_keys import measure_key
from ragbench.core.schemas import PER_QUERY_SCHEMA, canonical_order
from ragbench.core.spec import Spec
from ragbench.data.holdout import HELDOUT_PREFIX
from ragbench.evaluation.means import query_means
from ragbench.evaluation.measures import RANK_MEASURES, UNJUDGED, Measure
from ragbench.evaluation.measures.base import RankedBatch
from ragbench.evaluation.measures.judged import COVERAGE_MEASURES


class MetricsSpec(Spec):
    measures: tuple[str, ...] = Field(("recall", "precision", "mrr", "ndcg", "hit"), description="registered rank "
                                      "measures (ragbench.evaluation.measures), each computed at every cutoff; "
                                      "judged (label coverage) is computed too, always")
    cutoffs: tuple[int, ...] = (1, 3, 5, 10, 20, 100)
    gain: Literal["exponential", "linear"] = "exponential"
    primary: str = "ndcg@10"
    spans: bool = Field(True, description="span-level and budget-matched metrics when the dataset has span labels")
    show: tuple[str, ...] | None = Field(None, description="columns of the printed leaderboard (any measure, e.g. "
                                         "span_recall@5, evidence_recall@512tok, chunkstat_spans_split)")
    budgets: tuple[int, ...] = Field((256, 512, 1024, 2048), description="context budgets in tokens (tokenizer "
                                     "of the embedder) for evidence_recall@{N}tok")

    @field_validator("measures")
    @classmethod
    def _registered(cls, v):
        unknown = [m for m in v if m not in RANK_MEASURES]
        if unknown:
            raise ValueError(f"unknown measure(s) {', '.join(unknown)}; known: {', '.join(sorted(RANK_MEASURES))}")
        return v

    @property
    def rank_measures(self) -> tuple[str, ...]:
        """The rank measures computed and stored: :attr:`measures` plus the label-coverage ones (``judged``), which
        every report shows; added here rather than to :attr:`measures`, so the sweep file's hash and every
        evaluation key stay what they were (stored results are reused and ``judged`` computed from their rankings:
        :func:`ragbench.sweep.evaluate.stale_measures`)."""
        return tuple(self.measures) + tuple(m for m in COVERAGE_MEASURES if m not in self.measures)

    @field_validator("primary")
    @classmethod
    def _quality(cls, v):
        if v.split("@")[0].split("_at_")[0] in COVERAGE_MEASURES:
            raise ValueError(f"{v} is label coverage (the share of the top k that is judged), not retrieval "
                             "quality: it cannot be the primary measure; choose e.g. ndcg@10")
        return v

    @field_validator("cutoffs", "budgets")
    @classmethod
    def _positive(cls, v):
        if not v or any(k <= 0 for k in v):
            raise ValueError("must be a non-empty list of positive integers")
        return tuple(sorted(set(v)))


def measures_from_spec(spec: MetricsSpec) -> list[Measure]:
    return [Measure(name, k, spec.gain) for name in spec.rank_measures for k in spec.cutoffs]


def evaluate_per_query(doc_run: pl.DataFrame, qrels: pl.DataFrame, query_ids: list[str],
                       measures: list[Measure]) -> pl.DataFrame:
    """Per-query values (long format: query_id, measure, value) for every query in ``query_ids``.

    ``doc_run`` has ``query_id, rank, doc_id`` and usually ``score``; ``qrels`` has ``query_id, doc_id, relevance``.
    With a ``score`` column the documents are judged in :func:`~ragbench.core.schemas.canonical_order` (score
    descending, ties by ``doc_id`` descending; ranks ignored), without one in the order of ``rank``. Queries absent
    from ``doc_run`` retrieved nothing (all measures 0 when labelled). A document listed twice for one query is an
    error (as in trec_eval): reduce a chunk run with :func:`ragbench.evaluation.judging.document_run` first.
    """
    doc_run = canonical_order(doc_run, "doc_id")
    dup = doc_run.filter(pl.struct("query_id", "doc_id").is_duplicated())
    if dup.height:
        raise ValueError(f"document {dup['doc_id'][0]!r} is ranked twice for query {dup['query_id'][0]!r}; map a "
                         "chunk run to documents with ragbench.evaluation.judging.document_run first")
    batch = ranked_batch(doc_run, qrels, query_ids, max((m.k for m in measures), default=0))
    values = np.stack([m.compute(batch) for m in measures], axis=1) if measures else np.empty((len(query_ids), 0))
    return pl.DataFrame({"query_id": [q for q in query_ids for _ in measures],
                         "measure": [str(m) for m in measures] * len(query_ids), "value": values.ravel()},
                        schema=PER_QUERY_SCHEMA)


def ranked_batch(doc_run: pl.DataFrame, qrels: pl.DataFrame, query_ids: list[str], depth: int) -> RankedBatch:
    """The judged rankings of ``query_ids`` (rows in that order) as matrices ``depth`` wide: each ranked document's
    label from ``qrels`` (:data:`UNJUDGED` when it has none; a query's last qrel row of a document counts), in the
    order of ``doc_run``'s ``rank``, and each query's judged labels, highest first (the first ``depth`` of them as a
    matrix too)."""
    row = pl.DataFrame({"query_id": query_ids, "_row": np.arange(len(query_ids))},
                       schema={"query_id": pl.String, "_row": pl.Int64})
    judged = qrels.select(pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String),
                          pl.col("relevance").cast(pl.Int64))\
        .unique(["query_id", "doc_id"], keep="last", maintain_order=True).join(row, on="query_id")
    ranked = doc_run.select(pl.col("query_id").cast(pl.String), pl.col("doc_id").cast(pl.String), "rank")\
        .join(row, on="query_id").sort("_row", "rank")\
        .with_columns(pl.int_range(pl.len()).over("_row").alias("_pos")).filter(pl.col("_pos") < depth)\
        .join(judged.drop("_row"), on=["query_id", "doc_id"], how="left", maintain_order="left")
    labels = np.full((len(query_ids), depth), UNJUDGED, dtype=np.int64)
    labels[ranked["_row"].to_numpy(), ranked["_pos"].to_numpy()] = ranked["relevance"].fill_null(UNJUDGED).to_numpy()
    judged = judged.sort("_row", "relevance", descending=[False, True])\
        .with_columns(pl.int_range(pl.len()).over("_row").alias("_pos"))
    rows, positions, flat = (judged[c].to_numpy() for c in ("_row", "_pos", "relevance"))
    n_judged = np.bincount(rows, minlength=len(query_ids))
    top = positions < depth  # no measure reads past the deepest cutoff
    ideal = np.full((len(query_ids), max(min(int(n_judged.max(initial=0)), depth), 1)), UNJUDGED, dtype=np.int64)
    ideal[rows[top], positions[top]] = flat[top]
    return RankedBatch(labels=labels, lengths=np.bincount(ranked["_row"].to_numpy(), minlength=len(query_ids)),
                       ideal=ideal, n_judged=n_judged, n_relevant=np.bincount(rows[flat > 0], minlength=len(query_ids)),
                       judged=flat, judged_start=np.concatenate(([0], np.cumsum(n_judged)[:-1])).astype(np.int64))


def aggregate(per_query: pl.DataFrame) -> pl.DataFrame:
    """Mean of each measure over labelled queries (NaN excluded; :func:`~ragbench.evaluation.means.query_mean`:
    the exact mean rounded once), with ``n`` scored and ``n_unlabelled``."""
    return query_means(per_query, "measure", n=pl.col("value").is_not_nan().sum().cast(pl.Int64),
                       n_unlabelled=pl.col("value").is_nan().sum().cast(pl.Int64)).select(
        "measure", pl.when(pl.col("n") > 0).then(pl.col("mean")).alias("mean"), "n", "n_unlabelled")  # none: null


# ---------------------------------------------------------------- document depth
#: config-level measure: the deepest document cutoff every labelled query reached (see :func:`document_depth`)
DOCUMENT_DEPTH_REACHED = "document_depth_reached"
#: config-level measure: distinct documents in the judged run, mean over labelled queries
DOCUMENT_DEPTH_MEAN = "document_depth_mean"
_HELDOUT = measure_key(HELDOUT_PREFIX)  # the stored spelling: heldout_ndcg_at_10


def document_depth(doc_run: pl.DataFrame, query_ids: list[str], truncated: frozenset[str],
                   max_cutoff: int) -> dict[str, float]:
    """How deep in *documents* a run reached, so that document measures compare chunkers at the same depth.

    A run of 100 chunks names fewer than 100 documents when a document has several chunks in it (fixed 128-token
    chunks on SciFact: 63 on average). For the ``query_ids`` (the labelled queries):

    * ``document_depth_mean`` = mean number of distinct documents ranked;
    * ``document_depth_reached`` = min over the ``truncated`` queries (those whose retrieval stopped at its depth
      and could have named more documents) of their distinct documents, capped at ``max_cutoff``; a query whose
      engine returned everything it had (no truncation) never limits it. A document measure at cutoff ``k`` is
      comparable across configs only where ``k <= document_depth_reached`` (:func:`unreached_depth`).
    """
    counts = dict(doc_run.group_by("query_id").agg(pl.col("doc_id").n_unique()).iter_rows())
    depths = [counts.get(q, 0) for q in query_ids]
    limited = [counts.get(q, 0) for q in query_ids if q in truncated]
    return {DOCUMENT_DEPTH_MEAN: float(sum(depths)) / len(depths) if depths else math.nan,
            DOCUMENT_DEPTH_REACHED: float(min([max_cutoff, *limited])) if depths else math.nan}


def document_cutoff(measure: str) -> int | None:
    """The cutoff ``k`` of a document rank measure (``recall@100``, ``heldout_ndcg_at_10``), None for any other
    measure (span, budget, config-level)."""
    key = measure_key(measure).removeprefix(_HELDOUT)
    m = re.fullmatch(r"(.+)_at_(\d+)", key)
    return int(m.group(2)) if m and m.group(1) in RANK_MEASURES else None


def unreached_depth(metrics: Mapping[str, float], measure: str) -> int | None:
    """The document depth a config reached when it is below ``measure``'s cutoff (the measure is then not
    comparable with configs that reached it: it was computed on fewer documents), else None. ``metrics``: the
    config's stored config-level measures (``heldout_`` measures read the held-out set's depth)."""
    k = document_cutoff(measure)
    prefix = _HELDOUT if measure_key(measure).startswith(_HELDOUT) else ""
    reached = metrics.get(prefix + DOCUMENT_DEPTH_REACHED)
    if k is None or reached is None or math.isnan(reached) or reached >= k:
        return None
    return int(reached)
