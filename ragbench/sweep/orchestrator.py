"""The sweep: decide, then execute the plan, resumable, one config's failure isolated from the others.

:func:`run_sweep` reads as its plan: the decision of which configs run, are reused or are skipped
(:func:`~ragbench.sweep.decide.decide`, pure), the graph of stages that evaluates the configs to run
(:func:`~ragbench.sweep.graph.sweep_graph`, data) executed by a :class:`~ragbench.sweep.runner.StageRunner`, the
stages' shared work (:class:`~ragbench.sweep.work.StageWork`), recording (:mod:`ragbench.sweep.recording`), the
k sweep (:mod:`ragbench.sweep.ksweep`) and the MLflow lifecycle (:mod:`ragbench.sweep.tracking`). The
:class:`~ragbench.sweep.runner.LocalRunner` runs each stage at once, in order; ``flows/sweep.py`` passes one that
submits each stage as a Prefect task with its upstream futures, so independent branches run at once. Nothing here
imports Prefect.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from ragbench.config import RunConfig, SweepConfig
from ragbench.core.errors import StoreBusyError
from ragbench.core.hashing import stable_hash
from ragbench.core.locks import file_lock
from ragbench.core.models import configure_model_store, configure_revision_memo
from ragbench.core.progress import log, progress
from ragbench.core.paths import slug
from ragbench.core.settings import DEFAULT_HOME, Settings
from ragbench.core.workers import Workers
from ragbench.data import Dataset, load_dataset
from ragbench.embedding.finetune import resolve_finetuned
from ragbench.evaluation.query_classes import assign_classes
from ragbench.results.outcomes import ConfigOutcome, SweepResult
from ragbench.results.spool import Spool, SweepWriter, merge_spool
from ragbench.results.store import ResultStore
from ragbench.sweep.budget import OverBudget, not_failing_over_budget
from ragbench.sweep.config_rate import remember_config_rate
from ragbench.sweep.decide import COPY_FAILED, SPOOLED, StoreHolds, SweepPlan, decide
from ragbench.judgments.rescore import rejudge, rejudge_sources, tuning_unlabelled
from ragbench.sweep.evaluate import (EVALUATION_VERSION, MeasureRefresh, evaluation_key, plan_measure_refresh,
                                     refresh_measures)
from ragbench.sweep.graph import DATASET, StageFns, execute, outcome, sweep_graph
from ragbench.sweep.ksweep import KSweep
from ragbench.sweep.publish import stamp_without_report
from ragbench.sweep.recording import Recorder, warn
from ragbench.sweep.runner import Finished, LocalRunner, StageFuture, StageRunner, submit
from ragbench.sweep.screen import plan_and_screen
from ragbench.sweep.stages import preflight
from ragbench.sweep.tracking import open_sweep_tracking
from ragbench.sweep.work import MODEL_SLOTS, StageWork
from ragbench.sweep.wrap_up import CLOSE, remember_wrap_up

__all__ = ["MODEL_SLOTS", "SweepOptions", "experiment_name", "run_sweep", "sweep_settings"]


@dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs: ``runner`` (default :class:`~ragbench.sweep.runner.LocalRunner`), ``home`` (the CLI's
    ``--home``), ``fail_fast`` (stop at the first failing config), ``fresh`` (no resume, no reuse), ``workers``
    (where embedding shards run; default here), ``budget`` (seconds: no expensive stage starts that would end
    after it, :mod:`ragbench.sweep.budget`; None: the sweep file's ``budget:``, else none), ``budget_from`` (the
    wall-clock time, :func:`time.time`, the budget counts from: the command's start; None: this call's),
    ``publish_after`` (the caller publishes the report once the sweep returns, as the CLI and the flow do: the
    budget keeps its seconds too, :mod:`ragbench.sweep.wrap_up`)."""

    runner: StageRunner | None = None
    home: Path | str | None = None
    fail_fast: bool = False
    fresh: bool = False
    workers: Workers | None = None
    budget: float | None = None  # seconds (the CLI's --budget; the sweep file's budget: when None)
    budget_from: float | None = None
    publish_after: bool = False


def sweep_settings(cfg: SweepConfig, settings: Settings | None = None, home: Path | str | None = None) -> Settings:
    """The settings a sweep runs with. One precedence for every setting that exists at several levels: the
    command line, then the environment, then the sweep file, then the default.

    The home: ``home`` (the CLI's ``--home``), else a home ``settings`` already names (``$RAGBENCH_HOME``, or a
    caller's ``Settings(home=...)``), else the sweep file's ``output.home``, else ``./.ragbench``. The MLflow URI:
    ``settings.mlflow_tracking_uri`` (``$MLFLOW_TRACKING_URI``), else ``output.mlflow_tracking_uri``, else SQLite
    under the home. The sweep file only fills what nothing above it named, so applying this to its own result
    changes nothing (the CLI resolves once and :func:`run_sweep` resolves again)."""
    settings = settings or Settings()
    if cfg.output.mlflow_tracking_uri and not settings.mlflow_tracking_uri:
        settings = settings.replace(mlflow_tracking_uri=cfg.output.mlflow_tracking_uri)
    if home is not None:
        return settings.with_home(home)
    named = settings.environ.get("RAGBENCH_HOME") or Path(settings.home) != DEFAULT_HOME
    return settings if named else settings.with_home(cfg.output.home)


def experiment_name(cfg: SweepConfig) -> str:
    """The MLflow experiment of a sweep: ``output.experiment`` or ``ragbench/<sweep name>``."""
    return cfg.output.experiment or f"ragbench/{cfg.name}"


def run_sweep(cfg: SweepConfig, settings: Settings | None = None, options: SweepOptions | None = None,
              **overrides) -> SweepResult:
    """Run (or resume) a sweep and return what every config scored.

    ``options`` (a :class:`SweepOptions`), or its fields as keywords (``run_sweep(cfg, settings, home=...,
    fresh=True)``; keywords win over ``options``). ``workers`` runs the embedding shards (default: here, one after
    another; a :class:`DaskWorkers` spreads them over a Dask cluster, with the same vectors in the same cache).

    A sweep of the same spec on the same data that did not finish is resumed: configs already stored are skipped,
    chunks and vectors come from the cache. A config already evaluated by an earlier sweep with the same
    evaluation key (same config, dataset fingerprint, evaluation settings and models, and
    :data:`~ragbench.sweep.evaluate.EVALUATION_VERSION`) is not evaluated again: its stored results are copied
    into this sweep and the log names the sweep they came from, so rerunning an unchanged sweep costs seconds.
    ``fresh`` evaluates every config anew (no resume, no reuse). A config that raises is recorded as failed; the
    others go on. Two processes never run the same sweep at once: the second fails with a message naming the first.
    """
    options = replace(options or SweepOptions(), **overrides)
    started = time.perf_counter()  # a budget counts from here, or from the command's start when given
    if options.budget_from is not None:
        started -= max(0.0, time.time() - options.budget_from)
    settings = sweep_settings(cfg, settings, options.home).apply()
    preflight(cfg, settings)
    home = settings.ensure_home()
    configure_revision_memo(home / "cache" / "revisions.json")
    runner = options.runner or LocalRunner()
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
        sweep = _Sweep(cfg, ds, settings, replace(options, runner=runner), spec_hash, loaded)
        sweep.started = started
        result = sweep.run()
    if not options.publish_after:  # no report will follow: a rerun without one may then be up to date
        stamp_without_report(result.sweep_id, settings)
    return result


def _write_query_texts(store: ResultStore, ds) -> None:
    """The question texts, once per dataset (``queries`` table). A write, so a busy file skips it (a later sweep
    writes them) without marking the store unreadable: a read-only holder still lets this sweep resume and reuse."""
    try:
        store.write_query_texts(ds.fingerprint, ds.queries)
    except StoreBusyError as e:
        log.info("results.duckdb is held by %s: question texts are left for a later sweep", e.holder)


class _Sweep:
    """One execution of a sweep: open (or resume) it, decide, run the graph of what is left, close it."""

    def __init__(self, cfg: SweepConfig, ds: Dataset, settings: Settings, options: SweepOptions, spec_hash: str,
                 loaded: StageFuture | None = None):
        self.cfg, self.ds, self.settings, self.options, self.spec_hash = cfg, ds, settings, options, spec_hash
        self.loaded = loaded if loaded is not None else Finished(ds)  # the load stage: upstream of every chunk
        self.home = Path(settings.home)
        # a busy file does not stop the sweep: reads give up after this wait, writes go to the spool
        self.store = ResultStore(self.home / "results.duckdb", settings.results_busy_wait_s, busy_ok=True)
        self.spool = Spool(self.home)
        self.can_read = True

    def run(self) -> SweepResult:
        work = StageWork(self.cfg, self.ds, self.settings, self.options.workers)
        try:
            return self._run(work)
        finally:  # a local LLM server never outlives the sweep, whatever happened
            work.stop_llm()

    def _run(self, work: StageWork) -> SweepResult:
        t0 = time.perf_counter()
        cfg, ds = self.cfg, self.ds
        for w in ds.warnings[:20]:
            log.warning(w)
        configs = cfg.expand()
        holder = merge_spool(self.settings, self.store.with_wait(0)).holder  # what earlier sweeps left comes first
        if holder:
            log.warning("results.duckdb is held by %s: %d spooled result(s) of earlier sweeps stay in %s until it "
                        "frees", holder, self.spool.count(), self.spool.root)
        sweep_id = (writer := self._open_sweep()).sweep_id
        getattr(self.options.runner, "sweep_started", lambda *_: None)(sweep_id, cfg.name)  # e.g. names the run
        plan = self._decide(configs, sweep_id, work)
        tracking = open_sweep_tracking(self.settings, cfg, experiment_name(cfg), sweep_id, ds.fingerprint, writer,
                                       len(plan.reused))
        recorder = Recorder(writer, cfg.metrics, ds.fingerprint)
        self.clock, todo, outcomes = plan_and_screen(cfg, ds, self.home, plan, work, recorder, self.options,
                                                     getattr(self, "started", None))
        outcomes += [ConfigOutcome(c.config_id, c.name, c.spec(), "skipped", reused_from=plan.reused.get(c.config_id))
                     for c in configs if c.config_id in plan.stored]
        with progress(f"sweep {cfg.name}: configs", len(todo), eta=self.clock.eta_seconds) as advance:
            recorder.advance = advance
            outcomes += self._execute(todo, work, recorder)
        remember_config_rate(self.home, *self.clock.measured_configs(), ds.queries.height, cfg.generation)
        closing = time.perf_counter()  # what follows the last stage, timed for the next budget (wrap_up)
        outcomes = self._with_stored_metrics(outcomes, sweep_id)
        for o in outcomes:
            if o.reused_from:
                warn(o.label, o.metrics, cfg.metrics.primary)
        KSweep(ds, work.generator, cfg.metrics.primary, self.store, writer, sweep_id, tracking).run(
            outcomes, plan.stored, recorder.best, getattr(cfg.generation, "k_sweep", None))  # None: no generation
        n_failed = sum(o.status == "failed" for o in outcomes)
        try:
            writer.finish("finished" if n_failed == 0 else "finished_with_failures", self.settings.results_final_wait_s)
        finally:  # results that stay spooled are logged to MLflow when they are merged
            tracking.close(outcomes, n_failed, len(configs))
            work.index.close()
        # stored configs read as finished by now (_with_stored_metrics): as the report counts them
        remember_wrap_up(self.home, CLOSE, sum(o.status == "finished" for o in outcomes), time.perf_counter() - closing)
        seconds = time.perf_counter() - t0
        log.info("sweep %s done in %.1f s: %d configs (%d reused), %d failed, %d vectors computed", sweep_id, seconds,
                 len(configs), len(plan.reused), n_failed, sum(s.computed for s in work.embed_stats))
        return SweepResult(sweep_id, cfg.name, ds.fingerprint, self.home, outcomes, work.embed_stats, seconds,
                           cfg.metrics.primary, cfg.metrics.show)

    def _read(self, read, default):
        """``read()``, or ``default`` once results.duckdb has proved unreadable (another process writes it)."""
        if not self.can_read:
            return default
        try:
            return read()
        except StoreBusyError as e:
            log.warning("results.duckdb is held by %s: earlier results cannot be read, so this sweep resumes and "
                        "reuses nothing (it evaluates every config)", e.holder)
            self.can_read = False
            return default

    def _open_sweep(self) -> SweepWriter:
        """The writer of the unfinished sweep of this spec and data (a resume), or of a new sweep, begun."""
        cfg, ds, store = self.cfg, self.ds, self.store
        _write_query_texts(store, ds)
        sweep_id = None if self.options.fresh else self._read(
            lambda: store.find_unfinished_sweep(self.spec_hash, ds.fingerprint), None)
        if sweep_id:
            log.info("resuming sweep %s", sweep_id)
            return SweepWriter(store, self.spool, sweep_id)
        # the id names folders (reports, spool): the sweep name as a slug (unchanged for a plain name like demo)
        sweep_id = base = f"{slug(cfg.name)}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}-{self.spec_hash[:6]}"
        n = 1
        # a warm rerun can start within the same second
        while self._read(lambda: store.sweep(sweep_id), None) is not None or self.spool.pending(sweep_id):
            n += 1
            sweep_id = f"{base}-{n}"
        writer = SweepWriter(store, self.spool, sweep_id)
        writer.begin_sweep(sweep_id=sweep_id, name=cfg.name, spec_hash=self.spec_hash, spec=cfg.canonical(),
                           dataset_name=ds.name, dataset_fingerprint=ds.fingerprint,
                           experiment=experiment_name(cfg) if cfg.output.mlflow else None, dataset_notes=ds.notes)
        return writer

    def _decide(self, configs: list[RunConfig], sweep_id: str, work: StageWork) -> SweepPlan:
        """The plan (:func:`~ragbench.sweep.decide.decide`) on what the store holds; reused results are copied
        into this sweep, and their measures of an older version recomputed, by :meth:`_reuse`."""
        ds, store, fresh = self.ds, self.store, self.options.fresh
        eval_keys = {c.config_id: evaluation_key(c, ds.fingerprint, work.evaluation, ds.labels_fingerprint)
                     for c in configs}
        results = {} if fresh else self._read(lambda: store.reusable_configs(eval_keys, prefer=sweep_id), {})
        # stored measures of an older version are recomputed from the stored rankings (their config is evaluated
        # again when that cannot be done, or when the versions cannot be read)
        by_id = {c.config_id: c for c in configs}
        refresh = self._read(lambda: plan_measure_refresh(store, {c: s for c, (s, _) in results.items()}, by_id,
                                                          work.evaluation), MeasureRefresh({}, frozenset(results)))
        results = {c: v for c, v in results.items() if c not in refresh.re_evaluate}
        # only the labels changed (judgments added): the stored rankings are re-judged, nothing retrieved
        retrieval_keys = {c.config_id: evaluation_key(c, ds.fingerprint, work.evaluation) for c in configs
                          if c.config_id not in results}
        self.rejudged = {} if fresh else self._read(lambda: rejudge_sources(
            store, retrieval_keys, by_id, tuning_unlabelled(ds, work.evaluation)), {})
        results.update(self.rejudged)
        plan = decide(configs, eval_keys, StoreHolds(sweep_id, results, fresh, self.can_read,
                                                     self.spool.pending(sweep_id)))
        plan = self._reuse(plan, refresh, by_id, work)
        work.eval_keys = plan.eval_keys
        log.info("sweep %s: %d configs (%d already done, %d reused) on %s [%s]: %d docs, %d queries (%d unlabelled)",
                 sweep_id, len(configs), len(plan.done), len(plan.reused), ds.name, ds.fingerprint, ds.corpus.height,
                 ds.queries.height, ds.n_unlabelled)
        for d in plan.decisions:
            if d.action == "reuse":
                log.info("config %s: reused the results of sweep %s (same data, config, evaluation settings and "
                         "evaluation version %d; --fresh re-evaluates)", d.config.labels.text, d.origin,
                         EVALUATION_VERSION)
        return plan

    def _reuse(self, plan: SweepPlan, refresh: MeasureRefresh, by_id: dict[str, RunConfig],
               work: StageWork) -> SweepPlan:
        """Copy the reused configs' rows into this sweep and recompute their stale measures; what cannot be
        copied or recomputed (the store is busy) is run instead."""
        store, sweep_id = self.store, plan.sweep_id
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
            refresh_measures(store, sweep_id, refresh.only(plan.stored), by_id, self.ds, work.evaluation,
                             work.chunk_cache)
            rejudge(store, sweep_id, [c for c in self.rejudged if c in plan.stored], by_id, self.ds, work.evaluation,
                    plan.eval_keys)
        except StoreBusyError as e:
            log.warning("results.duckdb is held by %s: measures of a new version cannot be recomputed in the stored "
                        "results, so the configs earlier sweeps evaluated are evaluated again", e.holder)
            plan = plan.without_reuse(COPY_FAILED)
        return plan

    def _execute(self, configs: list[RunConfig], work: StageWork, recorder: Recorder) -> list[ConfigOutcome]:
        """Submit the graph of ``configs`` (:func:`~ragbench.sweep.graph.sweep_graph`), then collect each config's
        outcome in config order (a failure recorded as such, or raised with ``fail_fast``)."""
        fns = self.clock.wrap(StageFns(work.chunk, work.embed_queries, work.embed_documents, work.index_chunks,
                                       work.evaluate, recorder.record))  # the budget's gate and the ETA
        graph = sweep_graph(configs, self.cfg.chunkers, fns)
        work.count_bm25_users(graph.order)
        last = {chain[-1]: chain for chain in graph.chains.values()}

        def fail_fast(stage, futures) -> None:  # stop at the first failure: wait for each config before the next
            if stage.output in last:
                outcome([futures[name] for name in last[stage.output]])

        futures = execute(graph.stages, self.options.runner, {DATASET: self.loaded},
                          not_failing_over_budget(fail_fast) if self.options.fail_fast else None)
        outcomes = []
        remaining = {i: sum(j == i for j, _ in graph.order) for i, _ in graph.order}
        for i, c in graph.order:
            try:
                outcomes.append(outcome([futures[name] for name in graph.chains[c.config_id]]))
            except Exception as e:
                if self.options.fail_fast and not isinstance(e, OverBudget):  # over budget: not a failure
                    raise
                outcomes.append(recorder.failed(c, e))
            remaining[i] -= 1
            if remaining[i] == 0:  # the chunker's shared plan is no longer needed
                work.drop_plan(i)
        for name in graph.embeddings:  # the vectors computed, in a fixed order
            try:
                stats = futures[name].result()
            except Exception:  # its configs failed and said why
                continue
            work.embed_stats.append(stats[1] if isinstance(stats, tuple) else stats)
        return outcomes

    def _with_stored_metrics(self, outcomes: list[ConfigOutcome], sweep_id: str) -> list[ConfigOutcome]:
        """Fill skipped (previously finished) configs with their stored metrics."""
        if not any(o.status == "skipped" for o in outcomes):
            return outcomes
        stored = self._read(lambda: self.store.stored_config_metrics(sweep_id), {})
        return [o.finished_from(stored) if o.status == "skipped" else o for o in outcomes]
