"""A sweep that would record nothing new is up to date: ``ragbench sweep`` says so and records nothing.

Rerunning an unchanged sweep used to record a second copy of the last one: a new sweep in DuckDB whose every
config is copied, a new MLflow parent run with a child per config, the report drawn again. That cost 4.5-5 s of
imports and MLflow with the local runner (the demo's 17.6 s under Prefect, the default) for a copy nobody asked for,
and it filled the MLflow experiment with duplicates of last night. As ``make`` or ``dvc repro``, the command now
first asks whether the newest sweep of this name already holds everything a run would record (:func:`up_to_date`),
and when it does, prints that sweep's leaderboard and where its report and MLflow run are. ``--again`` (or
``--fresh``) records a new sweep anyway; :func:`~ragbench.sweep.run_sweep` itself always records.

Up to date means all of these hold for the newest sweep named as this one (nothing else ran under the name since):

* it finished with every config finished (no failure, nothing over budget or screened out, no run in progress);
* the same spec (``spec_hash``) and dataset fingerprint;
* every config of the spec has its finished result in that very sweep under the evaluation key computed now
  (:func:`~ragbench.sweep.evaluate.evaluation_key`: config, data, labels, evaluation settings, model revisions,
  evaluation version), and no stored measure is of an older version;
* nothing waits in the spool, and with MLflow on every config has its MLflow run;
* its publication finished (:func:`~ragbench.sweep.publish.stamp_published`: the report file as ragbench last
  wrote it, checked by SHA-256, or, for a rerun without a report, a sweep that ran without one too; with MLflow on,
  on the same parent run in the same tracking store and experiment, that run and its child per config still there,
  not deleted) and the promotions are as they were then (the report's "against production" would read otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ragbench.config import SweepConfig
from ragbench.core.errors import StoreBusyError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.models import configure_model_store, configure_revision_memo
from ragbench.core.paths import home_path
from ragbench.core.settings import Settings
from ragbench.results.mlflow_runs import standing_children
from ragbench.results.outcomes import ConfigOutcome, SweepResult
from ragbench.results.spool import Spool
from ragbench.results.store import ResultStore
from ragbench.results.tracking import default_tracking_uri
from ragbench.data import load_dataset
from ragbench.sweep.evaluate import evaluation_key, plan_measure_refresh
from ragbench.sweep.orchestrator import experiment_name, sweep_settings
from ragbench.sweep.plan import EvaluationSpec
from ragbench.sweep.publish import Published, read_stamp


@dataclass(frozen=True)
class UpToDate:
    """The sweep that already holds what a run would record: its id, when it finished, its report, its MLflow
    parent run and that run's URL (None when unknown), and its configs' stored results (:class:`SweepResult`)."""

    sweep_id: str
    finished_at: datetime | None
    html: Path | None  # None: the sweep ran without its report
    mlflow_run_id: str | None
    mlflow_url: str | None
    result: SweepResult

    def published(self) -> Published:
        """Where the sweep's answer already is, as :func:`~ragbench.sweep.publish_sweep` returns it (the report
        itself is built again when printed)."""
        return Published(self.sweep_id, None, self.html, self.mlflow_run_id, self.mlflow_url)

    def sentence(self) -> str:
        """One line for the terminal and the log."""
        when = f" (finished {self.finished_at.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC)" if self.finished_at \
            else ""
        stand = "results, report and MLflow run" if self.html is not None else "results and MLflow run (no report)"
        return (f"up to date: nothing changed since sweep {self.sweep_id}{when}: the same spec, data, labels, "
                f"models, evaluation and promotions; its {stand} stand (--again records a new sweep)")


def up_to_date(cfg: SweepConfig, settings: Settings | None = None, home: Path | str | None = None, *,
               report: bool = True) -> UpToDate | None:
    """The newest sweep named ``cfg.name`` when it holds everything a run of ``cfg`` with ``settings`` would record
    now (see the module), else None; a run without its ``report`` (``--no-report``) is also answered by a sweep
    that ran without one. ``settings`` and ``home`` (the CLI's ``--home``) are resolved as
    :func:`~ragbench.sweep.run_sweep` resolves them (:func:`~ragbench.sweep.sweep_settings`). Loads the dataset
    (from its cache) to fingerprint it; a busy or unreadable results file means not up to date (the sweep then
    decides)."""
    settings = sweep_settings(cfg, settings, home).apply()
    home = Path(settings.home)
    if any(e.finetune is not None for e in cfg.embedders) or not (home / "results.duckdb").exists() \
            or Spool(home).count():
        return None
    try:
        return _holds_everything(cfg, settings, ResultStore(home / "results.duckdb", 0.0), report)
    except StoreBusyError:
        return None


def _holds_everything(cfg: SweepConfig, settings: Settings, store: ResultStore, report: bool) -> UpToDate | None:
    home = Path(settings.home)
    with store.reading():  # one connection for the reads (each opening of the file costs ~8 ms)
        sweep_id = store.latest_sweep_id(cfg.name)
        row = store.sweep(sweep_id) if sweep_id else None
    if row is None or row["status"] != "finished" or row["spec_hash"] != stable_hash(cfg.canonical()):
        return None
    ds = load_dataset(cfg.dataset, home / "cache")
    if row["dataset_fingerprint"] != ds.fingerprint:
        return None
    configure_revision_memo(home / "cache" / "revisions.json")
    configure_model_store(home / "models")
    evaluation, configs = EvaluationSpec.of(cfg), cfg.expand()
    keys = {c.config_id: evaluation_key(c, ds.fingerprint, evaluation, ds.labels_fingerprint) for c in configs}
    with store.reading():
        if not _all_held(store, sweep_id, keys, {c.config_id: c for c in configs}, evaluation, cfg.output.mlflow):
            return None
        stamp = _matching_stamp(home, row, store, settings, cfg, report, set(keys))
        stored = store.stored_config_metrics(sweep_id) if stamp else {}
    if stamp is None:
        return None
    outcomes = [ConfigOutcome(c.config_id, c.name, c.spec(), "skipped", reused_from=sweep_id).finished_from(stored)
                for c in configs]
    result = SweepResult(sweep_id, cfg.name, ds.fingerprint, home, outcomes, [], 0.0, cfg.metrics.primary,
                         cfg.metrics.show, up_to_date=True)
    return UpToDate(sweep_id, row.get("finished_at"), stamp[0], stamp[1], stamp[2], result)


def _all_held(store: ResultStore, sweep_id: str, keys: dict[str, str], configs: dict, evaluation,
              mlflow: bool) -> bool:
    """Every config of ``keys`` (``config_id -> evaluation key``) finished in ``sweep_id`` under that key, none of
    its measures of an older version, and with ``mlflow`` every one logged to MLflow."""
    held = store.reusable_configs(keys, prefer=sweep_id)
    if any(held.get(c, ("",))[0] != sweep_id for c in keys):
        return False
    refresh = plan_measure_refresh(store, dict.fromkeys(keys, sweep_id), configs, evaluation)
    if refresh.recompute or refresh.re_evaluate:
        return False
    return not (mlflow and not store.pending_mlflow_configs(sweep_id).is_empty())


def _matching_stamp(home: Path, row: dict, store: ResultStore, settings: Settings, cfg: SweepConfig,
                    report: bool, config_ids: set[str]) -> tuple[Path | None, str | None, str | None] | None:
    """``(report, MLflow run, its URL)`` from the sweep's publication stamp when it still matches: the report file
    unchanged (or, for a rerun without ``report``, none written), the promotions as they were, and with MLflow on
    the sweep's parent run, in the same tracking store and experiment, standing with a child for each of
    ``config_ids``; else None."""
    folder = home_path(home, "reports", row["sweep_id"], what="the report folder")
    stamp = read_stamp(folder)
    try:
        if stamp["html"] is None:  # the sweep ran without its report (--no-report): stands for a rerun without
            html, same_report = None, stamp["sweep_id"] == row["sweep_id"] and not report
        else:
            html = folder / Path(stamp["html"]).name
            same_report = stamp["sweep_id"] == row["sweep_id"] and file_sha256(html) == stamp["html_sha256"]
    except (OSError, KeyError, TypeError):  # no stamp, or one missing a field
        return None
    if not same_report or stamp.get("production") != store.promotions_state():
        return None
    run, uri = stamp.get("mlflow_run_id"), default_tracking_uri(settings)
    if cfg.output.mlflow and (run is None or run != row.get("mlflow_run_id") or row.get("experiment")
                              != experiment_name(cfg) or stamp.get("tracking_uri") != stable_hash(uri)
                              or not _runs_still_there(uri, run, config_ids, settings.mlflow_auth_header())):
        return None
    return html, run, stamp.get("mlflow_url")


def _runs_still_there(tracking_uri: str, run: str, config_ids: set[str], auth: dict[str, str]) -> bool:
    """The parent ``run`` is still an active run of an active experiment with an active child for each of
    ``config_ids`` (:func:`~ragbench.results.mlflow_runs.standing_children`, milliseconds, no MLflow import, asked
    with the credentials ``auth``); a store that cannot tell (a server not answering, or refusing the credentials)
    leaves the stamp to vouch for them."""
    children = standing_children(tracking_uri, run, auth)
    return children is None or config_ids <= children
