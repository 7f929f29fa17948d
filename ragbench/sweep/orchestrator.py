"""The sweep: every stage wired in order, resumable, one config's failure isolated from the others.

This is plain Python. ``flows/sweep.py`` runs the same wiring with each stage as a Prefect task by passing a
:class:`StageRunner` that wraps stages in tasks; nothing here imports Prefect.
"""

from __future__ import annotations

import math
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import polars as pl

from ragbench.core.cache import ChunkCache, EmbedStats, VectorCache
from ragbench.chunking.base import chunk_corpus
from ragbench.config.sweep import RunConfig, SweepConfig, chunker_label
from ragbench.data.dataset import Dataset, load_dataset
from ragbench.embedding.embed import embed_texts, model_key
from ragbench.core.errors import DatasetError, RagbenchError
from ragbench.core.hashing import stable_hash, text_hash
from ragbench.index.qdrant import CollectionMeta, bm25_sparse, collection_name, open_index
from ragbench.core.locks import file_lock
from ragbench.evaluation.ann import ann_fidelity
from ragbench.chunking.stats import chunk_statistics
from ragbench.evaluation.diagnostics import reachability, reachability_summary
from ragbench.index.filters import chunk_payloads
from ragbench.generation.stage import Generator, answer_in_context_metrics, generation_stage, k_sweep_stage
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.metrics import aggregate, evaluate_per_query, measures_from_spec
from ragbench.embedding.models import count_tokens
from ragbench.retrieval.pipeline import RetrievalResources, retrieve
from ragbench.core.progress import log, progress
from ragbench.evaluation.query_classes import assign_classes
from ragbench.core.resources import ensure_disk_space
from ragbench.core.retry import call_with_retries
from ragbench.retrieval.base import BM25Index, timed
from ragbench.evaluation.spans import budget_metrics, chunk_level_run_metrics, span_metrics
from ragbench.results.store import ResultStore
from ragbench.results.tracking import open_tracker, sweep_params


def resolve_home(cfg: SweepConfig | None = None) -> Path:
    """The one local folder for caches, DuckDB, embedded Qdrant and MLflow."""
    if cfg is not None and cfg.output.home:
        return Path(cfg.output.home)
    return Path(os.environ.get("RAGBENCH_HOME", ".ragbench"))


class StageRunner(Protocol):
    def run(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...


class LocalRunner:
    """Runs each stage in-process; transient errors (a server timeout) are retried with backoff."""

    def run(self, name, fn, /, *args, **kwargs):
        return call_with_retries(fn, *args, name=name, **kwargs)


@dataclass(frozen=True)
class ConfigOutcome:
    config_id: str
    name: str
    spec: dict
    status: str  # finished | failed | skipped (finished in an earlier attempt of this sweep)
    metrics: dict[str, float] = field(default_factory=dict)
    n_queries: int = 0
    n_unlabelled: int = 0
    error: str | None = None


@dataclass(frozen=True)
class SweepResult:
    sweep_id: str
    name: str
    dataset_fingerprint: str
    home: Path
    outcomes: list[ConfigOutcome]
    embed_stats: list[EmbedStats]
    seconds: float
    primary: str
    show: tuple[str, ...] | None = None

    @property
    def n_failed(self) -> int:
        return sum(o.status == "failed" for o in self.outcomes)

    @property
    def vectors_computed(self) -> int:
        return sum(s.computed for s in self.embed_stats)


# ---------------------------------------------------------------- stages (each a plain function)
def chunk_stage(ds: Dataset, chunker, cache: ChunkCache) -> pl.DataFrame:
    key = ChunkCache.key(ds.fingerprint, chunker.canonical())
    chunks, cached = cache.get_or_build(key, lambda: chunk_corpus(ds, chunker))
    log.info("chunk %s: %d chunks from %d documents (%s)", chunker_label(chunker), chunks.height, ds.corpus.height,
             "cached" if cached else "built")
    return chunks


def embed_documents_stage(chunks: pl.DataFrame, embedder, cache: VectorCache) -> EmbedStats:
    """Embed every chunk's ``index_text`` into the cache (vectors stay on disk; the index streams them)."""
    return embed_texts(chunks["index_text"].to_list(), embedder, "document", cache, return_vectors=False)[1]


PAYLOAD_VERSION = "meta-v1"  # part of the collection identity: payload layout changes rebuild collections


def index_stage(ds: Dataset, chunker, embedder, index_spec, chunks: pl.DataFrame, cache: VectorCache, index,
                sparse: bool = False) -> str:
    """Build (or reuse) the Qdrant collection of ``chunks`` under ``embedder``, streaming vectors from the cache.

    Point id = the chunk's row in ``chunks``; payload = chunk id, doc id and the document's metadata fields. With
    ``sparse``, each point also gets Qdrant's own BM25 sparse vector (for ``engine: qdrant`` hybrid search).
    """
    key = model_key(embedder)
    name = collection_name(ds.fingerprint, chunker.spec_id, key, embedder.document_prompt, index_spec,
                           payload=PAYLOAD_VERSION + ("+bm25" if sparse else ""))
    texts = chunks["index_text"].to_list()
    hashes = [text_hash(embedder.document_prompt + t) for t in chunks["index_text"].to_list()]
    rows: dict[str, list[int]] = {}
    for i, h in enumerate(hashes):
        rows.setdefault(h, []).append(i)
    payloads = chunk_payloads(chunks, ds.corpus)  # {"chunk_id", "doc_id", "meta": <doc metadata>} for filters

    def batches():
        for picked, mat in cache.iter_vectors(key, "document", set(rows)):
            ids = [i for h in picked for i in rows[h]]
            vecs = np.repeat(mat, [len(rows[h]) for h in picked], axis=0)
            if sparse:
                yield np.array(ids), vecs, [payloads[i] for i in ids], bm25_sparse([texts[i] for i in ids])
            else:
                yield np.array(ids), vecs, [payloads[i] for i in ids]

    first = next(cache.iter_vectors(key, "document", {hashes[0]}), None) if hashes else None
    dim = int(first[1].shape[1]) if first else 0
    meta = CollectionMeta(name=name, model_key=key, dim=dim, distance=index_spec.distance, count=chunks.height,
                          hnsw_m=index_spec.hnsw_m, ef_construct=index_spec.ef_construct,
                          full_scan_threshold_kb=index_spec.full_scan_threshold_kb, sparse=sparse)
    ensure_disk_space(Path(os.environ.get("RAGBENCH_HOME", ".")), chunks.height * dim * 4 * 3, f"index {name}")
    built, seconds = timed(index.ensure, meta, batches())
    log.info("index %s: %d points, %s", name, chunks.height, f"built in {seconds:.1f} s" if built else "reused")
    return name


def context_tokenizer(cfg: RunConfig) -> str:
    """The tokenizer that measures context budgets: the embedder's (when it ships a fast tokenizer), else the
    chunker's, else MiniLM's."""
    if cfg.embedder:
        from ragbench.embedding.models import resolve_model

        path = resolve_model(cfg.embedder.model).path
        if path is not None and (path / "tokenizer.json").is_file():
            return cfg.embedder.model
    return getattr(cfg.chunker, "tokenizer", "all-MiniLM-L6-v2")


def evaluate_stage(ds: Dataset, chunk_run: pl.DataFrame, measures, *, chunks: pl.DataFrame | None = None,
                   metrics_spec=None, token_counts: dict[str, int] | None = None) -> tuple[pl.DataFrame,
                                                                                          pl.DataFrame]:
    """Per-query values (with query class) and their aggregate.

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
    per_query = pl.concat(parts).join(ds.queries.select("query_id", "query_class"), on="query_id", how="left")
    return per_query, aggregate(per_query)


# ---------------------------------------------------------------- the wiring
def preflight(cfg: SweepConfig) -> None:
    """Cheap checks before any heavy work: every model and tokenizer resolves offline, the dataset exists."""
    from ragbench.embedding.models import resolve_model

    for emb in cfg.embedders:
        resolve_model(emb.model)
    for ch in cfg.chunkers:
        if getattr(ch, "unit", "tokens") == "tokens" and hasattr(ch, "tokenizer"):
            resolve_model(ch.tokenizer)
    for r in cfg.retrievers:
        if r.rerank is not None:
            resolve_model(r.rerank.model)
    gen = cfg.generation
    if gen is not None and gen.enabled and gen.endpoint == "local":
        from ragbench.generation.llm.server import locate_llama_server, locate_model

        locate_llama_server()
        locate_model(gen.model)
    if not Path(cfg.dataset.path).exists():
        raise DatasetError(f"{cfg.dataset.path}: dataset not found")


def run_sweep(cfg: SweepConfig, *, runner: StageRunner | None = None, home: Path | None = None,
              fail_fast: bool = False) -> SweepResult:
    """Run (or resume) a sweep and return what every config scored.

    A sweep of the same spec on the same data that did not finish is resumed: configs already stored are skipped,
    chunks and vectors come from the cache. A config that raises is recorded as failed; the others go on. Two
    processes never run the same sweep at once: the second fails with a message naming the first.
    """
    preflight(cfg)
    home = Path(home or resolve_home(cfg))
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAGBENCH_HOME", str(home))
    runner = runner or LocalRunner()
    ds: Dataset = runner.run("load-dataset", load_dataset, cfg.dataset)
    qc = cfg.query_classes
    ds = replace(ds, queries=assign_classes(ds.queries, qc.rules, qc.default, qc.override).select(ds.queries.columns))
    spec_hash = stable_hash(cfg.canonical())
    with file_lock(home / "locks" / f"sweep-{spec_hash}-{ds.fingerprint}.lock", f"sweep {cfg.name!r}"):
        return _Sweep(cfg, ds, home, runner, spec_hash, fail_fast).run()


class _Sweep:
    """One execution of a sweep; resources (chunks, BM25 indexes, collections, query vectors) are built lazily,
    once, and shared by every config that needs them."""

    def __init__(self, cfg: SweepConfig, ds: Dataset, home: Path, runner: StageRunner, spec_hash: str,
                 fail_fast: bool):
        self.cfg, self.ds, self.home, self.runner, self.fail_fast = cfg, ds, home, runner, fail_fast
        self.spec_hash = spec_hash
        self.store = ResultStore(home / "results.duckdb")
        self.chunk_cache, self.vector_cache = ChunkCache(home / "cache"), VectorCache(home / "cache")
        self.index = open_index(home)
        self.measures = measures_from_spec(cfg.metrics)
        self.embed_stats: list[EmbedStats] = []
        self.query_vectors: dict[str, np.ndarray] = {}
        self.rerankers: dict[str, object] = {}
        gen = cfg.generation
        self.generator = Generator(gen, home) if gen is not None and gen.enabled else None
        self.best: tuple[float, RunConfig, pl.DataFrame, pl.DataFrame] | None = None  # for the k sweep
        self.tracker = None
        self.parent_run: str | None = None

    # ------------------------------------------------------------ lifecycle
    def run(self) -> SweepResult:
        try:
            return self._run()
        finally:  # a local LLM server never outlives the sweep, whatever happened
            if self.generator is not None:
                self.generator.stop()

    def _run(self) -> SweepResult:
        t0 = time.perf_counter()
        cfg, ds, store = self.cfg, self.ds, self.store
        for w in ds.warnings[:20]:
            log.warning(w)
        configs = cfg.expand()
        sweep_id = store.find_unfinished_sweep(self.spec_hash, ds.fingerprint)
        if sweep_id:
            log.info("resuming sweep %s", sweep_id)
        else:
            sweep_id = f"{cfg.name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{self.spec_hash[:6]}"
            store.begin_sweep(sweep_id, cfg.name, self.spec_hash, cfg.canonical(), ds.name, ds.fingerprint)
        self.sweep_id = sweep_id
        done = store.finished_configs(sweep_id)
        log.info("sweep %s: %d configs (%d already done) on %s [%s]: %d docs, %d queries (%d unlabelled)", sweep_id,
                 len(configs), len(done & {c.config_id for c in configs}), ds.name, ds.fingerprint,
                 ds.corpus.height, ds.queries.height, ds.n_unlabelled)
        self._open_tracking()

        outcomes = [ConfigOutcome(c.config_id, c.name, c.spec(), "skipped") for c in configs if c.config_id in done]
        todo = [c for c in configs if c.config_id not in done]
        with progress(f"sweep {cfg.name}: configs", len(todo)) as advance:
            for chunker in cfg.chunkers:
                mine = [c for c in todo if c.chunker == chunker]
                if mine:
                    outcomes += self._run_chunker(chunker, mine, advance)

        self._k_sweep()
        n_failed = sum(o.status == "failed" for o in outcomes)
        store.finish_sweep(sweep_id, "finished" if n_failed == 0 else "finished_with_failures")
        self._close_tracking(outcomes, n_failed, len(configs))
        self.index.close()
        seconds = time.perf_counter() - t0
        log.info("sweep %s done in %.1f s: %d configs, %d failed, %d vectors computed", sweep_id, seconds,
                 len(configs), n_failed, sum(s.computed for s in self.embed_stats))
        return SweepResult(sweep_id, cfg.name, ds.fingerprint, self.home,
                           _with_stored_metrics(store, sweep_id, outcomes), self.embed_stats, seconds,
                           cfg.metrics.primary, cfg.metrics.show)

    def _open_tracking(self) -> None:
        if not self.cfg.output.mlflow:
            return
        self.tracker = open_tracker(self.home, self.cfg.output.experiment or f"ragbench/{self.cfg.name}",
                                    self.cfg.output.mlflow_tracking_uri)
        if self.tracker is None:
            return
        try:
            self.parent_run = self.tracker.sweep_run(
                self.sweep_id, self.cfg.name, sweep_params(self.cfg.dataset.model_dump(mode="json"),
                                                           self.ds.fingerprint))
            self.store.set_sweep_mlflow_run(self.sweep_id, self.parent_run)
        except Exception as e:
            log.warning("MLflow unavailable (%s); results go to DuckDB only — run `ragbench sync-mlflow` later",
                        str(e).splitlines()[0][:200])
            self.tracker = None

    def _close_tracking(self, outcomes: list[ConfigOutcome], n_failed: int, n_configs: int) -> None:
        if not (self.tracker and self.parent_run):
            return
        try:
            _log_sweep_plots(self.tracker, self.parent_run, outcomes, self.home)
            self.tracker.finish_sweep(self.parent_run, {"configs_failed": n_failed, "configs": n_configs},
                                      "FINISHED" if n_failed == 0 else "FAILED")
        except Exception as e:
            log.warning("MLflow: could not close the sweep run: %s", e)

    # ------------------------------------------------------------ per chunker
    def _run_chunker(self, chunker, configs: list[RunConfig], advance) -> list[ConfigOutcome]:
        outcomes = []
        try:
            chunks = self.runner.run(f"chunk-{chunker_label(chunker)}", chunk_stage, self.ds, chunker,
                                     self.chunk_cache)
        except Exception as e:
            if self.fail_fast:
                raise
            advance(len(configs))
            return [self._failed(c, e) for c in configs]
        resources = _ChunkerResources(chunks)
        for cfg_i in configs:
            try:
                inputs = self._inputs(cfg_i, chunker, chunks, resources)
                outcome, run, judged = self.runner.run(
                    f"evaluate-{cfg_i.config_id}", _evaluate_and_store, self.cfg, cfg_i, self.ds, chunks,
                    self.measures, self.store, self.tracker, self.parent_run, self.sweep_id, inputs)
                outcomes.append(outcome)
                value = outcome.metrics.get(self.cfg.metrics.primary, math.nan)
                if value == value and (self.best is None or value > self.best[0]):
                    self.best = (value, cfg_i, run, judged)
            except Exception as e:
                if self.fail_fast:
                    raise
                outcomes.append(self._failed(cfg_i, e))
            advance(1)
        return outcomes

    def _inputs(self, cfg_i: RunConfig, chunker, chunks: pl.DataFrame, res: "_ChunkerResources") -> dict:
        """What the retrieve/evaluate stages of one config need, built once per chunker and shared."""
        tok = context_tokenizer(cfg_i)
        if tok not in res.tokens:
            counts = dict(zip(chunks["chunk_id"], count_tokens(chunks["text"].to_list(), tok)))
            res.tokens[tok] = (counts, chunk_statistics(chunks, counts, self.ds.spans, self.ds.corpus))
        retrieval = RetrievalResources(chunks, vector_cache=self.vector_cache, bm25=res.bm25,
                                       rerankers=self.rerankers)
        inputs: dict[str, Any] = {"token_counts": res.tokens[tok][0], "chunk_stats": res.tokens[tok][1],
                                  "tokenizer": tok, "resources": retrieval, "generator": self.generator}
        emb = cfg_i.embedder
        if emb is None:
            return inputs
        if emb.spec_id not in res.collections:
            try:  # a failure here fails every config on this (chunker, embedder) alike, without retrying it
                self.embed_stats.append(self.runner.run(f"embed-docs-{emb.label}", embed_documents_stage, chunks,
                                                        emb, self.vector_cache))
                res.collections[emb.spec_id] = self.runner.run(
                    f"index-{emb.label}", index_stage, self.ds, chunker, emb, cfg_i.index, chunks, self.vector_cache,
                    self.index)
            except Exception as e:
                res.collections[emb.spec_id] = e
        if isinstance(res.collections[emb.spec_id], Exception):
            raise res.collections[emb.spec_id]
        if emb.spec_id not in self.query_vectors:
            vectors, stats = self.runner.run(f"embed-queries-{emb.label}", embed_texts,
                                             self.ds.queries["text"].to_list(), emb, "query", self.vector_cache)
            self.embed_stats.append(stats)
            self.query_vectors[emb.spec_id] = vectors
        retrieval.index, retrieval.collection = self.index, res.collections[emb.spec_id]
        retrieval.query_vectors = self.query_vectors[emb.spec_id]
        if getattr(cfg_i.retriever, "engine", "library") == "qdrant":
            key = emb.spec_id + "+bm25"
            if key not in res.collections:
                res.collections[key] = self.runner.run(f"index-hybrid-{emb.label}", index_stage, self.ds, chunker,
                                                       emb, cfg_i.index, chunks, self.vector_cache, self.index,
                                                       True)
            retrieval.hybrid_collection = res.collections[key]
        return inputs

    def _k_sweep(self) -> None:
        """End-to-end accuracy over context sizes k for the best config, on the sweep's parent run and in DuckDB."""
        gen = self.cfg.generation
        if self.generator is None or gen.k_sweep is None or self.best is None:
            return
        value, cfg_i, run, judged = self.best
        try:
            table = k_sweep_stage(self.ds, run, judged, self.generator)
        except Exception as e:  # the configs' results stand; the k sweep is an extra view of the best one
            log.error("k sweep on %s failed: %s", cfg_i.name, e)
            return
        self.store.write_k_sweep(self.sweep_id, cfg_i.config_id, table)
        log.info("k sweep on %s:\n%s", cfg_i.name, table.select("k", "accuracy", "answer_in_context", "recall"))
        if self.tracker and self.parent_run:
            import tempfile

            from ragbench.generation.answering import plot_k_sweep

            try:
                with tempfile.TemporaryDirectory() as tmp:
                    table.write_parquet(Path(tmp) / "k_sweep.parquet")
                    plot_k_sweep(table, Path(tmp) / "k_sweep.png", title=f"k sweep: {cfg_i.name}")
                    for name in ("k_sweep.parquet", "k_sweep.png"):
                        self.tracker.client.log_artifact(self.parent_run, str(Path(tmp) / name), "plots")
            except Exception as e:
                log.warning("MLflow: could not log the k sweep: %s", e)

    def _failed(self, cfg_i: RunConfig, e: BaseException) -> ConfigOutcome:
        msg = str(e) if isinstance(e, RagbenchError) else f"{type(e).__name__}: {e}"
        log.error("config %s failed: %s", cfg_i.name, msg)
        log.debug("%s", "".join(traceback.format_exception(e)))
        run_id = None
        if self.tracker and self.parent_run:
            try:
                run_id = self.tracker.log_config_failure(self.parent_run, self.sweep_id, cfg_i.config_id,
                                                         cfg_i.name, cfg_i.spec(), self.ds.fingerprint, msg)
            except Exception as te:
                log.warning("MLflow: could not record the failure of %s: %s", cfg_i.name, te)
        self.store.write_config_failure(self.sweep_id, cfg_i.config_id, cfg_i.name, cfg_i.spec(),
                                        self.ds.fingerprint, msg, mlflow_run_id=run_id)
        return ConfigOutcome(cfg_i.config_id, cfg_i.name, cfg_i.spec(), "failed", error=msg)


@dataclass
class _ChunkerResources:
    chunks: pl.DataFrame
    tokens: dict[str, tuple[dict[str, int], dict[str, float]]] = field(default_factory=dict)
    bm25: dict[str, BM25Index] = field(default_factory=dict)
    collections: dict[str, str | Exception] = field(default_factory=dict)


def _evaluate_and_store(cfg: SweepConfig, cfg_i: RunConfig, ds: Dataset, chunks: pl.DataFrame, measures, store,
                        tracker, parent_run, sweep_id: str, inputs: dict) -> ConfigOutcome:
    """Retrieve, judge, diagnose and store one config (DuckDB in one transaction, MLflow as one child run)."""
    res: RetrievalResources = inputs["resources"]
    out = retrieve(cfg_i, ds, res, cfg.diagnostics.k)
    token_counts = inputs["token_counts"]
    if out.judged_chunks is not chunks:  # small-to-big: budgets are measured on the parents returned
        token_counts = dict(zip(out.judged_chunks["chunk_id"],
                                count_tokens(out.judged_chunks["text"].to_list(), inputs["tokenizer"])))
    per_query, agg = evaluate_stage(ds, out.run, measures, chunks=out.judged_chunks, metrics_spec=cfg.metrics,
                                    token_counts=token_counts)
    qids = ds.queries["query_id"].to_list()
    extra = dict(out.metrics)
    tables = dict(out.tables)
    extra.update(answer_in_context_metrics(ds, out.run, out.judged_chunks, cfg.generation))
    answers = None
    if inputs["generator"] is not None:  # an LLM failure fails this config here, before anything is written
        gen_metrics, answers = generation_stage(ds, out.run, out.judged_chunks, inputs["generator"])
        extra.update(gen_metrics)
        tables["answers.parquet"] = answers
    if out.unfiltered_run is not None:
        unfiltered = evaluate_per_query(document_run(out.unfiltered_run), ds.qrels, qids, measures)
        for m, mean in aggregate(unfiltered).select("measure", "mean").iter_rows():
            extra[f"unfiltered_{m}"] = mean
    reach = reachability(document_run(out.first_stage_run), ds.qrels, qids, k=cfg.diagnostics.k,
                         pool=cfg.diagnostics.pool)
    for category, _, _, share in reachability_summary(reach).iter_rows():
        if category != "unlabelled":
            extra[f"reach_{category}@{cfg.diagnostics.k}/{cfg.diagnostics.pool}"] = share if share is not None \
                else float("nan")
    ann = None
    if cfg_i.embedder is not None and cfg.ann_fidelity.enabled:
        r = cfg_i.retriever.dense if cfg_i.retriever.kind == "hybrid" else cfg_i.retriever
        ann = ann_fidelity(res.index, res.collection, res.query_vectors, model_key(cfg_i.embedder),
                           k=cfg.ann_fidelity.k, ef_values=cfg.ann_fidelity.ef_values, depth=max(r.depth,
                                                                                                cfg.ann_fidelity.k),
                           configured_ef=r.hnsw_ef)
        configured = ann.filter(pl.col("configured"))
        extra[f"ann_recall_vs_exact@{cfg.ann_fidelity.k}"] = 1.0 if r.exact else float(
            configured["recall_vs_exact"][0])
        tables["ann_fidelity.parquet"] = ann
    n_queries, n_unlabelled = ds.queries.height, ds.n_unlabelled
    ms = 1000 * out.seconds / max(n_queries, 1)
    metrics = dict(zip(agg["measure"], agg["mean"]))
    run_id = None
    if tracker and parent_run:
        try:
            run_id = tracker.log_config_result(
                parent_run, sweep_id, cfg_i.config_id, cfg_i.name, cfg_i.spec(), ds.fingerprint,
                metrics={**metrics, **extra}, chunk_stats=inputs["chunk_stats"], n_queries=n_queries,
                n_unlabelled=n_unlabelled, ms_per_query=ms,
                tables={"per_query.parquet": per_query, "rankings.parquet": out.run, "reachability.parquet": reach,
                        **tables})
        except Exception as e:
            log.warning("MLflow: could not log config %s (%s); it is in DuckDB — run `ragbench sync-mlflow` later",
                        cfg_i.name, str(e).splitlines()[0][:200])
    extra_rows = pl.DataFrame({"measure": list(extra), "mean": [float(v) for v in extra.values()]},
                              schema={"measure": pl.String, "mean": pl.Float64}).with_columns(
        n=pl.lit(n_queries - n_unlabelled, pl.Int64), n_unlabelled=pl.lit(n_unlabelled, pl.Int64))
    store.write_config(sweep_id, cfg_i.config_id, cfg_i.name, cfg_i.spec(), ds.fingerprint,
                       metrics=pl.concat([agg, extra_rows]), per_query=per_query, rankings=out.run,
                       n_queries=n_queries, n_unlabelled=n_unlabelled, ms_per_query=ms, mlflow_run_id=run_id,
                       chunk_stats=inputs["chunk_stats"], diagnostics=reach, ann=ann, answers=answers)
    log.info("config %s: %s = %.4f", cfg_i.name, cfg.metrics.primary, metrics.get(cfg.metrics.primary, math.nan))
    if answers is not None:
        log.info("config %s: answers EM %.3f F1 %.3f contains %.3f accuracy %.3f, answer-in-context %.3f; oracle %s",
                 cfg_i.name, extra["answer_em"], extra["answer_f1"], extra["answer_contains"],
                 extra["answer_accuracy"], extra["answer_in_context"],
                 {k[7:]: int(v) for k, v in extra.items() if k.startswith("oracle_")})
    chunkstats = {f"chunkstat_{k}": v for k, v in inputs["chunk_stats"].items()}
    outcome = ConfigOutcome(cfg_i.config_id, cfg_i.name, cfg_i.spec(), "finished",
                            {**metrics, **extra, **chunkstats}, n_queries, n_unlabelled)
    return outcome, out.run, out.judged_chunks


def _log_sweep_plots(tracker, parent_run: str, outcomes: list[ConfigOutcome], home: Path) -> None:
    """Evidence recall vs context budget and recall vs k, one line per config, on the sweep's parent run."""
    import tempfile

    from ragbench.reporting.plots import metric_curve

    done = {o.name: o.metrics for o in outcomes if o.status == "finished" and o.metrics}
    if not done:
        return
    with tempfile.TemporaryDirectory() as tmp:
        paths = [metric_curve(done, "recall@", "", Path(tmp) / "recall_at_k.png", title="Document recall@k",
                              xlabel="k", logx=True)]
        if any(k.startswith("evidence_recall@") for m in done.values() for k in m):
            paths.append(metric_curve(done, "evidence_recall@", "tok", Path(tmp) / "evidence_recall_vs_budget.png",
                                      title="Evidence recall within a context budget", xlabel="budget (tokens)",
                                      logx=True))
        for p in paths:
            tracker.client.log_artifact(parent_run, str(p), artifact_path="plots")


def _with_stored_metrics(store: ResultStore, sweep_id: str, outcomes: list[ConfigOutcome]) -> list[ConfigOutcome]:
    """Fill skipped (previously finished) configs with their stored metrics."""
    if not any(o.status == "skipped" for o in outcomes):
        return outcomes
    board = store.query("SELECT config_id, measure, mean FROM config_metrics WHERE sweep_id = ?", [sweep_id])
    counts = store.query("SELECT config_id, n_queries, n_unlabelled FROM configs WHERE sweep_id = ?", [sweep_id])
    by_cfg: dict[str, dict[str, float]] = {}
    for c, m, v in board.iter_rows():
        by_cfg.setdefault(c, {})[m] = v
    stats = store.query("SELECT config_id, stat, value FROM chunk_stats WHERE sweep_id = ?", [sweep_id])
    for c, m, v in stats.iter_rows():
        by_cfg.setdefault(c, {})[f"chunkstat_{m}"] = v
    n = {c: (q, u) for c, q, u in counts.iter_rows()}
    return [ConfigOutcome(o.config_id, o.name, o.spec, "finished", by_cfg.get(o.config_id, {}),
                          *n.get(o.config_id, (0, 0))) if o.status == "skipped" else o for o in outcomes]
