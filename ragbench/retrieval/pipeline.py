"""One configuration's retrieval pipeline: optional query rewrite -> first stage (any registered retriever kind) ->
optional rerank -> optional small-to-big, with an optional metadata filter. The stages are modules of this package; this module only
composes them for a :class:`~ragbench.config.RunConfig`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ragbench.core.errors import RagbenchError
from ragbench.core.schemas import canonical_order, index_texts
from ragbench.data.dataset import Dataset
from ragbench.embedding.embed import embed_texts
from ragbench.index.filters import allowed_doc_ids, bm25_weight_mask, check_fields, filtered_shortfall, index_filter
from ragbench.retrieval.base import Filters, RetrievalResources, RetrieverSpec
from ragbench.retrieval.parents import parent_chunks, parent_spans, small_to_big
from ragbench.retrieval.rerank import RerankSpec, rerank
from ragbench.retrieval.rewrite import RewriteSpec, Variant


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
    run = search(retriever, ds, res, cfg.embedder, filters)
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
        again = search(deeper, *_only_queries(ds, res, short), cfg.embedder, filters)
        ids = pl.Series(short, dtype=pl.String).implode()
        run = pl.concat([run.filter(~pl.col("query_id").is_in(ids)), again])
        truncated = (truncated - set(short)) | _truncated(again, deeper.depth)
    return run, truncated


@dataclass(frozen=True)
class RewriteCall:
    """One query's rewrite: the variants searched and what the LLM call cost.

    ``seconds``: the call's wall time when it was made in this run (0 on a cache hit); ``recorded_seconds``: the
    time stored with the cached response (None for entries that predate it)."""

    variants: tuple[Variant, ...]
    cached: bool
    seconds: float
    recorded_seconds: float | None


_VARIANT_SEP = "\x1f"  # joins a query id and its variant number in the expanded query table


def rewrites_for(spec: RewriteSpec, queries: list[str], res: RetrievalResources) -> list[RewriteCall]:
    """The rewrite of each query text, asking the LLM (through its response cache) only for those this config has
    not rewritten yet."""
    missing = sorted({q for q in queries if (spec.spec_id, q) not in res.rewrites})
    if missing:
        if res.llm is None:
            raise RagbenchError(f"query rewrite {spec.kind!r} needs an LLM endpoint (the sweep config's generation: "
                                f"section names it) and none was given")
        replies = res.llm().complete_many([spec.messages(q) for q in missing], max_tokens=spec.max_tokens)
        for q, c in zip(missing, replies):
            res.rewrites[(spec.spec_id, q)] = RewriteCall(tuple(spec.variants(q, c.text)), bool(c.cached),
                                                          float(c.seconds), c.recorded_seconds)
    return [res.rewrites[(spec.spec_id, q)] for q in queries]


def search(retriever: RetrieverSpec, ds: Dataset, res: RetrievalResources, embedder,
           filters: Filters) -> pl.DataFrame:
    """The retriever's first stage, through its query rewrite when it has one.

    With a rewrite, each query becomes its variants (see :mod:`ragbench.retrieval.rewrite`): every variant is a
    query of its own (its text for lexical search, its vector from ``embed_texts(text, embedder, role)`` through the
    vector cache for dense search), the first stage runs once over all of them, and each query's variant runs are
    fused by the rewrite kind (RRF for multi-query; the one run for HyDE)."""
    spec = retriever.rewrite
    if spec is None:
        return retriever.first_stage(ds, res, embedder, filters)
    calls = rewrites_for(spec, ds.queries["text"].to_list(), res)
    rows = [(row, i, v) for row, call in enumerate(calls) for i, v in enumerate(call.variants)]
    qids = ds.queries["query_id"].to_list()
    expanded = ds.queries[[row for row, _, _ in rows]].with_columns(
        pl.Series("query_id", [f"{qids[row]}{_VARIANT_SEP}{i}" for row, i, _ in rows], dtype=pl.String),
        pl.Series("text", [v.text for _, _, v in rows], dtype=pl.String))
    vectors = None
    if embedder is not None:
        if res.vector_cache is None:
            raise RagbenchError("a dense query rewrite needs the vector cache to embed the rewrites")
        for role in ("query", "document"):
            at = [j for j, (_, _, v) in enumerate(rows) if v.role == role]
            if at:
                part = embed_texts([rows[j][2].text for j in at], embedder, role, res.vector_cache)[0]
                if vectors is None:
                    vectors = np.zeros((len(rows), part.shape[1]), dtype=part.dtype)
                vectors[at] = part
    run = retriever.first_stage(replace(ds, queries=expanded), replace(res, query_vectors=vectors), embedder, filters)
    parts = pl.col("query_id").str.split_exact(_VARIANT_SEP, 1)
    run = run.with_columns(parts.struct.field("field_0").alias("query_id"),
                           parts.struct.field("field_1").cast(pl.Int32).alias("variant"))
    n_variants = max((i for _, i, _ in rows), default=0) + 1
    runs = [run.filter(pl.col("variant") == i).drop("variant") for i in range(n_variants)]
    return spec.fuse(runs, retriever.depth)


def rewrite_metrics(spec: RewriteSpec, ds: Dataset, res: RetrievalResources) -> tuple[dict[str, float], pl.DataFrame]:
    """Config-level cost of the rewrites of ``ds``'s queries, and one row per variant searched.

    * ``rewrite_ms_per_query``: mean LLM milliseconds per query, as measured when each call was made (a call served
      from the response cache counts its recorded time; an old entry without one counts 0 and is counted in
      ``rewrite_ms_unrecorded``);
    * ``rewrite_llm_calls``: calls sent to the endpoint by this config (0 on a cached rerun);
    * ``rewrite_variants_per_query``: texts searched per query (the original included for multi-query);
    * ``rewrite_fallback_queries``: queries whose reply gave nothing usable, searched as they are."""
    texts, qids = ds.queries["text"].to_list(), ds.queries["query_id"].to_list()
    calls = rewrites_for(spec, texts, res)
    ms = [1000 * (c.seconds if not c.cached else (c.recorded_seconds or 0.0)) for c in calls]
    fallback = sum(len(c.variants) == 1 and c.variants[0].text == t for c, t in zip(calls, texts))
    metrics = {"rewrite_ms_per_query": float(np.mean(ms)) if ms else 0.0,
               "rewrite_llm_calls": float(sum(not c.cached for c in calls)),
               "rewrite_ms_unrecorded": float(sum(c.cached and c.recorded_seconds is None for c in calls)),
               "rewrite_variants_per_query": float(np.mean([len(c.variants) for c in calls])) if calls else 0.0,
               "rewrite_fallback_queries": float(fallback)}
    table = pl.DataFrame([{"query_id": q, "variant": i, "role": v.role, "text": v.text, "llm_ms": m,
                           "cached": c.cached} for q, c, m in zip(qids, calls, ms) for i, v in enumerate(c.variants)],
                         schema={"query_id": pl.String, "variant": pl.Int32, "role": pl.String, "text": pl.String,
                                 "llm_ms": pl.Float64, "cached": pl.Boolean})
    return metrics, table


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
    if r.rewrite:
        metrics_rw, tables["rewrites.parquet"] = rewrite_metrics(r.rewrite, ds, res)
        metrics.update(metrics_rw)
    if r.rerank:
        keep = r.rerank.keep or r.rerank.top_n
        run, latency = rerank(run, dict(zip(ds.queries["query_id"], ds.queries["text"])),
                              dict(zip(res.chunks["chunk_id"], index_texts(res.chunks))), _reranker(res, r.rerank),
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
    if r.rerank or r.parents:  # a new run; the first stage's is in canonical order already
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
