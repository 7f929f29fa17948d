"""Sweep reports, the public entry point: build the report once, render it in any format.

The room behind it: :mod:`~ragbench.reporting.model` (:class:`SweepReport`, :func:`build_report`: leaderboard,
comparisons, held-out, cost and the Pareto front, chunk statistics, per-class results, headline),
:mod:`~ragbench.reporting.leaderboard` (the one leaderboard model), one renderer per format
(:mod:`~ragbench.reporting.render_terminal`, :mod:`~ragbench.reporting.render_markdown`,
:mod:`~ragbench.reporting.render_html` with its Jinja2 templates, :mod:`~ragbench.reporting.render_json`,
:mod:`~ragbench.reporting.render_csv`), :mod:`~ragbench.reporting.plots` (all drawing) and
:mod:`~ragbench.reporting.write` (the HTML file and its MLflow artifacts). The names below are re-exported so that
``from ragbench.reporting.report import build_report, leaderboard_markdown`` keeps working.
"""

from __future__ import annotations

from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures, shallow_notes
from ragbench.reporting.model import SweepReport, build_report, per_query_values, report_leaderboard
from ragbench.reporting.verdicts import legend, report_rows, resolution, vs_best_rows
from ragbench.reporting.render_csv import report_csv
from ragbench.reporting.render_html import render_html
from ragbench.reporting.render_json import report_json
from ragbench.reporting.render_markdown import leaderboard_markdown, sweep_description
from ragbench.reporting.render_terminal import comparison_rich, leaderboard_rich, vs_best_rich
from ragbench.reporting.write import log_report_to_mlflow, write_html_report
from ragbench.results.lookup import resolve_config_id, resolve_sweep_id

__all__ = ["LEADERBOARD_MEASURES", "SweepReport", "build_report", "comparison_rich", "leaderboard_markdown",
           "leaderboard_measures", "leaderboard_rich", "legend", "log_report_to_mlflow", "per_query_values",
           "render_html", "report_leaderboard", "report_rows", "report_text", "resolution", "resolve_config_id",
           "resolve_sweep_id", "shallow_notes", "sweep_description", "vs_best_rich", "vs_best_rows",
           "write_html_report"]


def report_text(report: SweepReport, fmt: str) -> str:
    """The leaderboard as ``markdown`` (display cells, :func:`leaderboard_markdown`), ``csv`` (raw numbers, every
    measure with its CI) or ``json`` (one object per config: :func:`report_rows` plus ``primary`` and
    ``sweep_id``)."""
    if fmt == "markdown":
        return leaderboard_markdown(report)
    return report_json(report) if fmt == "json" else report_csv(report)
