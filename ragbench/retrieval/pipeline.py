"""One configuration's retrieval pipeline: first stage (BM25, dense, or both fused) -> optional rerank ->
optional small-to-big, with an optional metadata filter. Stages are the library's own modules; this module only
composes them for a :class:`~ragbench.config.sweep.RunConfig`.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from ragbench.config.sweep import EmbedderSpec, RunConfig
from ragbench.data.dataset import Dataset
from ragbench.embedding.embed import model_key
from ragbench.index.filters import allowed_doc_ids, bm25_weight_mask, check_fields, filtered_shortfall, index_filter
from ragbench.retrieval.fusion import convex, rrf
from ragbench.retrieval.parents import parent_chunks, parent_spans, small_to_big
from ragbench.retrieval.rerank import BiEncoderRescorer, CrossEncoderReranker, rerank
from ragbench.retrieval.base import BM25Index, run_from_hits


@dataclass
class RetrievalResources:
    """What a chunker's configs share: its chunks, BM25 indexes by params, the dense collection, query vectors."""

    chunks: pl.DataFrame
    index: object | None = None
    collection: str | None = None
    hybrid_collection: str | None = None  # dense + Qdrant-BM25 sparse vectors, for engine: qdrant
    query_vectors: np.ndarray | None = None
    bm25: dict[str, BM25Index] = field(default_factory=dict)
    vector_cache: object | None = None
    rerankers: dict[str, object] = field(default_factory=dict)

    def bm25_index(self, params) -> BM25Index:
        key = params.spec_id if hasattr(params, "spec_id") else repr(params)
        if key not in self.bm25:
            self.bm25[key] = BM25Index(params, self.chunks["index_text"].to_list())
        return self.bm25[key]


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


def _bm25_run(ds: Dataset, res: RetrievalResources, params, depth: int, mask: np.ndarray | None) -> pl.DataFrame:
    hits = res.bm25_index(params).search(ds.queries["text"].to_list(), depth, weight_mask=mask)
    return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)


def _dense_run(ds: Dataset, res: RetrievalResources, embedder: EmbedderSpec, depth: int, exact: bool,
               hnsw_ef: int | None, query_filter) -> pl.DataFrame:
    hits = res.index.search(res.collection, res.query_vectors, model_key(embedder), depth, exact=exact,
                            hnsw_ef=hnsw_ef, query_filter=query_filter)
    return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)


def first_stage(cfg: RunConfig, ds: Dataset, res: RetrievalResources, filter_spec: dict | None) -> pl.DataFrame:
    """The candidate list of each query before reranking (a filter applies inside each engine)."""
    r = cfg.retriever
    mask = qfilter = None
    if filter_spec:
        mask = bm25_weight_mask(res.chunks, allowed_doc_ids(ds.corpus, filter_spec))
        qfilter = index_filter(res.index, filter_spec) if res.index is not None else None
    if r.kind == "bm25":
        return _bm25_run(ds, res, r, r.depth, mask)
    if r.kind == "dense":
        return _dense_run(ds, res, cfg.embedder, r.depth, r.exact, r.hnsw_ef, qfilter)
    if r.engine == "qdrant":  # one Qdrant query: dense + sparse prefetches, fused by Qdrant's RRF
        hits = res.index.hybrid_search(res.hybrid_collection, res.query_vectors, ds.queries["text"].to_list(),
                                       model_key(cfg.embedder), r.depth, dense_depth=r.dense.depth,
                                       sparse_depth=r.bm25.depth, k=r.k, exact=r.dense.exact,
                                       hnsw_ef=r.dense.hnsw_ef, query_filter=qfilter)
        return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)
    with ThreadPoolExecutor(max_workers=2) as pool:  # Qdrant and bm25s both release the GIL in their cores
        dense = pool.submit(_dense_run, ds, res, cfg.embedder, r.dense.depth, r.dense.exact, r.dense.hnsw_ef,
                            qfilter)
        lexical = pool.submit(_bm25_run, ds, res, r.bm25, r.bm25.depth, mask)
        runs = [dense.result(), lexical.result()]
    if r.fusion == "rrf":
        return rrf(runs, weights=r.weights, k=r.k, depth=r.depth)
    return convex(runs, weights=r.weights, depth=r.depth)


def _reranker(res: RetrievalResources, spec):
    key = spec.spec_id
    if key not in res.rerankers:
        res.rerankers[key] = (BiEncoderRescorer(EmbedderSpec(model=spec.model), res.vector_cache)
                              if spec.kind == "biencoder" else CrossEncoderReranker(spec.model))
    return res.rerankers[key]


def retrieve(cfg: RunConfig, ds: Dataset, res: RetrievalResources, diagnostics_k: int = 10) -> RetrievalOutput:
    """Run one config end to end and time it (first stage + rerank; small-to-big is bookkeeping)."""
    r = cfg.retriever
    if r.filter:
        check_fields(ds.corpus, r.filter)
    t0 = time.perf_counter()
    run = first_stage(cfg, ds, res, r.filter)
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
    unfiltered = None
    if r.filter:
        qids = ds.queries["query_id"].to_list()
        short = filtered_shortfall(run, diagnostics_k, qids)
        metrics[f"filter_shortfall_queries@{diagnostics_k}"] = float(short["shortfall"].sum())
        metrics["filter_returned_mean"] = float(short["returned"].mean()) if short.height else 0.0
        tables["filter_shortfall.parquet"] = short
        unfiltered = first_stage(cfg, ds, res, None)
    return RetrievalOutput(run, judged, seconds, metrics, tables, first, unfiltered)
