"""The leaderboard a sweep prints when it ends, for people (a table that fits the terminal, or markdown) and for
scripts (CSV, one JSON object per config), best first by the primary measure.

It renders the one leaderboard model (:func:`ragbench.reporting.leaderboard.sweep_leaderboard`) through the
renderers of the report; each config is shown as three columns, chunker · model · retriever, spelled out
(:mod:`ragbench.config.labels`); its stored ``name`` and id stay in the JSON and CSV.
"""

from __future__ import annotations

from ragbench.reporting.columns import LEADERBOARD_MEASURES
from ragbench.reporting.leaderboard import (ANSWER_COLUMNS, comparable, ranked, sweep_leaderboard,
                                            winner_heldout)
from ragbench.reporting.render_csv import sweep_csv
from ragbench.reporting.render_json import json_lines
from ragbench.reporting.render_markdown import sweep_markdown
from ragbench.reporting.render_terminal import leaderboard_table
from ragbench.results.outcomes import SweepResult

__all__ = ["ANSWER_COLUMNS", "LEADERBOARD_MEASURES", "comparable", "json_lines", "leaderboard_rows",
           "leaderboard_table", "leaderboard_text", "ranked", "winner_heldout"]


def leaderboard_rows(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> list[dict]:
    """One dict per config, best first: ``rank, config_id, name, chunker, model, retriever, status, error,
    primary, primary_value``, the leaderboard measures, ``queries`` (labelled) and ``unlabelled``
    (:func:`ragbench.reporting.leaderboard.row_dict`)."""
    return sweep_leaderboard(result, measures).dicts()


def leaderboard_text(result: SweepResult, fmt: str, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> str:
    """The leaderboard as ``markdown``, ``csv`` or ``json`` (one object per line, see :func:`json_lines`)."""
    if fmt == "json":
        return "\n".join(json_lines(result))
    return sweep_csv(result, measures) if fmt == "csv" else sweep_markdown(result, measures)
