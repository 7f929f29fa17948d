"""The sweep: every stage wired in order, resumable, one config's failure isolated from the others.

This is plain Python. The sweep is a graph of stages (see :meth:`_Sweep._run_graph`) submitted to a
:class:`~ragbench.sweep.runner.StageRunner`: the :class:`~ragbench.sweep.runner.LocalRunner` runs each stage at once,
in order; ``flows/sweep.py`` passes one that submits each stage as a Prefect task with its upstream futures, so
independent branches run at once. Nothing here imports Prefect.
"""

from __future__ import annotations

import math
import tempfile
import threading
import time
import traceback
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

from ragbench.chunking.chunk_statistics import chunk_shape_statistics, chunk_statistics
from ragbench.config import RunConfig, SweepConfig
from ragbench.core.cache import ChunkCache, EmbedStats, VectorCache
from ragbench.core.errors import RagbenchError, StoreBusyError
from ragbench.core.hashing import stable_hash
from ragbench.core.locks import file_lock
from ragbench.core.measure_keys import measure_key
from ragbench.core.models import configure_model_store, configure_revision_memo, count_tokens
from ragbench.core.progress import log, progress
from ragbench.core.redact import redact
from ragbench.core.schemas import index_texts
from ragbench.core.settings import Settings
from ragbench.core.workers import Workers
from ragbench.data import Dataset, load_dataset
from ragbench.embedding.embed import embed_texts, embedding_window_statistics
from ragbench.embedding.finetune import resolve_finetuned
from ragbench.evaluation.cost import EMBED_SAMPLE, bm25_params_of, embed_seconds_estimate
from ragbench.evaluation.metrics import measures_from_spec
from ragbench.evaluation.query_classes import assign_classes
from ragbench.generation.llm.context import ChunkTexts, ContextSpec
from ragbench.generation.spec import GenerationSpec
from ragbench.generation.stage import Generator, k_sweep_stage
from ragbench.index.build import index_stage
from ragbench.index.qdrant import open_index
from ragbench.results.outcomes import ConfigOutcome, ConfigResult, SweepResult
from ragbench.results.spool import Spool, SweepWriter, merge_spool
from ragbench.results.store import ResultStore
from ragbench.results.tracking import open_tracker, sweep_params
from ragbench.retrieval import RetrievalResources
from ragbench.sweep.decide import COPY_FAILED, SPOOLED, StoreHolds, decide
from ragbench.sweep.evaluate import (EVALUATION_VERSION, MeasureRefresh, evaluate_config, evaluation_key,
                                     plan_measure_refresh, refresh_measures)
from ragbench.sweep.plan import ChunkerPlan, ConfigInputs, EvaluationSpec
from ragbench.sweep.runner import Finished, LocalRunner, StageFuture, StageRunner, UpstreamFailed, submit
from ragbench.sweep.stages import chunk_stage, context_tokenizer, embed_documents_stage, preflight

#: warn when an embedder's window hides more than this share of the chunks' tokens
WINDOW_WARN_SHARE = 0.05

#: How many stages may run a neural model at once in one sweep process: embedding documents or queries, and
#: evaluating a config that reranks. One: torch already spreads one model over every core (intra-op threads), so
#: a second copy would only fight the first for the same cores and double the memory. Other stages (chunking,
#: BM25, indexing, judging, recording) run beside it as far as the runner's worker limit allows.
MODEL_SLOTS = 1


def sweep_settings(cfg: SweepConfig, settings: Settings | None = None, home: Path | str | None = None) -> Settings:
    """The settings a sweep runs with: ``home`` (the CLI's ``--home``) wins over the config's ``output.home``,
    which wins over ``settings.home`` (``$RAGBENCH_HOME``); the config's MLflow URI wins over the settings'."""
    settings = settings or Settings()
    if cfg.output.mlflow_tracking_uri:
        settings = settings.replace(mlflow_tracking_uri=cfg.output.mlflow_tracking_uri)
    return settings.with_home(home if home is not None else cfg.output.home)


def experiment_name(cfg: SweepConfig) -> str:
    """The MLflow experiment of a sweep: ``output.experiment`` or ``ragbench/<sweep name>``."""
    return cfg.output.experiment or f"ragbench/{cfg.name}"


def run_sweep(cfg: SweepConfig, settings: Settings | None = None, *, runner: StageRunner | None = None,
              home: Path | str | None = None, fail_fast: bool = False, fresh: bool = False,
              workers: Workers | None = None) -> SweepResult:
    """Run (or resume) a sweep and return what every config scored.

    ``workers`` runs the embedding shards (default: here, one after another; a :class:`DaskWorkers` spreads them
    over a Dask cluster, with the same vectors in the same cache).

    A sweep of the same spec on the same data that did not finish is resumed: configs already stored are skipped,
    chunks and vectors come from the cache. A config already evaluated by an earlier sweep with the same
    evaluation key (same config, dataset fingerprint, evaluation settings and models, and
    :data:`~ragbench.sweep.evaluate.EVALUATION_VERSION`) is not evaluated again: its stored results are copied
    into this sweep and the log names the sweep they came from, so rerunning an unchanged sweep costs seconds.
    ``fresh`` evaluates every config anew (no resume, no reuse). A config that raises is recorded as failed; the
    others go on. Two processes never run the same sweep at once: the second fails with a message naming the first.
    """
    settings = sweep_settings(cfg, settings, home).apply()
    preflight(cfg, settings)
    home = settings.ensure_home()
    configure_revision_memo(home / "cache" / "revisions.json")
    runner = runner or LocalRunner()
    loaded = submit(runner, "load-dataset", load_dataset, cfg.dataset, home / "cache")
    ds: Dataset = loaded.result()
    qc = cfg.query_classes
    ds = replace(ds, queries=assign_classes(ds.queries, qc.rules, qc.default, qc.override).select(ds.queries.columns))
    spec_hash = stable_hash(cfg.canonical())
    configure_model_store(home / "models")
    if any(e.finetune is not None for e in cfg.embedders):  # train (or reuse) before any config needs the model
        embedders = runner.run("finetune", resolve_finetuned, list(cfg.embedders), cfg.dataset, ds, home)
        cfg = cfg.model_copy(update={"embedders": tuple(embedders)})
    with file_lock(home / "locks" / f"sweep-{spec_hash}-{ds.fingerprint}.lock", f"sweep {cfg.name!r}"):
        return _Sweep(cfg, ds, settings, runner, spec_hash, fail_fast, fresh, workers, loaded).run()


class _Sweep:
    """One execution of a sweep; per-chunker resources (chunks, BM25 indexes, collections) and query vectors are
    built lazily, once, and shared by every config that needs them."""

    def __init__(self, cfg: SweepConfig, ds: Dataset, settings: Settings, runner: StageRunner, spec_hash: str,
                 fail_fast: bool, fresh: bool = False, workers: Workers | None = None,
                 loaded: StageFuture | None = None):
        self.cfg, self.ds, self.settings, self.runner, self.fail_fast = cfg, ds, settings, runner, fail_fast
        self.loaded = loaded if loaded is not None else Finished(ds)  # the load stage: upstream of every chunk
        self.fresh, self.workers = fresh, workers
        self.home = Path(settings.home)
        self.spec_hash = spec_hash
        self.evaluation = EvaluationSpec.of(cfg)
        # a busy file does not stop the sweep: reads give up after this wait, writes go to the spool
        self.store = ResultStore(self.home / "results.duckdb", settings.results_busy_wait_s, busy_ok=True)
        self.spool = Spool(self.home)
        self.can_read = True
        self.chunk_cache, self.vector_cache = ChunkCache(self.home / "cache"), VectorCache(self.home / "cache")
        self.index = open_index(settings)
        self.measures = measures_from_spec(cfg.metrics)
        self.embed_stats: list[EmbedStats] = []
        self.query_vectors: dict[str, np.ndarray] = {}
        self.rerankers: dict[str, object] = {}
        self.query_encodings: dict[str, dict] = {}  # serving latency: each query embedded once per model
        gen = cfg.generation
        self.generator = Generator(gen, settings) if gen is not None and gen.enabled else None
        # query rewrites use the generation endpoint (its defaults when the config has no generation: section)
        self.query_llm = self.generator
        if self.query_llm is None and any(r.rewrite is not None for r in cfg.retrievers):
            self.query_llm = Generator(gen or GenerationSpec(), settings)
        self.best: tuple[float, RunConfig, pl.DataFrame, pl.DataFrame] | None = None  # for the k sweep
        self._best_position = 0
        self._plans: dict[int, tuple[ChunkerPlan, threading.Lock]] = {}
        self._plans_lock = threading.Lock()
        self._encode_rates: dict[tuple[int, str], float] = {}  # (chunker, embedder): seconds per chunk encoded
        self._bm25_users: dict[int, int] = {}  # per chunker: configs still to evaluate that search its BM25 index
        self._record_lock = threading.RLock()  # DuckDB then MLflow, one config at a time
        self.model_slot = threading.BoundedSemaphore(MODEL_SLOTS)
        self.tracker = None
        self.parent_run: str | None = None

    # ------------------------------------------------------------ lifecycle
    def run(self) -> SweepResult:
        try:
            return self._run()
        finally:  # a local LLM server never outlives the sweep, whatever happened
            if self.query_llm is not None:
                self.query_llm.stop()  # the generator itself, or the rewrites' own endpoint

    def _run(self) -> SweepResult:
        t0 = time.perf_counter()
        cfg, ds, store = self.cfg, self.ds, self.store
        for w in ds.warnings[:20]:
            log.warning(w)
        configs = cfg.expand()
        holder = merge_spool(self.settings, store.with_wait(0)).holder  # what earlier sweeps left comes first
        if holder:
            log.warning("results.duckdb is held by %s: %d spooled result(s) of earlier sweeps stay in %s until it "
                        "frees", holder, self.spool.count(), self.spool.root)
        sweep_id = None if self.fresh else self._read(
            lambda: store.find_unfinished_sweep(self.spec_hash, ds.fingerprint), None)
        if sweep_id:
            log.info("resuming sweep %s", sweep_id)
            self.writer = SweepWriter(store, self.spool, sweep_id)
        else:
            sweep_id = base = f"{cfg.name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{self.spec_hash[:6]}"
            n = 1
            # a warm rerun can start within the same second
            while self._read(lambda: store.sweep(sweep_id), None) is not None or self.spool.pending(sweep_id):
                n += 1
                sweep_id = f"{base}-{n}"
            self.writer = SweepWriter(store, self.spool, sweep_id)
            self.writer.begin_sweep(sweep_id=sweep_id, name=cfg.name, spec_hash=self.spec_hash,
                                    spec=cfg.canonical(), dataset_name=ds.name, dataset_fingerprint=ds.fingerprint,
                                    experiment=experiment_name(cfg) if cfg.output.mlflow else None,
                                    dataset_notes=ds.notes)
        self.sweep_id = sweep_id
        getattr(self.runner, "sweep_started", lambda *_: None)(sweep_id, cfg.name)  # e.g. names the Prefect run
        eval_keys = {c.config_id: evaluation_key(c, ds.fingerprint, self.evaluation) for c in configs}
        results = {} if self.fresh else self._read(lambda: store.reusable_configs(eval_keys, prefer=sweep_id), {})
        # stored measures of an older version are recomputed from the stored rankings (their config is evaluated
        # again when that cannot be done, or when the versions cannot be read)
        by_id = {c.config_id: c for c in configs}
        refresh = self._read(lambda: plan_measure_refresh(store, {c: s for c, (s, _) in results.items()}, by_id,
                                                          self.evaluation), MeasureRefresh({}, frozenset(results)))
        results = {c: v for c, v in results.items() if c not in refresh.re_evaluate}
        plan = decide(configs, eval_keys, StoreHolds(sweep_id, results, self.fresh, self.can_read,
                                                     self.spool.pending(sweep_id)))
        if plan.blocked(SPOOLED):  # this sweep's start waits in the spool: a copy now would come before it
            log.warning("results.duckdb is held by another process: the %d config(s) earlier sweeps evaluated are "
                        "evaluated again", plan.blocked(SPOOLED))
        if plan.reused:
            try:
                store.copy_configs(sweep_id, {c: plan.stored[c][0] for c in plan.reused})
            except StoreBusyError as e:
                log.warning("results.duckdb is held by %s: the %d config(s) earlier sweeps evaluated cannot be "
                            "copied into this sweep, so they are evaluated again", e.holder, len(plan.reused))
                plan = plan.without_reuse(COPY_FAILED)
        try:
            refresh_measures(store, sweep_id, refresh.only(plan.stored), by_id, ds, self.evaluation, self.chunk_cache)
        except StoreBusyError as e:
            log.warning("results.duckdb is held by %s: measures of a new version cannot be recomputed in the stored "
                        "results, so the configs earlier sweeps evaluated are evaluated again", e.holder)
            plan = plan.without_reuse(COPY_FAILED)
        self.eval_keys, self.reused, stored = plan.eval_keys, plan.reused, plan.stored
        log.info("sweep %s: %d configs (%d already done, %d reused) on %s [%s]: %d docs, %d queries (%d unlabelled)",
                 sweep_id, len(configs), len(plan.done), len(self.reused), ds.name, ds.fingerprint, ds.corpus.height,
                 ds.queries.height, ds.n_unlabelled)
        for c in configs:
            if c.config_id in self.reused:
                log.info("config %s: reused the results of sweep %s (same data, config, evaluation settings and "
                         "evaluation version %d; --fresh re-evaluates)", c.name, self.reused[c.config_id],
                         EVALUATION_VERSION)
        self._open_tracking()

        outcomes = [ConfigOutcome(c.config_id, c.name, c.spec(), "skipped", reused_from=self.reused.get(c.config_id))
                    for c in configs if c.config_id in stored]
        todo = plan.todo
        with progress(f"sweep {cfg.name}: configs", len(todo)) as advance:
            outcomes += self._run_graph(todo, advance)

        outcomes = self._with_stored_metrics(outcomes)
        for o in outcomes:
            if o.reused_from:
                self._warn(o.name, o.metrics)
        self._k_sweep(outcomes, stored)
        n_failed = sum(o.status == "failed" for o in outcomes)
        try:
            self.writer.finish("finished" if n_failed == 0 else "finished_with_failures",
                               self.settings.results_final_wait_s)
        finally:  # results that stay spooled are logged to MLflow when they are merged
            self._close_tracking(outcomes, n_failed, len(configs))
            self.index.close()
        seconds = time.perf_counter() - t0
        log.info("sweep %s done in %.1f s: %d configs (%d reused), %d failed, %d vectors computed", sweep_id, seconds,
                 len(configs), len(self.reused), n_failed, sum(s.computed for s in self.embed_stats))
        return SweepResult(sweep_id, cfg.name, ds.fingerprint, self.home, outcomes, self.embed_stats, seconds,
                           cfg.metrics.primary, cfg.metrics.show)

    def _read(self, read, default):
        """``read()``, or ``default`` once results.duckdb proves unreadable (another process writes it): the sweep
        then reads nothing more from it and evaluates what it would have resumed or reused."""
        if not self.can_read:
            return default
        try:
            return read()
        except StoreBusyError as e:
            log.warning("results.duckdb is held by %s: earlier results cannot be read, so this sweep resumes and "
                        "reuses nothing (it evaluates every config)", e.holder)
            self.can_read = False
            return default

    def _open_tracking(self) -> None:
        if not self.cfg.output.mlflow:
            return
        self.tracker = open_tracker(self.settings, experiment_name(self.cfg))
        if self.tracker is None:
            return
        try:
            self.parent_run = self.tracker.sweep_run(
                self.sweep_id, self.cfg.name, sweep_params(self.cfg.dataset.model_dump(mode="json"),
                                                           self.ds.fingerprint))
            self.writer.tracker = self.tracker
            self.writer.set_sweep_mlflow_run(self.parent_run)
            if self.reused:  # their runs are those of the sweeps that evaluated them
                self.tracker.client.set_tag(self.parent_run, "ragbench.reused_configs", str(len(self.reused)))
        except Exception as e:
            log.warning("MLflow unavailable (%s); results go to DuckDB only — run `ragbench sync-mlflow` later",
                        str(e).splitlines()[0][:200])
            self.tracker = None

    def _close_tracking(self, outcomes: list[ConfigOutcome], n_failed: int, n_configs: int) -> None:
        if not (self.tracker and self.parent_run):
            return
        try:
            _log_sweep_plots(self.tracker, self.parent_run, outcomes)
            self.tracker.finish_sweep(self.parent_run, {"configs_failed": n_failed, "configs": n_configs},
                                      "FINISHED" if n_failed == 0 else "FAILED")
        except Exception as e:
            log.warning("MLflow: could not close the sweep run: %s", e)

    # ------------------------------------------------------------ the graph
    def _run_graph(self, configs: list[RunConfig], advance) -> list[ConfigOutcome]:
        """Submit every stage of ``configs`` as one graph, then collect each config's outcome in config order.

        load → chunk (per chunker) → embed (per chunker × embedder; queries once per embedder) → index →
        evaluate (per config) → record. A stage gets its upstream futures as arguments or in ``wait_for``, so a
        runner that can (Prefect) draws the edges and runs independent branches at once: chunkers do not wait for
        each other, and a BM25 config waits for its chunks only. Stages are submitted wave by wave (chunks, BM25
        configs, query vectors, document vectors, indexes, dense configs), always after their upstreams, so a
        bounded thread pool that takes them in order never waits on a stage queued behind it.
        """
        order = [(i, c) for i, ch in enumerate(self.cfg.chunkers) for c in configs if c.chunker == ch]
        for i, c in order:
            if bm25_params_of(c.retriever) is not None:
                self._bm25_users[i] = self._bm25_users.get(i, 0) + 1
        chunks: dict[int, StageFuture] = {}
        for i in dict.fromkeys(i for i, _ in order):
            chunker = self.cfg.chunkers[i]
            chunks[i] = submit(self.runner, f"chunk {chunker.name or chunker.explain()}", chunk_stage, self.ds,
                               chunker, self.chunk_cache, wait_for=[self.loaded])
        chains: dict[str, list[StageFuture]] = {}

        def evaluate(position: int, i: int, run_config: RunConfig, upstream: list[StageFuture],
                     **resources) -> None:
            evaluated = submit(self.runner, f"evaluate {run_config.labels}", self._evaluate, i, run_config,
                               chunks[i], **resources)
            recorded = submit(self.runner, f"record {run_config.labels}", self._record, position, run_config,
                              evaluated, advance)
            chains[run_config.config_id] = [chunks[i], *upstream, evaluated, recorded]
            if self.fail_fast:  # stop at the first failure: wait for each config before the next
                _outcome(chains[run_config.config_id])

        for position, (i, c) in enumerate(order):
            if c.embedder is None:
                evaluate(position, i, c, [])
        queries: dict[str, StageFuture] = {}
        for _, c in order:
            emb = c.embedder
            if emb is not None and emb.spec_id not in queries:
                queries[emb.spec_id] = submit(self.runner, f"embed queries × {emb.label}", self._embed_queries, emb,
                                            wait_for=[self.loaded])
        first: dict[tuple[int, str], RunConfig] = {}  # per chunker × embedder, the config its collection follows
        sparse_first: dict[tuple[int, str], RunConfig] = {}
        for i, c in order:
            if c.embedder is not None:
                first.setdefault((i, c.embedder.spec_id), c)
                if c.retriever.uses_sparse_collection:
                    sparse_first.setdefault((i, c.embedder.spec_id), c)
        vectors = {key: submit(self.runner, f"embed {c.labels.chunker} × {c.embedder.label}",
                               self._embed_documents, key[0], chunks[key[0]], c.embedder) for key, c in first.items()}
        collections = {key: self._submit_index(key[0], c, chunks[key[0]], vectors[key], sparse=False)
                       for key, c in first.items()}
        hybrid = {key: self._submit_index(key[0], c, chunks[key[0]], vectors[key], sparse=True)
                  for key, c in sparse_first.items()}
        for position, (i, c) in enumerate(order):
            if c.embedder is None:
                continue
            key = (i, c.embedder.spec_id)
            upstream = [vectors[key], collections[key], queries[key[1]]]
            resources = {"collection": collections[key], "query_vectors": queries[key[1]]}
            if c.retriever.uses_sparse_collection:
                upstream.append(hybrid[key])
                resources["hybrid_collection"] = hybrid[key]
            evaluate(position, i, c, upstream, **resources)

        outcomes = []
        remaining = {i: sum(j == i for j, _ in order) for i in chunks}
        for i, c in order:
            try:
                outcomes.append(_outcome(chains[c.config_id]))
            except Exception as e:
                if self.fail_fast:
                    raise
                with self._record_lock:
                    outcomes.append(self._failed(c, e))
                advance(1)
            remaining[i] -= 1
            if remaining[i] == 0:  # the chunker's shared plan is no longer needed
                self._plans.pop(i, None)
        for future in [*queries.values(), *vectors.values()]:  # the vectors computed, in a fixed order
            try:
                stats = future.result()
            except Exception:  # its configs failed and said why
                continue
            self.embed_stats.append(stats[1] if isinstance(stats, tuple) else stats)
        return outcomes

    def _plan(self, chunker_index: int, chunks: pl.DataFrame) -> tuple[ChunkerPlan, threading.Lock]:
        """The chunker's shared plan and the lock that guards building its parts (once, whichever config asks)."""
        with self._plans_lock:
            if chunker_index not in self._plans:
                self._plans[chunker_index] = (ChunkerPlan(chunks), threading.Lock())
            return self._plans[chunker_index]

    def _embed_documents(self, chunker_index: int, chunks: pl.DataFrame, emb) -> EmbedStats:
        """Every chunk's vector into the cache, holding the model slot (see :data:`MODEL_SLOTS`). When enough of
        them were encoded here, their measured rate is kept for the configs' ``embed_seconds``."""
        s = self.settings
        with self.model_slot:
            stats = embed_documents_stage(chunks, emb, self.vector_cache, s.embed_segment_rows, s.min_free_bytes,
                                          self.workers)
        if stats.computed >= EMBED_SAMPLE and stats.encode_seconds > 0:
            self._encode_rates[(chunker_index, emb.spec_id)] = stats.encode_seconds / stats.computed
        return stats

    def _embed_queries(self, emb) -> tuple[np.ndarray, EmbedStats]:
        s = self.settings
        with self.model_slot:
            return embed_texts(self.ds.queries["text"].to_list(), emb, "query", self.vector_cache,
                               s.embed_segment_rows, True, s.min_free_bytes)

    def _submit_index(self, chunker_index: int, run_config: RunConfig, chunks: StageFuture, vectors: StageFuture,
                      sparse: bool) -> StageFuture:
        emb = run_config.embedder
        name = f"index {run_config.labels.chunker} × {emb.label}{' + BM25' if sparse else ''}"
        return submit(self.runner, name, index_stage, self.ds.fingerprint, self.ds.corpus,
                      self.cfg.chunkers[chunker_index], emb, run_config.index, chunks, self.vector_cache, self.index,
                      sparse, disk_root=self.home, reserve_bytes=self.settings.min_free_bytes, wait_for=[vectors])

    def _evaluate(self, chunker_index: int, run_config: RunConfig, chunks: pl.DataFrame, collection: str | None = None,
                  query_vectors: tuple[np.ndarray, EmbedStats] | None = None,
                  hybrid_collection: str | None = None) -> tuple[ConfigResult, object]:
        """Retrieve and judge one config (:func:`~ragbench.sweep.evaluate.evaluate_config`); a reranking config
        holds the model slot while it runs."""
        try:
            inputs = self._inputs(run_config, chunker_index, chunks, collection,
                                  None if query_vectors is None else query_vectors[0], hybrid_collection)
            with self.model_slot if run_config.retriever.rerank is not None else nullcontext():
                result, out = evaluate_config(run_config, self.ds, self.measures, self.evaluation, inputs)
        finally:
            self._release_bm25(chunker_index, chunks, run_config)
        return replace(result, eval_key=self.eval_keys[run_config.config_id]), out

    def _release_bm25(self, chunker_index: int, chunks: pl.DataFrame, run_config: RunConfig) -> None:
        """Drop the chunker's BM25 indexes once no config left to evaluate searches them: at a million chunks an
        index holds about a gigabyte that the dense configs' HNSW build would otherwise sit on top of."""
        if bm25_params_of(run_config.retriever) is None:
            return
        plan, lock = self._plan(chunker_index, chunks)
        with lock:
            self._bm25_users[chunker_index] -= 1
            if self._bm25_users[chunker_index] == 0:
                plan.bm25.clear()

    def _record(self, position: int, run_config: RunConfig, evaluated, advance) -> ConfigOutcome:
        """Store one config's result (DuckDB, then MLflow), one config at a time; keep the best for the k sweep
        (the first in config order among equals, as a loop over the configs would)."""
        result, out = evaluated
        with self._record_lock:
            self.writer.record(result)
            self._log_result(result)
            value = result.value(self.cfg.metrics.primary)
            if value == value and (self.best is None or value > self.best[0]
                                   or (value == self.best[0] and position < self._best_position)):
                self.best, self._best_position = (value, run_config, out.run, out.judged_chunks), position
        advance(1)
        return result.outcome()

    def _inputs(self, run_config: RunConfig, chunker_index: int, chunks: pl.DataFrame, collection: str | None,
                query_vectors: np.ndarray | None, hybrid_collection: str | None) -> ConfigInputs:
        """What the retrieve/evaluate step of one config needs, built once per chunker and shared."""
        plan, lock = self._plan(chunker_index, chunks)
        tok = context_tokenizer(run_config)
        gen = self.cfg.generation
        ctx_tok = gen.context.tokenizer if gen is not None else ContextSpec().tokenizer
        emb = run_config.embedder
        with lock:
            if tok not in plan.tokens:
                counts = dict(zip(plan.chunks["chunk_id"], count_tokens(plan.chunks["text"], tok)))
                if plan.shape is None:
                    plan.shape = chunk_shape_statistics(plan.chunks, self.ds.spans, self.ds.corpus)
                plan.tokens[tok] = (counts, chunk_statistics(plan.chunks, counts, self.ds.spans, self.ds.corpus,
                                                             plan.shape))
            counts, stats = plan.tokens[tok]
            if ctx_tok not in plan.context_texts:  # per-chunk context work, shared by this chunker's configs
                plan.context_texts[ctx_tok] = ChunkTexts(ctx_tok, ContextSpec().shingle_size,
                                                         plan.tokens[ctx_tok][0] if ctx_tok in plan.tokens else None)
            if emb is not None:
                if emb.spec_id not in plan.windows:
                    plan.windows[emb.spec_id] = embedding_window_statistics(index_texts(plan.chunks),
                                                                            emb)
                stats = {**stats, **plan.windows[emb.spec_id]}
                if emb.spec_id not in plan.embed_seconds:  # measured by the embed stage, else on a sample
                    rate = self._encode_rates.get((chunker_index, emb.spec_id))
                    plan.embed_seconds[emb.spec_id] = (rate * plan.chunks.height if rate is not None else
                                                       embed_seconds_estimate(index_texts(plan.chunks), emb))
        retrieval = RetrievalResources(plan.chunks, vector_cache=self.vector_cache, bm25=plan.bm25,
                                       rerankers=self.rerankers, query_encodings=self.query_encodings,
                                       llm=self.query_llm.rewrite_llm if self.query_llm is not None else None)
        inputs = ConfigInputs(retrieval, tok, counts, stats, self.generator, plan.context_texts[ctx_tok],
                              plan.embed_seconds.get(emb.spec_id, 0.0) if emb is not None else 0.0)
        if emb is None:
            return inputs
        retrieval.index, retrieval.collection = self.index, collection
        retrieval.query_vectors = query_vectors
        if run_config.retriever.uses_sparse_collection:
            retrieval.hybrid_collection = hybrid_collection
        return inputs

    def _log_result(self, result: ConfigResult) -> None:
        means = result.means()
        log.info("config %s: %s = %.4f", result.name, measure_key(self.cfg.metrics.primary),
                 means.get(self.cfg.metrics.primary, math.nan))
        if result.answers is not None:
            verdicts = (dict(result.answers["verdict"].drop_nulls().value_counts().iter_rows())
                        if "verdict" in result.answers.columns else {})
            log.info("config %s: answers EM %.3f F1 %.3f contains %.3f accuracy %.3f, answer-in-context %.3f; "
                     "oracle %s", result.name, means["answer_em"], means["answer_f1"], means["answer_contains"],
                     means["answer_accuracy"], means["answer_in_context"], verdicts)
        self._warn(result.name, {**means, **{f"chunkstat_{k}": v for k, v in result.chunk_stats.items()}})

    def _warn(self, name: str, metrics: dict[str, float]) -> None:
        """Warnings next to the config's score: empty contexts, and an embedder window that hides the chunks."""
        primary = measure_key(self.cfg.metrics.primary)
        score = f"{primary} = {metrics.get(primary, math.nan):.4f}"
        for key, value in metrics.items():
            if key.startswith(measure_key("empty_contexts@")) and value > 0:
                log.warning("config %s (%s): %d quer%s got an empty context (%s): the budget left no room or nothing "
                            "was retrieved", name, score, value, "y" if value == 1 else "ies", key)
        over = metrics.get("chunkstat_chunks_over_embed_window", 0.0)
        unseen = metrics.get("chunkstat_tokens_never_embedded", 0.0)
        if unseen > WINDOW_WARN_SHARE:
            log.warning("config %s (%s): %.0f%% of its chunks are longer than the embedder's %d-token window; "
                        "%.0f%% of their tokens are never embedded (the model reads only the start of long chunks: "
                        "chunk smaller or raise max_seq_length)", name, score, 100 * over,
                        metrics.get("chunkstat_embed_window_tokens", 0), 100 * unseen)

    def _k_sweep(self, outcomes: list[ConfigOutcome], stored: dict[str, tuple[str, str]]) -> None:
        """End-to-end accuracy over context sizes k for the best config, on the sweep's parent run and in DuckDB
        (copied from the sweep it came from when the best config's results were reused)."""
        gen = self.cfg.generation
        if self.generator is None or gen.k_sweep is None:
            return
        primary = self.cfg.metrics.primary
        scored = [(o.metrics.get(primary, math.nan), o) for o in outcomes if o.status == "finished"]
        scored = [(v, o) for v, o in scored if not math.isnan(v)]
        if scored:
            best = max(scored, key=lambda vo: vo[0])[1]
            if best.config_id in stored and (self.best is None or best.metrics[primary] > self.best[0]):
                source = stored[best.config_id][0]
                try:
                    copied = source != self.sweep_id and self.store.copy_k_sweep(source, self.sweep_id,
                                                                                 best.config_id)
                except StoreBusyError:  # a k sweep computed now goes to the spool instead
                    copied = False
                if copied:
                    return
                # its run is not in memory: the best config evaluated now gets the k sweep, if any was
                log.info("k sweep: no stored k sweep of the best config %s (from sweep %s)%s", best.name,
                         stored[best.config_id][1], "; --fresh computes one" if self.best is None else
                         f"; running it on {self.best[1].name}, the best config evaluated now")
        if self.best is None:
            return
        value, run_config, run, judged = self.best
        try:
            table = k_sweep_stage(self.ds, run, judged, self.generator)
        except Exception as e:  # the configs' results stand; the k sweep is an extra view of the best one
            log.error("k sweep on %s failed: %s", run_config.name, e)
            return
        self.writer.write_k_sweep(run_config.config_id, table)
        log.info("k sweep on %s:\n%s", run_config.name, table.select("k", "accuracy", "answer_in_context", "recall"))
        if self.tracker and self.parent_run:
            try:
                from ragbench.reporting.plots import plot_k_sweep  # matplotlib: only when a plot is drawn

                with tempfile.TemporaryDirectory() as tmp:
                    table.write_parquet(Path(tmp) / "k_sweep.parquet")
                    plot_k_sweep(table, Path(tmp) / "k_sweep.png", title=f"k sweep: {run_config.name}")
                    for name in ("k_sweep.parquet", "k_sweep.png"):
                        self.tracker.client.log_artifact(self.parent_run, str(Path(tmp) / name), "plots")
            except Exception as e:
                log.warning("MLflow: could not log the k sweep: %s", e)

    def _failed(self, run_config: RunConfig, e: BaseException) -> ConfigOutcome:
        msg = redact(str(e) if isinstance(e, RagbenchError) else f"{type(e).__name__}: {e}")
        log.error("config %s failed: %s", run_config.name, msg)
        log.debug("%s", "".join(traceback.format_exception(e)))
        self.writer.record_failure(run_config.config_id, run_config.name, run_config.spec(), self.ds.fingerprint, msg)
        return ConfigOutcome(run_config.config_id, run_config.name, run_config.spec(), "failed", error=msg)

    def _with_stored_metrics(self, outcomes: list[ConfigOutcome]) -> list[ConfigOutcome]:
        """Fill skipped (previously finished) configs with their stored metrics."""
        if not any(o.status == "skipped" for o in outcomes):
            return outcomes
        stored = self._read(lambda: self.store.stored_config_metrics(self.sweep_id), {})
        return [ConfigOutcome(o.config_id, o.name, o.spec, "finished", *stored.get(o.config_id, ({}, 0, 0)),
                              reused_from=o.reused_from)
                if o.status == "skipped" else o for o in outcomes]


def _outcome(chain: list[StageFuture]) -> ConfigOutcome:
    """The outcome at the end of a config's chain of stages, or the error of the first stage that failed (a stage
    that did not run because an upstream failed says only that)."""
    try:
        return chain[-1].result()
    except Exception as e:
        for future in chain:
            try:
                future.result()
            except UpstreamFailed:
                continue
            except Exception as cause:
                raise cause from None
        raise e


def _log_sweep_plots(tracker, parent_run: str, outcomes: list[ConfigOutcome]) -> None:
    """Evidence recall vs context budget and recall vs k, one line per config, on the sweep's parent run."""
    done = {o.name: o.metrics for o in outcomes if o.status == "finished" and o.metrics}
    if not done:
        return
    from ragbench.reporting.plots import metric_curve  # matplotlib: only when a plot is drawn

    with tempfile.TemporaryDirectory() as tmp:
        paths = [metric_curve(done, "recall@", "", Path(tmp) / "recall_at_k.png", title="Document recall@k",
                              xlabel="k", logx=True)]
        if any(k.startswith("evidence_recall_at_") for m in done.values() for k in m):
            paths.append(metric_curve(done, "evidence_recall@", "tok", Path(tmp) / "evidence_recall_vs_budget.png",
                                      title="Evidence recall within a context budget", xlabel="budget (tokens)",
                                      logx=True))
        for p in paths:
            tracker.client.log_artifact(parent_run, str(p), artifact_path="plots")
