"""Why a query failed: the reachability split, and what outranked the first relevant item.

Given a deep candidate list (a document run from a chunk run of depth >= 100, via
:func:`ragbench.evaluation.judging.document_run`), each query falls in exactly one category, by the rank ``r`` of its first
relevant document (relevance > 0):

================  ===================================  ======================================
``hit``           ``r <= k``                            retrieval works at k
``ranked_badly``  ``k < r <= pool``                     in the candidate pool: a reranker's job
``unreachable``   no relevant doc in the top ``pool``    the first stage never surfaces it: not fixable by reranking
``unlabelled``    the query has no relevant label        excluded from the shares of labelled queries
================  ===================================  ======================================

``unreachable`` means "not among the first ``pool`` documents of this run"; the run must therefore be at least
``pool`` documents deep where the corpus allows, or queries will be called unreachable that a deeper search finds.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl
from pydantic import Field

from ragbench.core.schemas import canonical_order, check_run
from ragbench.core.spec import Spec


class DiagnosticsSpec(Spec):
    """Reachability split: a query's first relevant document within k (hit), in the top ``pool`` but below k
    (ranked badly: a reranker's job), or not in the pool (unreachable: a representation problem)."""

    k: int = Field(10, gt=0)
    pool: int = Field(50, gt=0)

CATEGORIES = ("hit", "ranked_badly", "unreachable", "unlabelled")
REACHABILITY_SCHEMA = {"query_id": pl.String, "first_relevant_rank": pl.Int32, "category": pl.String}


def reachability(doc_run: pl.DataFrame, qrels: pl.DataFrame, query_ids: list[str], k: int = 10,
                 pool: int = 50) -> pl.DataFrame:
    """Per query: the rank of the first relevant document (null when none is ranked at all) and its category.

    Parameters
    ----------
    doc_run
        Document run with ``query_id, rank, doc_id`` (ranks 1-based) and usually ``score``: with a score the
        documents are taken in :func:`~ragbench.core.schemas.canonical_order` (trec_eval's tie rule), as the
        metrics take them.
    qrels
        ``query_id, doc_id, relevance``; relevant means relevance > 0.
    query_ids
        Every query to classify (queries missing from ``doc_run`` retrieved nothing).
    k, pool
        The cutoff that counts as a hit, and the depth of the candidate pool (``1 <= k <= pool``).
    """
    if not 1 <= k <= pool:
        raise ValueError(f"reachability: need 1 <= k <= pool, got k={k}, pool={pool}")
    missing = [c for c in ("query_id", "rank", "doc_id") if c not in doc_run.columns]
    if missing:
        raise ValueError(f"reachability: doc_run lacks column(s) {', '.join(missing)}")
    doc_run = canonical_order(doc_run, "doc_id")
    relevant = qrels.filter(pl.col("relevance") > 0).select("query_id", "doc_id").unique()
    first = (doc_run.select("query_id", "rank", "doc_id").join(relevant, on=["query_id", "doc_id"], how="semi")
             .group_by("query_id").agg(pl.col("rank").min().cast(pl.Int32).alias("first_relevant_rank")))
    labelled = relevant.select("query_id").unique().with_columns(pl.lit(True).alias("labelled"))
    base = pl.DataFrame({"query_id": list(query_ids)}, schema={"query_id": pl.String})
    out = (base.join(first, on="query_id", how="left").join(labelled, on="query_id", how="left")
           .with_columns(pl.col("labelled").fill_null(False)))
    r = pl.col("first_relevant_rank")
    category = (pl.when(~pl.col("labelled")).then(pl.lit("unlabelled"))
                .when(r.is_not_null() & (r <= k)).then(pl.lit("hit"))
                .when(r.is_not_null() & (r <= pool)).then(pl.lit("ranked_badly"))
                .otherwise(pl.lit("unreachable")))
    return out.with_columns(category.alias("category")).select(
        [pl.col(c).cast(t) for c, t in REACHABILITY_SCHEMA.items()])


def reachability_summary(reach: pl.DataFrame) -> pl.DataFrame:
    """Counts per category (all four, zeros included), ``share`` of all queries and ``share_labelled`` (null for
    ``unlabelled``) of the labelled ones."""
    counts = dict(reach.group_by("category").len().iter_rows())
    unknown = set(counts) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"reachability_summary: unknown categories {sorted(unknown)}")
    total = reach.height
    labelled = total - counts.get("unlabelled", 0)
    rows = [(c, counts.get(c, 0), counts.get(c, 0) / total if total else None,
             None if c == "unlabelled" else (counts.get(c, 0) / labelled if labelled else None)) for c in CATEGORIES]
    return pl.DataFrame(rows, schema={"category": pl.String, "count": pl.Int64, "share": pl.Float64,
                                      "share_labelled": pl.Float64}, orient="row")


def near_misses(chunk_run: pl.DataFrame, relevant_doc_ids: Collection[str], query_id: str,
                k: int | None = None) -> pl.DataFrame:
    """What beat the first relevant chunk of ``query_id``: the chunks ranked above it, best first (at most ``k``).

    A relevant chunk is one whose ``doc_id`` is in ``relevant_doc_ids``. When no relevant chunk was retrieved,
    every retrieved chunk outranked it. Ranks are those of :func:`~ragbench.core.schemas.canonical_order` (the
    order the metrics judge). Returns run rows (``RUN_SCHEMA``).
    """
    run = canonical_order(check_run(chunk_run, "near_misses").filter(pl.col("query_id") == query_id))
    relevant = set(relevant_doc_ids)
    hits = run.filter(pl.col("doc_id").is_in(list(relevant)))
    above = run.filter(pl.col("rank") < hits["rank"].min()) if hits.height else run
    return above.head(k) if k is not None else above
