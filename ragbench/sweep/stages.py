"""The sweep's stages as plain functions: load checks, chunk, embed, and evaluate one config's run.

Each takes exactly what it needs (a chunker spec, an embedder spec, a metrics spec ...), never the whole sweep
config, so that a :class:`~ragbench.sweep.runner.StageRunner` can run it as a task anywhere.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ragbench.chunking import ChunkerSpec, chunk_corpus_incremental, share_corpus_text
from ragbench.config import RunConfig, SweepConfig
from ragbench.core.cache import ChunkCache, EmbedStats, VectorCache
from ragbench.core.errors import DatasetError
from ragbench.core.models import resolve_device, resolve_model
from ragbench.core.progress import log
from ragbench.core.schemas import index_texts
from ragbench.core.settings import Settings
from ragbench.core.workers import Workers
from ragbench.data.dataset import Dataset
from ragbench.embedding.embed import embed_texts
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.metrics import MetricsSpec, evaluate_per_query
from ragbench.evaluation.spans import budget_metrics, chunk_level_run_metrics, span_metrics


def preflight(cfg: SweepConfig, settings: Settings, dask_address: str | None = None) -> None:
    """Cheap checks before any heavy work: every model and tokenizer resolves offline, the dataset exists, the
    local LLM server and model are built, and every server the sweep needs answers (:func:`check_servers`);
    ``dask_address`` is the Dask scheduler the embedding shards will run on (None: none)."""
    for emb in cfg.embedders:
        resolve_model(emb.model)
        if emb.device == "cuda":  # fails here on a machine without a GPU, not mid-sweep (auto and cpu cannot
            resolve_device(emb.device)  # fail: torch is not imported for them before something is embedded)
    for ch in cfg.chunkers:
        if ch.tokenizer_name:
            resolve_model(ch.tokenizer_name)
    for r in cfg.retrievers:
        if r.rerank is not None:
            resolve_model(r.rerank.model)
    gen = _llm_endpoint(cfg)
    if gen is not None and gen.endpoint == "local":
        from ragbench.generation.llm.server import locate_llama_server, locate_model

        locate_llama_server(settings)
        locate_model(settings, gen.model)
    if not Path(cfg.dataset.path).exists():
        raise DatasetError(f"{cfg.dataset.path}: dataset not found")
    check_servers(cfg, settings, dask_address)


_REWRITE_NAMES = {"hyde": "HyDE", "multi_query": "multi-query"}
_WARNED: set[str] = set()  # MLflow URIs already said to be unreachable in this process


def _llm_endpoint(cfg: SweepConfig):
    """The generation spec whose endpoint the sweep talks to (answers or query rewrites), or None."""
    gen = cfg.generation
    rewrites = any(r.rewrite is not None for r in cfg.retrievers)
    if rewrites and gen is None:
        from ragbench.generation.spec import GenerationSpec

        gen = GenerationSpec(enabled=False)  # the endpoint query rewrites use by default
    return gen if gen is not None and (gen.enabled or rewrites) else None


def check_servers(cfg: SweepConfig, settings: Settings, dask_address: str | None = None) -> None:
    """Every remote server the sweep needs answers within
    :data:`~ragbench.core.retry.SERVER_CHECK_TIMEOUT_S` (a TCP connect, then one cheap request), else
    :class:`~ragbench.core.retry.ServerUnreachable` names what and where: an OpenAI-compatible LLM endpoint
    (``GET <url>/models``), the Dask scheduler, a Qdrant server (``GET /``). An unreachable MLflow server (http(s)
    or its PostgreSQL database) only warns: results still land in DuckDB and ``ragbench sync-mlflow`` uploads them
    later."""
    from ragbench.core.retry import ServerUnreachable, check_server

    gen = _llm_endpoint(cfg)
    if gen is not None and gen.endpoint != "local":
        kinds = sorted({_REWRITE_NAMES.get(r.rewrite.kind, r.rewrite.kind) for r in cfg.retrievers if r.rewrite})
        uses = (["end-to-end answers"] if gen.enabled else []) + ([f"query rewrites ({', '.join(kinds)})"]
                                                                 if kinds else [])
        check_server(gen.endpoint, "LLM endpoint", http_path="/models", purpose=" and ".join(uses))
    if dask_address:
        check_server(dask_address, "Dask scheduler")
    if settings.qdrant_url and settings.qdrant_url != ":memory:":
        check_server(settings.qdrant_url, "Qdrant server", http_path="/")
    if cfg.output.mlflow and settings.mlflow_tracking_uri:
        from ragbench.results.tracking import check_tracking_server

        try:
            check_tracking_server(settings.mlflow_tracking_uri)
        except ServerUnreachable as e:
            if settings.mlflow_tracking_uri not in _WARNED:  # the CLI and run_sweep both run the preflight
                _WARNED.add(settings.mlflow_tracking_uri)
                log.warning("%s; results go to DuckDB only — run `ragbench sync-mlflow` later", e)


def chunk_stage(ds: Dataset, chunker: ChunkerSpec, cache: ChunkCache) -> pl.DataFrame:
    """The chunker's chunks of the dataset, from the content-addressed chunk cache (built once); whole-document
    chunks share the corpus' text (:func:`~ragbench.chunking.base.share_corpus_text`)."""
    key = ChunkCache.key(ds.fingerprint, chunker)
    cut: tuple[str, ...] = ()

    def build() -> pl.DataFrame:  # only new or changed documents are cut again (ragbench.chunking.doc_spans)
        nonlocal cut
        table, cut = chunk_corpus_incremental(ds, chunker, cache.root / "by-document")
        return table

    chunks, cached = cache.get_or_build(key, build)
    if 0 < len(cut) < ds.corpus.height:
        log.info("chunk %s: %d of %d documents new or changed, cut again%s", chunker.label, len(cut),
                 ds.corpus.height, f" ({', '.join(cut)})" if len(cut) <= 10 else "")
    if cached:
        chunks = share_corpus_text(chunks, ds.corpus)
    log.info("chunk %s: %d chunks from %d documents (%s)", chunker.label, chunks.height, ds.corpus.height,
             "cached" if cached else "built")
    return chunks


def embed_documents_stage(chunks: pl.DataFrame, embedder, cache: VectorCache, segment_rows: int = 512,
                          reserve_bytes: int = 200 * 1024 * 1024, workers: Workers | None = None) -> EmbedStats:
    """Embed every chunk's index text (``prefix + text``) into the cache (vectors stay on disk; the index streams them), in shards
    on ``workers`` (here by default)."""
    return embed_texts(index_texts(chunks), embedder, "document", cache, segment_rows=segment_rows,
                       return_vectors=False, reserve_bytes=reserve_bytes, workers=workers)[1]


def context_tokenizer(cfg: RunConfig) -> str:
    """The tokenizer that measures context budgets: the embedder's (when it ships a fast tokenizer), else the
    chunker's, else MiniLM's."""
    if cfg.embedder:
        path = resolve_model(cfg.embedder.model).path
        if path is not None and (path / "tokenizer.json").is_file():
            return cfg.embedder.model
    return cfg.chunker.tokenizer_name or "all-MiniLM-L6-v2"


def evaluate_stage(ds: Dataset, chunk_run: pl.DataFrame, measures, *, chunks: pl.DataFrame | None = None,
                   metrics_spec: MetricsSpec | None = None,
                   token_counts: dict[str, int] | None = None) -> pl.DataFrame:
    """Per-query values with their query class (long: ``query_id, measure, value, query_class``).

    Document-level rank metrics always; with span labels also span recall/precision/IoU, budget-matched evidence
    recall and chunk-level rank metrics (chunk relevance from span overlap).
    """
    qids = ds.queries["query_id"].to_list()
    parts = [evaluate_per_query(document_run(chunk_run), ds.qrels, qids, measures)]
    if chunks is not None and metrics_spec is not None and metrics_spec.spans and ds.spans.height:
        parts += [span_metrics(chunk_run, chunks, ds.spans, metrics_spec.cutoffs, query_ids=qids),
                  chunk_level_run_metrics(chunk_run, chunks, ds.spans, measures, query_ids=qids)]
        if token_counts is not None:
            parts.append(budget_metrics(chunk_run, chunks, ds.spans, metrics_spec.budgets, token_counts,
                                        query_ids=qids))
    return pl.concat(parts).join(ds.queries.select("query_id", "query_class"), on="query_id", how="left")
