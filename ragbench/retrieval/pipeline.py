"""One configuration's retrieval pipeline: first stage (any registered retriever kind) -> optional rerank ->
optional small-to-big, with an optional metadata filter. The stages are modules of this package; this module only
composes them for a :class:`~ragbench.config.RunConfig`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import polars as pl

from ragbench.core.schemas import canonical_order
from ragbench.data.dataset import Dataset
from ragbench.index.filters import allowed_doc_ids, bm25_weight_mask, check_fields, filtered_shortfall, index_filter
from ragbench.retrieval.base import Filters, RetrievalResources, RetrieverSpec
from ragbench.retrieval.parents import parent_chunks, parent_spans, small_to_big
from ragbench.retrieval.rerank import RerankSpec, rerank


@dataclass(frozen=True)
class RetrievalOutput:
    """The final run, the chunk table its ids refer to (parents under small-to-big), and side measurements."""

    run: pl.DataFrame
    judged_chunks: pl.DataFrame
    seconds: float
    metrics: dict[str, float]
    tables: dict[str, pl.DataFrame]
    first_stage_run: pl.DataFrame
    unfiltered_run: pl.DataFrame | None = None


def filters_for(ds: Dataset, res: RetrievalResources, filter_spec: dict | None) -> Filters:
    """A metadata filter as a BM25 weight mask and an index filter (both None without a filter)."""
    if not filter_spec:
        return Filters()
    mask = bm25_weight_mask(res.chunks, allowed_doc_ids(ds.corpus, filter_spec))
    return Filters(mask, index_filter(res.index, filter_spec) if res.index is not None else None)


def first_stage(cfg, ds: Dataset, res: RetrievalResources, filter_spec: dict | None) -> pl.DataFrame:
    """The candidate list of each query before reranking (a filter applies inside each engine)."""
    retriever: RetrieverSpec = cfg.retriever
    return retriever.first_stage(ds, res, cfg.embedder, filters_for(ds, res, filter_spec))


def _reranker(res: RetrievalResources, spec: RerankSpec):
    if spec.spec_id not in res.rerankers:
        res.rerankers[spec.spec_id] = spec.build(res.vector_cache)
    return res.rerankers[spec.spec_id]


def retrieve(cfg, ds: Dataset, res: RetrievalResources, diagnostics_k: int = 10) -> RetrievalOutput:
    """Run one config end to end and time it (first stage + rerank; small-to-big is bookkeeping).

    Every run it returns (and the first-stage run the reranker reads) is in
    :func:`~ragbench.core.schemas.canonical_order` (trec_eval's tie rule: score descending as 32-bit floats, ties
    by ``chunk_id`` descending), so stored rankings, served results and judged results share one order."""
    r = cfg.retriever
    if r.filter:
        check_fields(ds.corpus, r.filter)
    t0 = time.perf_counter()
    run = canonical_order(first_stage(cfg, ds, res, r.filter))
    first = run
    metrics: dict[str, float] = {}
    tables: dict[str, pl.DataFrame] = {}
    if r.rerank:
        keep = r.rerank.keep or r.rerank.top_n
        run, latency = rerank(run, dict(zip(ds.queries["query_id"], ds.queries["text"])),
                              dict(zip(res.chunks["chunk_id"], res.chunks["index_text"])), _reranker(res, r.rerank),
                              top_n=r.rerank.top_n, keep=keep)
        tables["rerank_latency.parquet"] = latency
        metrics["rerank_ms_per_query"] = float(latency["ms"].mean()) if latency.height else 0.0
        metrics["rerank_ms_p95"] = float(latency["ms"].quantile(0.95)) if latency.height else 0.0
    seconds = time.perf_counter() - t0
    judged = res.chunks
    if r.parents:
        parents = parent_spans(res.chunks, ds.corpus, mode=r.parents.mode, window_chars=r.parents.window_chars,
                               max_level=r.parents.max_level, align=r.parents.align)
        run = small_to_big(run, parents)
        judged = parent_chunks(parents)
    run = canonical_order(run)
    unfiltered = None
    if r.filter:
        qids = ds.queries["query_id"].to_list()
        short = filtered_shortfall(run, diagnostics_k, qids)
        metrics[f"filter_shortfall_queries@{diagnostics_k}"] = float(short["shortfall"].sum())
        metrics["filter_returned_mean"] = float(short["returned"].mean()) if short.height else 0.0
        tables["filter_shortfall.parquet"] = short
        unfiltered = canonical_order(first_stage(cfg, ds, res, None))
    return RetrievalOutput(run, judged, seconds, metrics, tables, first, unfiltered)
