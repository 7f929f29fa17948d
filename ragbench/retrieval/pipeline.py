"""One configuration's retrieval pipeline: first stage (any registered retriever kind) -> optional rerank ->
optional small-to-big, with an optional metadata filter. The stages are modules of this package; this module only
composes them for a :class:`~ragbench.config.RunConfig`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import polars as pl

from ragbench.core.schemas import canonical_order
from ragbench.data.dataset import Dataset
from ragbench.index.filters import allowed_doc_ids, bm25_weight_mask, check_fields, filtered_shortfall, index_filter
from ragbench.retrieval.base import Filters, RetrievalResources, RetrieverSpec
from ragbench.retrieval.parents import parent_chunks, parent_spans, small_to_big
from ragbench.retrieval.rerank import RerankSpec, rerank


@dataclass(frozen=True)
class RetrievalOutput:
    """The final run, the chunk table its ids refer to (parents under small-to-big), and side measurements.

    ``truncated``: the queries whose first stage stopped at its depth (it returned as many chunks as it was asked
    for), so their run could have named more documents; the others exhausted what the engine would return."""

    run: pl.DataFrame
    judged_chunks: pl.DataFrame
    seconds: float
    metrics: dict[str, float]
    tables: dict[str, pl.DataFrame]
    first_stage_run: pl.DataFrame
    unfiltered_run: pl.DataFrame | None = None
    truncated: frozenset[str] = frozenset()


def filters_for(ds: Dataset, res: RetrievalResources, filter_spec: dict | None) -> Filters:
    """A metadata filter as a BM25 weight mask and an index filter (both None without a filter)."""
    if not filter_spec:
        return Filters()
    mask = bm25_weight_mask(res.chunks, allowed_doc_ids(ds.corpus, filter_spec))
    return Filters(mask, index_filter(res.index, filter_spec) if res.index is not None else None)


def first_stage(cfg, ds: Dataset, res: RetrievalResources,
                filter_spec: dict | None) -> tuple[pl.DataFrame, frozenset[str]]:
    """The candidate list of each query before reranking (a filter applies inside each engine), and the queries
    whose list stopped at the depth it was asked for (see :attr:`RetrievalOutput.truncated`).

    With ``documents: N`` the queries with fewer than N distinct documents are searched again at twice the depth,
    and again, until they have N or the engine returns fewer chunks than asked (every chunk it would return) or
    the depth covers every chunk. Each query's list is then the search at its final depth: a query is never mixed
    from two searches."""
    retriever: RetrieverSpec = cfg.retriever
    filters = filters_for(ds, res, filter_spec)
    run = retriever.first_stage(ds, res, cfg.embedder, filters)
    truncated = _truncated(run, retriever.depth)
    if not retriever.documents:
        return run, truncated
    n_chunks, factor = res.chunks.height, 1
    while retriever.depth * factor < n_chunks:
        distinct = dict(run.group_by("query_id").agg(pl.col("doc_id").n_unique()).iter_rows())
        short = sorted(q for q in truncated if distinct.get(q, 0) < retriever.documents)
        if not short:
            break
        factor *= 2
        deeper = retriever.deeper(factor)
        again = deeper.first_stage(*_only_queries(ds, res, short), cfg.embedder, filters)
        ids = pl.Series(short, dtype=pl.String).implode()
        run = pl.concat([run.filter(~pl.col("query_id").is_in(ids)), again])
        truncated = (truncated - set(short)) | _truncated(again, deeper.depth)
    return run, truncated


def _truncated(run: pl.DataFrame, depth: int) -> frozenset[str]:
    counts = run.group_by("query_id").len()
    return frozenset(counts.filter(pl.col("len") >= depth)["query_id"].to_list())


def _only_queries(ds: Dataset, res: RetrievalResources, query_ids: list[str]) -> tuple[Dataset, RetrievalResources]:
    """``ds`` and ``res`` cut to ``query_ids`` (query vectors follow the query table's rows)."""
    keep = ds.queries["query_id"].is_in(pl.Series(query_ids, dtype=pl.String).implode())
    vectors = res.query_vectors[keep.to_numpy()] if res.query_vectors is not None else None
    return replace(ds, queries=ds.queries.filter(keep)), replace(res, query_vectors=vectors)


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
    run, truncated = first_stage(cfg, ds, res, r.filter)
    run = canonical_order(run)
    first = run
    metrics: dict[str, float] = {}
    tables: dict[str, pl.DataFrame] = {}
    if r.rerank:
        keep = r.rerank.keep or r.rerank.top_n
        run, latency = rerank(run, dict(zip(ds.queries["query_id"], ds.queries["text"])),
                              dict(zip(res.chunks["chunk_id"], res.chunks["index_text"])), _reranker(res, r.rerank),
                              top_n=r.rerank.top_n, keep=keep)
        tables["rerank_latency.parquet"] = latency
        truncated |= _truncated(run, keep)  # the reranker's cut is a depth too
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
        unfiltered = canonical_order(first_stage(cfg, ds, res, None)[0])
    return RetrievalOutput(run, judged, seconds, metrics, tables, first, unfiltered, truncated)
