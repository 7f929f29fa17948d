"""What ``ragbench sweep`` prints when it ends: the report's leaderboard and verdict, then where the report and the
MLflow run are (under every orchestrator)."""

from __future__ import annotations

from ragbench.core.progress import console, stdout
from ragbench.core.redact import redact

def closing(result, settings, published) -> None:
    """What a sweep prints when it ends: the report's leaderboard (CIs, marks), the sections since the previous
    sweep and against production and the verdict box, as ``ragbench report`` prints them
    (:func:`~ragbench.reporting.render_terminal.report_rich`); the sweep's own table (means only) when no report
    can be built (every config failed) or when the sweep answered with an LLM (its answer columns)."""
    from ragbench.reporting.leaderboard import sweep_leaderboard
    from ragbench.reporting.render_terminal import report_rich
    from ragbench.reporting.terminal import leaderboard_table

    rep = published.report if published is not None else None
    if rep is None:
        try:
            from ragbench.reporting.model import build_report
            from ragbench.results.store import ResultStore

            rep = build_report(ResultStore(settings.home / "results.duckdb"), result.sweep_id)
        except Exception as e:  # no finished config, or the store is busy: the sweep's own table says enough
            from ragbench.core.progress import log

            log.info("no report leaderboard for sweep %s: %s", result.sweep_id, str(e).splitlines()[0][:200]
                     if str(e) else type(e).__name__)
    if rep is None or sweep_leaderboard(result).answers:
        stdout.print(leaderboard_table(result, width=stdout.width))
    if rep is not None:
        console.print(f"sweep {result.sweep_id}: " + ("up to date, nothing recorded" if result.up_to_date else
                      f"{result.seconds:.0f} s, {result.vectors_computed} vectors computed")
                      + (f"; {result.n_failed} of {len(result.outcomes)} configs failed" if result.n_failed else ""),
                      highlight=False)
        for part in report_rich(rep, width=stdout.width):
            stdout.print(part)
        if result.n_failed:
            stdout.print(f"{result.n_failed} of {len(result.outcomes)} configs failed: "
                         + "; ".join(f"{o.name}: {o.error}" for o in result.outcomes if o.status == "failed"),
                         highlight=False, markup=False, soft_wrap=True)


def published_lines(published, settings, mlflow_on: bool) -> list[str]:
    """``report: <path>`` and ``MLflow: <where>`` after a sweep, under every orchestrator: the UI link when one is
    known (the tracking server, or ``RAGBENCH_MLFLOW_UI_URL``), else the run id and how to browse the store."""
    from ragbench.results.tracking import default_tracking_uri

    if published is None or published.html is None:
        return ["report: not written (see the warning above)"]
    out = [f"report: {published.html}"]
    if published.mlflow_url:
        out.append(f"MLflow: {published.mlflow_url}")
    elif published.mlflow_run_id:
        uri = redact(default_tracking_uri(settings))
        out.append(f"MLflow: parent run {published.mlflow_run_id} in {uri} (browse with `mlflow ui "
                   f"--backend-store-uri {uri}`; set RAGBENCH_MLFLOW_UI_URL to link to a running UI)")
    else:
        out.append("MLflow: not logged" + ("" if mlflow_on else " (output.mlflow is off)"))
    return out

