"""After a sweep: put the answer where people look in the morning.

:func:`publish_sweep` builds the sweep's report from DuckDB and writes it (self-contained HTML + plots, also under
``report/`` of the MLflow parent run), then puts on the parent run the best config's metrics, the configs tied
with it and a markdown description (the leaderboard), and gives every config's child run its own plot (recall@k,
primary measure per query class). The CLI and the Prefect flow call it after :func:`~ragbench.sweep.run_sweep`;
in a notebook, call it yourself. Nothing here can fail the sweep: every step only warns.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ragbench.core.paths import home_path
from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.reporting.plots import config_plot
from ragbench.reporting.model import SweepReport, build_report
from ragbench.reporting.render_markdown import sweep_description
from ragbench.reporting.write import write_html_report
from ragbench.results.store import ResultStore
from ragbench.results.tracking import default_tracking_uri, open_tracker, run_url


@dataclass(frozen=True)
class Published:
    """Where the answer went: the report (None when it could not be built), its HTML file, the MLflow parent run
    and a URL to it (for a SQLite store: where ``mlflow ui`` serves it by default)."""

    sweep_id: str
    report: SweepReport | None
    html: Path | None
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def publish_sweep(sweep_id: str, settings: Settings, *, out_dir: Path | None = None, mlflow: bool = True,
                  config_plots: bool = True) -> Published:
    """Write the report of ``sweep_id`` (into ``out_dir``, default ``<home>/reports/<sweep id>``, the id as a slug
    and checked to stay inside the home) and, when the sweep has an MLflow parent run and ``mlflow`` is on,
    summarize the sweep on it and plot each config on its child run (``config_plots``)."""
    home = Path(settings.home)
    store = ResultStore(home / "results.duckdb")
    try:
        report = build_report(store, sweep_id)
        folder = out_dir or home_path(home, "reports", sweep_id, what="the report folder")
        html = write_html_report(store, sweep_id, folder, settings=settings, log_to_mlflow=mlflow, report=report)
    except Exception as e:  # a sweep whose every config failed has no report; the sweep itself stands
        log.warning("no report for sweep %s: %s", sweep_id, _first_line(e))
        return Published(sweep_id, None, None)
    run_id, url = report.mlflow_run_id, None
    if mlflow and run_id:
        try:
            url = _summarize_on_mlflow(store, report, settings, html, config_plots)
        except Exception as e:
            log.warning("MLflow: could not summarize sweep %s on run %s: %s", sweep_id, run_id, _first_line(e))
    return Published(sweep_id, report, html, run_id, url)


def _summarize_on_mlflow(store: ResultStore, report: SweepReport, settings: Settings, html: Path,
                         config_plots: bool) -> str:
    sweep = store.sweep(report.sweep_id) or {}
    tracker = open_tracker(settings, sweep.get("experiment") or f"ragbench/{report.sweep_name}")
    if tracker is None:
        raise ConnectionError("MLflow is unavailable")
    run_id = report.mlflow_run_id
    best = report.best
    url = run_url(default_tracking_uri(settings), tracker.client.get_run(run_id).info.experiment_id, run_id)
    description = sweep_description(report, html, limit=20)
    tracker.log_sweep_summary(
        run_id, best_config_id=best, best_name=report.name_of(best), best_label=report.label_of(best),
        best_metrics=store.config_means(report.sweep_id, best),
        tied_with_best=[report.label_of(c) for c in report.tied_with_best], description=description,
        primary=report.primary)
    _log_costs(tracker, report)
    if config_plots:
        _plot_configs(tracker, report)
    log.info("MLflow: sweep %s summarized on run %s", report.sweep_id, url)
    return url


def _log_costs(tracker, report: SweepReport) -> None:
    """On the parent run: the cost table with the Pareto front (``report/pareto.json``, an MLflow table), the
    front and the cheapest config tied with the best as tags (``ragbench.pareto_front``,
    ``ragbench.cheapest_tied_with_best``)."""
    costs = report.costs
    if costs is None or costs.is_empty():
        return
    run_id = report.mlflow_run_id
    tracker.client.log_table(run_id, data=costs.to_pandas(), artifact_file="report/pareto.json")
    front = costs.filter(pl.col("on_front"))["label"].to_list()
    cheapest = costs.filter(pl.col("cheapest_tied"))["label"].to_list()
    tracker.client.set_tag(run_id, "ragbench.pareto_front", "; ".join(front)[:5000] or "none")
    tracker.client.set_tag(run_id, "ragbench.cheapest_tied_with_best", cheapest[0] if cheapest else "none")


def _plot_configs(tracker, report: SweepReport) -> None:
    """``plots/config.png`` on every finished config's child run: its recall@k and per-class primary measure
    against the best config's."""
    curves, per_class = report.recall_curves, report.per_class

    def curve(cid: str) -> list[tuple[int, float]]:
        return list(curves.filter(pl.col("config_id") == cid).select("k", "recall").iter_rows())

    def classes(cid: str) -> dict[str, float]:
        return dict(per_class.filter(pl.col("config_id") == cid).select("query_class", "mean").iter_rows())

    best = report.best
    best_curve, best_classes = curve(best), classes(best)
    runs = report.configs.filter((pl.col("status") == "finished") & pl.col("mlflow_run_id").is_not_null())
    with tempfile.TemporaryDirectory() as tmp:
        for cid, child in runs.select("config_id", "mlflow_run_id").iter_rows():
            path = config_plot(curve(cid), best_curve if cid != best else None, classes(cid),
                               best_classes if cid != best else None, Path(tmp) / cid / "config.png",
                               title=report.label_of(cid), measure=report.primary)
            tracker.client.log_artifact(child, str(path), artifact_path="plots")
