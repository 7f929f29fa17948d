"""The one leaderboard model: configs best first by the primary measure, one :class:`LeaderboardRow` each.

Two sources fill it. A report (:class:`ragbench.reporting.model.SweepReport`, read from DuckDB) adds to every value
its 95 % bootstrap CI and its mark against the best (``★`` best, ``≈`` tied, ``▼`` significantly worse) and the
paired test against the best; a sweep that just ended (:class:`ragbench.results.outcomes.SweepResult`, in memory) has
the means only, plus the answer columns when it asked an LLM. Every renderer (``render_terminal``,
``render_markdown``, ``render_csv``, ``render_json``, ``render_html``) reads this model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ragbench.config.labels import ConfigLabels
from ragbench.data.holdout import heldout_key
from ragbench.evaluation.metrics import unreached_depth
from ragbench.generation.answering import VERDICTS
from ragbench.reporting.label_coverage import JUDGED_CELL, coverage_key
from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures
from ragbench.reporting.heldout import WinnerHeldOut
from ragbench.results.outcomes import NOT_RUN_STATUSES, ConfigOutcome, SweepResult

#: the answer columns of a sweep that asked an LLM: (header, measure key)
ANSWER_COLUMNS = (("EM", "answer_em"), ("F1", "answer_f1"), ("contains", "answer_contains"),
                  ("accuracy", "answer_accuracy"), ("answer∈ctx", "answer_in_context"))


@dataclass(frozen=True)
class Judged:
    """One measure of one config in a report: the mean, its 95 % bootstrap CI and its mark against the best."""

    mean: float
    ci_low: float
    ci_high: float
    mark: str


@dataclass(frozen=True)
class VsBest:
    """A config against the best on the primary measure: the set it is in, Holm-adjusted p, per-query W/T/L."""

    tied_with_best: bool
    worse_than_best: bool
    p_vs_best: float
    wins: int
    ties: int
    losses: int


@dataclass(frozen=True)
class LeaderboardRow:
    """One config on the leaderboard. ``rank`` is None for a config that is not ranked (failed, or too shallow
    for the primary measure: ``status`` says which). ``values``: measure -> mean (None when not comparable);
    ``judged`` (reports only): measure -> :class:`Judged`; ``extra``: the answer columns of a sweep, the cost
    cells of a report."""

    rank: int | None
    config_id: str
    name: str | None
    labels: ConfigLabels
    status: str
    error: str | None = None
    values: dict[str, float | None] = field(default_factory=dict)
    judged: dict[str, Judged] | None = None
    vs_best: VsBest | None = None
    counts: tuple[float | None, int | None, int | None] = (None, None, None)  # ms/query, labelled, unlabelled
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ranked(self) -> bool:
        """Whether the config has a rank (finished and comparable on the primary measure)."""
        return self.rank is not None


@dataclass(frozen=True)
class Leaderboard:
    """Rows best first; ``measures`` (the primary first) are the value columns; ``judged``: built from a report
    (CIs, marks, tests) rather than from a sweep's outcomes; ``answers``: the sweep asked an LLM."""

    primary: str
    measures: tuple[str, ...]
    rows: tuple[LeaderboardRow, ...]
    judged: bool
    winner: WinnerHeldOut | None = None
    answers: bool = False

    def dicts(self) -> list[dict]:
        """The rows as flat dicts (the keys tables, CSV and JSON name): see :func:`row_dict`."""
        return [row_dict(self, r) for r in self.rows]


def row_dict(board: Leaderboard, r: LeaderboardRow) -> dict:
    """A row as a flat dict: ``rank, config_id, name, chunker, model, retriever, status, error`` and then, for a
    report's ranked row, per measure ``m``: ``m, m_ci_low, m_ci_high, m_mark``, the test against the best
    (``tied_with_best, worse_than_best, p_vs_best, wins, ties, losses``), ``ms_per_query, queries, unlabelled`` and
    the cost cells; for a sweep's row: ``primary, primary_value``, the measures, ``queries, unlabelled`` and the
    answer columns."""
    out = {"rank": r.rank, "config_id": r.config_id, "name": r.name, "chunker": r.labels.chunker,
           "model": r.labels.model, "retriever": r.labels.retriever, "status": r.status, "error": r.error}
    ms, queries, unlabelled = r.counts
    if not board.judged:
        out.update({"primary": board.primary, "primary_value": r.values.get(board.primary),
                    **{m: r.values.get(m) for m in board.measures}, "queries": queries, "unlabelled": unlabelled,
                    **r.extra})
        return out
    if r.judged is None:  # not ranked: its name and why
        return out
    for m in board.measures:
        j = r.judged.get(m)
        out.update({m: j.mean if j else None, f"{m}_ci_low": j.ci_low if j else None,
                    f"{m}_ci_high": j.ci_high if j else None, f"{m}_mark": j.mark if j else ""})
    v = r.vs_best
    out.update({"tied_with_best": v.tied_with_best, "worse_than_best": v.worse_than_best, "p_vs_best": v.p_vs_best,
                "wins": v.wins, "ties": v.ties, "losses": v.losses, "ms_per_query": ms, "queries": queries,
                "unlabelled": unlabelled, **r.extra})
    return out


# ---------------------------------------------------------------- from a sweep's outcomes
def comparable(metrics, measure: str) -> float | None:
    """The config's mean of ``measure``, or None when it is a document measure at a cutoff deeper than the
    documents the config's run reached (:func:`ragbench.evaluation.metrics.unreached_depth`): not comparable."""
    return None if unreached_depth(metrics, measure) is not None else metrics.get(measure)


#: statuses of configs without results: last, unranked (over_budget: a budgeted sweep did not start them;
#: screened_out: a screened sweep left their chunker x model pair out)
NOT_RUN = ("failed", *NOT_RUN_STATUSES)


def ranked(outcomes: list[ConfigOutcome], primary: str) -> list[tuple[int | None, ConfigOutcome]]:
    """Outcomes best first by ``primary`` (ties by config id), each with its rank; failed configs last, rank None.
    A config whose run is too shallow for ``primary`` (:func:`comparable`) ranks after the others."""
    def key(o: ConfigOutcome):
        v = comparable(o.metrics, primary)
        v = math.nan if v is None else v
        return (o.status in NOT_RUN, -(v if v == v else -math.inf), o.config_id)

    out, rank = [], 0
    for o in sorted(outcomes, key=key):
        if o.status not in NOT_RUN:
            rank += 1
        out.append((rank if o.status not in NOT_RUN else None, o))
    return out


def sweep_measures(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> tuple[str, ...]:
    """The value columns of a sweep's leaderboard: the primary, its held-out score when the sweep has a held-out
    set, then the sweep's ``show`` list or ``measures`` (``{max_k}`` filled in)."""
    present = {k for o in result.outcomes for k in o.metrics}
    chosen = tuple(result.show) if result.show else leaderboard_measures(present, measures)
    held = heldout_key(result.primary)  # a sweep with a held-out set: every config's held-out score beside
    held = (held,) if held in present else ()
    return (result.primary, *held, *[m for m in chosen if m != result.primary and m not in held])


def winner_heldout(result: SweepResult) -> WinnerHeldOut | None:
    """The winner (rank 1 on the tuning set) with its held-out score, when the sweep has a held-out set."""
    held = heldout_key(result.primary)
    board = [(r, o) for r, o in ranked(result.outcomes, result.primary) if r is not None]
    if not board or held not in board[0][1].metrics:
        return None
    o = board[0][1]
    return WinnerHeldOut(o.config_id, ConfigLabels.from_stored(o.spec, o.name).text, result.primary,
                         o.metrics[result.primary], o.metrics[held], len(board), o.n_queries - o.n_unlabelled)


def sweep_leaderboard(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> Leaderboard:
    """The leaderboard of a sweep's outcomes (means only, no statistics): what the sweep prints when it ends."""
    cols = sweep_measures(result, measures)
    judged = coverage_key(result.primary)  # label coverage beside the primary, never ranked on
    rows = []
    for rank, o in ranked(result.outcomes, result.primary):
        m, done = o.metrics, o.status not in NOT_RUN
        extra = {}
        if "answer_accuracy" in m:
            extra = {k: m.get(k) for _, k in ANSWER_COLUMNS}
            extra["oracle"] = "/".join(str(int(m.get(f"oracle_{v}", 0))) for v in VERDICTS)
        if judged and done and m.get(judged) is not None:
            extra[JUDGED_CELL] = m.get(judged)
        rows.append(LeaderboardRow(
            rank, o.config_id, o.name, ConfigLabels.from_stored(o.spec, o.name), o.status, o.error,
            values={c: comparable(m, c) for c in (result.primary, *cols)},
            counts=(None, o.n_queries - o.n_unlabelled if done else None, o.n_unlabelled if done else None),
            extra=extra))
    return Leaderboard(result.primary, cols, tuple(rows), judged=False, winner=winner_heldout(result),
                       answers=any("answer_accuracy" in o.metrics for o in result.outcomes))
