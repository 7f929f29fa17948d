"""The leaderboard model as CSV: raw numbers at full precision, one row per config, best first."""

from __future__ import annotations

from ragbench.reporting.cells import sweep_columns
from ragbench.reporting.columns import LEADERBOARD_MEASURES
from ragbench.reporting.decision import decision_columns
from ragbench.reporting.label_coverage import JUDGED_CELL
from ragbench.reporting.leaderboard import sweep_leaderboard
from ragbench.reporting.model import SweepReport
from ragbench.reporting.pareto import COST_COLUMNS
from ragbench.reporting.tables import Column, to_csv
from ragbench.results.outcomes import SweepResult


def report_csv(report: SweepReport) -> str:
    """The report's leaderboard: ``rank, config_id, name, chunker, model, retriever, status``, every measure with
    its CI (``m, m_ci_low, m_ci_high``), ``judged`` (judged@k at the primary's cutoff), the test against the best,
    ``ms_per_query, queries, unlabelled, error`` and the cost columns with ``on_pareto_front,
    cheapest_tied_with_best``, then ``questions_needed`` (a tied config: questions to tell it from the best) and,
    with repeated held-out splits, ``holdout_wins, holdout_repeats_heldout_mean``
    (:func:`~ragbench.reporting.decision.decision_columns`)."""
    keys = ["rank", "config_id", "name", "chunker", "model", "retriever", "status"]
    for m in report.measures:
        keys += [m, f"{m}_ci_low", f"{m}_ci_high"]
    keys += [JUDGED_CELL] if report.label_coverage is not None else []  # judged@k at the primary's cutoff
    keys += ["tied_with_best", "worse_than_best", "p_vs_best", "wins", "ties", "losses", "ms_per_query", "queries",
             "unlabelled", "error"]
    keys += [*COST_COLUMNS, "on_pareto_front", "cheapest_tied_with_best"]
    extra = decision_columns(report.questions_needed, report.holdout_repeats)
    keys += ["questions_needed"] + (["holdout_wins", "holdout_repeats_heldout_mean"] if report.holdout_repeats else [])
    return to_csv([Column(k, k) for k in keys], [{**r, **extra.get(r["config_id"], {})} for r in report.board.dicts()])


def sweep_csv(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> str:
    """The leaderboard a sweep prints when it ends: ``config_id`` and every column of the table."""
    board = sweep_leaderboard(result, measures)
    return to_csv([Column("config_id", "config_id"), *sweep_columns(board)], board.dicts())
