"""A sweep's MLflow lifecycle, apart from the orchestration: the parent run opened once the sweep id is known, its
params the sweep file's grid (:func:`grid_params`), each config's child run logged by the result writer it is
handed to, plots and the k sweep on the parent run, and the run closed with the sweep's status once every config of
the sweep is a child of it (reused ones too: :func:`ragbench.results.night.log_night`).

The orchestrator sees only :class:`SweepTracking`: :func:`open_sweep_tracking` returns one (a no-op one when MLflow
is off or unreachable: results then go to DuckDB only), and calls to it never raise.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Protocol

import polars as pl

from ragbench.config import SweepConfig
from ragbench.core.progress import log
from ragbench.core.redact import redact_obj
from ragbench.core.settings import Settings
from ragbench.results.night import log_night, log_unlogged
from ragbench.results.outcomes import ConfigOutcome
from ragbench.results.tracking import flatten, open_tracker, sweep_params

#: the parent run's tag saying whether the sweep ran to its end (``true``/``false``)
FINISHED_TAG = "ragbench.finished"


class SweepTracking(Protocol):
    """What the orchestrator tells the tracking of a sweep."""

    def log_k_sweep(self, table: pl.DataFrame, config_name: str) -> None: ...

    def close(self, outcomes: list[ConfigOutcome], n_failed: int, n_configs: int) -> None: ...


class NoTracking:
    """MLflow off (or unreachable): nothing is logged."""

    def log_k_sweep(self, table: pl.DataFrame, config_name: str) -> None:
        pass

    def close(self, outcomes: list[ConfigOutcome], n_failed: int, n_configs: int) -> None:
        pass


class MlflowTracking:
    """The sweep's MLflow parent run ``parent_run`` on ``tracker``; ``writer`` (its ``store`` and ``sweep_id``) and
    ``dataset_fingerprint`` give the reused configs' children at :meth:`close`."""

    def __init__(self, tracker, parent_run: str, writer=None, dataset_fingerprint: str = ""):
        self.tracker, self.parent_run = tracker, parent_run
        self.writer, self.fingerprint = writer, dataset_fingerprint

    def log_k_sweep(self, table: pl.DataFrame, config_name: str) -> None:
        """The k-sweep table and its plot as artifacts of the parent run."""
        try:
            from ragbench.reporting.plots import plot_k_sweep  # matplotlib: only when a plot is drawn

            with tempfile.TemporaryDirectory() as tmp:
                table.write_parquet(Path(tmp) / "k_sweep.parquet")
                plot_k_sweep(table, Path(tmp) / "k_sweep.png", title=f"k sweep: {config_name}")
                for name in ("k_sweep.parquet", "k_sweep.png"):
                    self.tracker.client.log_artifact(self.parent_run, str(Path(tmp) / name), "plots")
        except Exception as e:
            log.warning("MLflow: could not log the k sweep: %s", e)

    def close(self, outcomes: list[ConfigOutcome], n_failed: int, n_configs: int) -> None:
        """Every config a child (the reused ones logged now, not recomputed, and this sweep's own that a killed
        process stored without logging), the sweep's plots, its counts, its status (FINISHED, or FAILED when a
        config failed) and ``ragbench.finished = true``."""
        if self.writer is not None:
            store, sweep_id = self.writer.store, self.writer.sweep_id
            try:  # a resumed sweep's configs that an earlier process stored but was killed before logging
                log_unlogged(self.tracker, store, sweep_id, self.parent_run, self.fingerprint)
                log_night(self.tracker, store, sweep_id, self.parent_run, self.fingerprint)
            except Exception as e:  # a busy store or server: `ragbench sync-mlflow` logs them later
                log.warning("MLflow: could not log every config under the sweep's run: %s",
                            (str(e).splitlines() or [type(e).__name__])[0][:200])
        try:
            self.tracker.client.set_tag(self.parent_run, FINISHED_TAG, "true")  # every config evaluated
            cache = self.writer.store.path.parent / "cache" if self.writer is not None else None
            _log_sweep_plots(self.tracker, self.parent_run, outcomes, cache)
            self.tracker.finish_sweep(self.parent_run, {"configs_failed": n_failed, "configs": n_configs},
                                      "FINISHED" if n_failed == 0 else "FAILED")
        except Exception as e:
            log.warning("MLflow: could not close the sweep run: %s", e)


def open_sweep_tracking(settings: Settings, cfg: SweepConfig, experiment: str, sweep_id: str,
                        dataset_fingerprint: str, writer, n_reused: int) -> SweepTracking:
    """Open (or find, on resume) the sweep's parent run in ``experiment`` and hand it to ``writer`` (which logs each
    config's child run); ``n_reused`` configs are tagged as reused (their runs are those of the sweeps that
    evaluated them). MLflow off or unreachable: a :class:`NoTracking`, with a warning when it was wanted."""
    if not cfg.output.mlflow:
        return NoTracking()
    tracker = open_tracker(settings, experiment)
    if tracker is None:
        return NoTracking()
    try:
        parent_run = tracker.sweep_run(sweep_id, cfg.name, grid_params(cfg, dataset_fingerprint))
        writer.tracker = tracker
        writer.set_sweep_mlflow_run(parent_run)
        # false until close() says otherwise: a sweep killed part-way stays unfinished on MLflow too
        tracker.client.set_tag(parent_run, FINISHED_TAG, "false")
        tracker.client.set_tag(parent_run, "ragbench.configs_total", str(len(cfg.expand())))
        if n_reused:
            tracker.client.set_tag(parent_run, "ragbench.reused_configs", str(n_reused))
    except Exception as e:
        log.warning("MLflow unavailable (%s); results go to DuckDB only — run `ragbench sync-mlflow` later",
                    str(e).splitlines()[0][:200])
        return NoTracking()
    return MlflowTracking(tracker, parent_run, writer, dataset_fingerprint)


#: MLflow's longest param value (characters)
PARAM_LIMIT = 6000


def _joined(parts) -> str:
    return "; ".join(parts)[:PARAM_LIMIT] or "none"


def _leaves(value, key: str, out: dict[str, str]) -> None:
    """``value`` flattened under ``key``: dict keys and list positions joined by ``.`` (``chunkers.1.size``)."""
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{key}.{k}" if key else str(k), out)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            _leaves(v, f"{key}.{i}", out)
    else:
        out.update(flatten({key: value}))


def grid_params(cfg: SweepConfig, dataset_fingerprint: str) -> dict[str, str]:
    """The parent run's params: the dataset (``dataset.*``, ``dataset_fingerprint``), the grid in words
    (``chunkers``, ``models``, ``retrievers``: labels joined by ``; ``; ``k``: the cutoffs; ``primary``; ``configs``:
    the grid's size) and the whole sweep file flattened under ``grid.`` (``grid.chunkers.1.size = 128``), so two
    sweeps' parents differ in MLflow's compare view exactly where their files differ. Values are cut at MLflow's
    6,000 characters; credentials are masked (:func:`ragbench.core.redact.redact_obj`)."""
    spec = redact_obj(cfg.canonical())  # an endpoint URL may carry a key: params reach MLflow
    grid: dict[str, str] = {}
    _leaves({k: v for k, v in spec.items() if k not in ("name", "dataset")}, "grid", grid)
    return {**sweep_params(spec["dataset"], dataset_fingerprint),
            "chunkers": _joined(c.name or c.explain() for c in cfg.chunkers),
            "models": _joined(e.label for e in cfg.embedders),
            "retrievers": _joined(r.name or r.explain() for r in cfg.retrievers),
            "k": ",".join(str(k) for k in cfg.metrics.cutoffs), "primary": cfg.metrics.primary,
            "configs": str(len(cfg.expand())), **{k: v[:PARAM_LIMIT] for k, v in grid.items()}}


def _log_sweep_plots(tracker, parent_run: str, outcomes: list[ConfigOutcome],
                     cache_root: Path | None = None) -> None:
    """Evidence recall vs context budget and recall vs k, one line per config, on the sweep's parent run (copied
    from the PlotCache under ``cache_root`` when it holds them for the same data: a warm rerun draws nothing)."""
    done = {o.name: o.metrics for o in outcomes if o.status == "finished" and o.metrics}
    if not done:
        return
    from ragbench.reporting.plots import cached_plot, metric_curve  # matplotlib: only when a plot is drawn

    with tempfile.TemporaryDirectory() as tmp:
        paths = [cached_plot(cache_root, Path(tmp) / "recall_at_k.png", metric_curve, metrics_by_config=done,
                             prefix="recall@", suffix="", title="Document recall@k", xlabel="k", logx=True)]
        if any(k.startswith("evidence_recall_at_") for m in done.values() for k in m):
            paths.append(cached_plot(cache_root, Path(tmp) / "evidence_recall_vs_budget.png", metric_curve,
                                     metrics_by_config=done, prefix="evidence_recall@", suffix="tok",
                                     title="Evidence recall within a context budget", xlabel="budget (tokens)",
                                     logx=True))
        for p in paths:
            tracker.client.log_artifact(parent_run, str(p), artifact_path="plots")
