"""The report on disk and in MLflow: ``report.html`` with its PNG plots, logged under ``report/`` of the sweep's
MLflow parent run."""

from __future__ import annotations

from pathlib import Path

from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.reporting.model import SweepReport, build_report
from ragbench.reporting.plots import report_plots
from ragbench.reporting.render_html import render_html, report_links
from ragbench.results.store import ResultStore


def write_html_report(store: ResultStore, sweep_id: str, out_dir: Path, *, settings: Settings | None = None,
                      log_to_mlflow: bool = True, report: SweepReport | None = None, **kwargs) -> Path:
    """Write ``report.html`` (self-contained) and the PNG plots into ``out_dir``; log them to MLflow.

    ``report``: the report already built (else :func:`~ragbench.reporting.model.build_report` with ``kwargs``).
    The files are logged under ``report/`` of the sweep's MLflow parent run (``sweeps.mlflow_run_id``) with the
    tracking URI :func:`ragbench.results.tracking.default_tracking_uri` of ``settings`` (default: the store's
    folder). When the sweep has no MLflow run or MLflow is unreachable, the report is still written and a warning
    says why.

    Returns
    -------
    Path
        The HTML file.
    """
    report = report or build_report(store, sweep_id, **kwargs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = report_plots(report, out_dir, store.path.parent / "cache")
    path = out_dir / "report.html"
    links = report_links(report, out_dir, (store.path.parent / "reports").resolve(),
                         settings.mlflow_ui_url if settings else None)
    path.write_text(render_html(report, plots, links), encoding="utf-8")
    if log_to_mlflow:
        log_report_to_mlflow(report, [path, *plots.values()], settings or Settings(home=store.path.parent))
    return path


def log_report_to_mlflow(report: SweepReport, paths: list[Path], settings: Settings) -> str | None:
    """Log files as artifacts (``report/``) of the sweep's parent run; returns the run id, or None if not logged."""
    if not report.mlflow_run_id:
        log.info("sweep %s has no MLflow run; report not logged to MLflow", report.sweep_id)
        return None
    from ragbench.results.tracking import check_mlflow_store, default_tracking_uri

    try:
        check_mlflow_store(settings)  # a damaged store: the warning names it and the repair
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=default_tracking_uri(settings))
        for p in paths:
            client.log_artifact(report.mlflow_run_id, str(p), artifact_path="report")
    except Exception as e:  # the report is on disk either way; MLflow is for browsing
        log.warning("could not log the report to MLflow run %s: %s", report.mlflow_run_id,
                    str(e).splitlines()[0][:200])
        return None
    return report.mlflow_run_id
