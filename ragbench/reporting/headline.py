"""The headline of a sweep, built once and shown by every surface (the sweep's closing output, ``report``, the HTML
report, the Prefect artifact, the MLflow parent run's description): the five questions a morning reader has.

* **who won and how sure**: the best config on the primary measure with its 95 % bootstrap CI, and the configs
  tied with it (Holm-adjusted p >= alpha against the best: not distinguishable from it);
* **by how much**: the margin over the runner-up (the second-best mean), ``best − runner-up``, with the
  Holm-adjusted p of their paired test (from the report's comparison);
* **what changed**: the winner since the previous sweep (:meth:`ragbench.reporting.since.SincePrevious.
  winner_sentence`, or why there is no previous sweep);
* **against production**: :meth:`ragbench.reporting.vs_production.VsProduction.sentence`, or why nothing is
  compared;
* **what to do next**: promote (the command, when the gate allows it or nothing is live yet), keep production
  (when the gate refuses or production is the best), and label more questions or pool judgments when the best is
  tied with other configs (more labelled queries narrow the CIs and separate them); for a sweep that did not
  finish (interrupted, or stopped by its budget), finish it first, and no promotion.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragbench.reporting.model import SweepReport

#: how many tied configs the headline names before counting the rest
TIED_NAMED = 3


@dataclass(frozen=True)
class Headline:
    """The headline in parts (every renderer lays them out its way; :meth:`lines` is the text form).

    ``verdict``: one sentence (``X wins ...`` or ``No clear winner ...``); ``winner``/``mean``/``ci_low``/
    ``ci_high`` on ``primary``; ``tied``: labels of the configs tied with the best, best first; ``runner_up``,
    ``margin`` (best − runner-up) and ``margin_p`` (Holm-adjusted); ``since``, ``production`` and ``next_steps``:
    sentences (the commands in backticks)."""

    sweep_id: str
    primary: str
    winner: str
    winner_id: str
    mean: float
    ci_low: float
    ci_high: float
    tied: tuple[str, ...]
    n_ranked: int
    beaten: int
    runner_up: str | None
    margin: float | None
    margin_p: float | None
    since: str
    production: str
    next_steps: tuple[str, ...]

    @property
    def verdict(self) -> str:
        """``<winner> wins on <primary>: 0.712 [0.650, 0.770]``, and whether the win is clear."""
        head = f"{self.winner} wins on {self.primary}: {self.mean:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        if not self.tied:
            return f"{head}, significantly better than every other config ({self.beaten} of {self.n_ranked - 1})"
        return (f"{head}, not distinguishable from {len(self.tied)} other config(s); significantly better than "
                f"{self.beaten} of {self.n_ranked - 1}")

    @property
    def tied_text(self) -> str:
        """The tied set in words, labels separated by ``; `` (labels hold commas)."""
        if not self.tied:
            return "none"
        named = "; ".join(self.tied[:TIED_NAMED])
        return named + (f"; and {len(self.tied) - TIED_NAMED} more" if len(self.tied) > TIED_NAMED else "")

    @property
    def margin_text(self) -> str:
        """The margin over the runner-up in words."""
        if self.runner_up is None or self.margin is None:
            return "no runner-up (one config ranked)"
        p = "–" if self.margin_p is None or math.isnan(self.margin_p) else f"{self.margin_p:.4g}"
        return f"{self.margin:+.4f} over the runner-up {self.runner_up} (paired p = {p}, Holm)"

    def items(self) -> list[tuple[str, str]]:
        """``(what, sentence)`` pairs in reading order: winner, tied with it, margin, since the previous sweep,
        against production, next."""
        return [("winner", self.verdict), ("tied with the best", self.tied_text), ("margin", self.margin_text),
                ("since the previous sweep", self.since), ("against production", self.production),
                ("next", " ".join(self.next_steps))]

    def as_dict(self) -> dict:
        """The headline for the JSON report: its parts, the verdict and tied set in words, and the next steps."""
        return {"verdict": self.verdict, "winner": self.winner, "winner_id": self.winner_id, "primary": self.primary,
                "mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high, "tied": list(self.tied),
                "runner_up": self.runner_up, "margin": self.margin, "margin_p": self.margin_p, "since": self.since,
                "production": self.production, "next_steps": list(self.next_steps)}

    def lines(self) -> list[str]:
        """The headline as text lines, one per :meth:`items` entry (``what: sentence``)."""
        return [f"{what}: {text}" for what, text in self.items()]


def _end(text: str) -> str:
    return text if text.endswith((".", ")", "`")) else text + "."


def next_steps(report: SweepReport) -> tuple[str, ...]:
    """What to do next (module docstring): promote, keep production, or label more / pool; commands in backticks."""
    out = []
    v = report.vs_production
    if report.unfinished:  # its best may be a config it never evaluated: `promote` refuses it (without --force)
        out.append(f"Finish the sweep first (rerun `ragbench sweep` continues it): {report.unfinished}.")
    elif v is not None and v.same_config:
        out.append("Production is already the best: nothing to promote.")
    elif v is not None and v.command:
        out.append(f"Promote: `{v.command}`.")
    elif v is not None:
        out.append(f"Keep production: the gate would refuse ({v.gate.rstrip('.')}).")
    elif (report.production_note or "").startswith("nothing is in production"):
        out.append(f"Promote: `ragbench promote {report.sweep_id} {report.best}` (nothing is live yet).")
    tied = report.tied_with_best
    if tied:
        needed = [q.n_needed for q in report.questions_needed if q.n_needed is not None]
        how_many = ("" if not needed else f" (about {needed[0]:,} questions)" if len(needed) == 1 else
                    f" (about {min(needed):,} to {max(needed):,} questions, depending on the config)")
        out.append(f"Pool judgments (`ragbench judge pool {report.sweep_id}`) or label more questions{how_many} to "
                   f"separate the best from the {len(tied)} config(s) tied with it; "
                   f"`ragbench compare {report.sweep_id}` shows each against the best.")
    return tuple(out) or (f"`ragbench explain {report.sweep_id} 1` shows where the best wins and loses.",)


def build_headline(report: SweepReport) -> Headline:
    """The report's :class:`Headline` (definitions in the module docstring)."""
    board = report.leaderboard()
    comp = report.comparisons[report.primary]
    best = board.row(0, named=True)
    runner = board.row(1, named=True) if board.height > 1 else None
    margin = margin_p = None
    if runner is not None:
        pair = comp.pair(report.best, runner["config_id"])
        margin, margin_p = best["mean"] - runner["mean"], pair.p_adjusted
    others = board.filter(board["config_id"] != report.best)
    s = report.since_previous
    since = _end(s.winner_sentence()) if s is not None else f"no previous sweep to compare with: {report.since_note}."
    prod = report.vs_production.sentence() if report.vs_production is not None else \
        (report.production_note or "not compared")
    return Headline(
        sweep_id=report.sweep_id, primary=report.primary, winner=report.label_of(report.best),
        winner_id=report.best, mean=best["mean"], ci_low=best["ci_low"], ci_high=best["ci_high"],
        tied=tuple(report.label_of(c) for c in report.tied_with_best), n_ranked=board.height,
        beaten=int(others["worse_than_best"].sum()) if others.height else 0,
        runner_up=report.label_of(runner["config_id"]) if runner is not None else None, margin=margin,
        margin_p=margin_p, since=since, production=_end(prod), next_steps=next_steps(report))
