"""What would settle the choice: for the best config against each config tied with it, how many questions it would
take to tell them apart (:func:`questions_needed_rows`, the report's ``questions_needed``).

A tie says the questions at hand cannot separate two configs, not that they are equal. For each tied config the
paired per-query differences of the primary measure (best − config) give ``Δ`` and its spread ``s``;
:func:`ragbench.evaluation.power.questions_needed` turns them into the questions a paired test needs to detect
``Δ`` with 80 % power. The level is Holm's first step, ``alpha / m`` with ``m`` the comparisons of the verdict's
family (each config against the best: configs − 1; every pair with ``--all``): the strictest threshold any pair of
the family meets, so the number is conservative (later Holm steps test at ``alpha / (m - 1)``, ... ``alpha``). It
is a planning figure: ``Δ`` and ``s`` are estimates from these questions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from ragbench.data.holdout import heldout_key
from ragbench.evaluation.comparison import Comparison
from ragbench.evaluation.power import DEFAULT_POWER, MAX_N, questions_needed
from ragbench.reporting.heldout import HoldoutRepeats

__all__ = ["QuestionsNeeded", "decision_columns", "decision_lines", "questions_needed_rows", "questions_lines"]


@dataclass(frozen=True)
class QuestionsNeeded:
    """The best against one config tied with it: ``mean_diff`` (best − config) and ``sd_diff`` of the paired
    per-query differences on ``n_now`` questions, and the ``n_needed`` questions (None: ``why``) a paired test at
    ``alpha_per_test`` (``alpha / n_comparisons``) needs to detect it with probability ``power``. With a held-out
    set the verdict (and so ``n_now`` and ``n_needed``) counts tuning questions only; ``heldout_share`` (the share of
    the scored questions held out) turns ``n_needed`` into labelled questions in all (:attr:`n_needed_labelled`)."""

    config_id: str
    config: str
    label: str
    mean_diff: float
    sd_diff: float
    n_now: int
    n_needed: int | None
    alpha: float
    alpha_per_test: float
    n_comparisons: int
    power: float
    why: str | None = None
    heldout_share: float = 0.0

    @property
    def n_needed_labelled(self) -> int | None:
        """``⌈n_needed / (1 − heldout_share)⌉``: the labelled questions that leave ``n_needed`` to tune on."""
        if self.n_needed is None:
            return None
        return math.ceil(self.n_needed / (1 - self.heldout_share) - 1e-9)

    def sentence(self) -> str:
        """``To tell the winner from X (Δ 0.060) at α 0.05 (0.0026 per test, Holm over 19) with 80 % power you
        need about 160 questions; you have 28.``"""
        level = f"α {self.alpha:g}" + (f" ({self.alpha_per_test:.2g} per test, Holm's first step of "
                                       f"{self.n_comparisons})" if self.n_comparisons > 1 else "")
        if self.n_needed is None:
            return f"To tell the winner from {self.label}: no number of questions: {self.why}."
        enough = (" — enough to detect a difference this size 4 times in 5; this sample did not"
                  if self.n_now >= self.n_needed else "")
        about = f"more than {MAX_N:,}" if self.n_needed >= MAX_N else f"about {self.n_needed:,}"
        tuning = " tuning" if self.heldout_share else ""
        total = (f" (about {self.n_needed_labelled:,} labelled in all, {self.heldout_share * 100:.0f} % held out)"
                 if self.heldout_share and self.n_needed < MAX_N else "")
        return (f"To tell the winner from {self.label} (Δ {self.mean_diff:.3f}, sd {self.sd_diff:.3f}) at {level} "
                f"with {self.power * 100:.0f} % power you need {about}{tuning} questions{total}; you have "
                f"{self.n_now}{enough}.")

    def as_dict(self) -> dict:
        """The JSON report's entry: ``config, config_id, label, mean_diff, sd_diff, n_now, n_needed,
        alpha_per_test, power``, ``n_needed_labelled`` (with the held-out share added back) and ``why`` (why there
        is no number, else null)."""
        return {"config": self.config, "config_id": self.config_id, "label": self.label,
                "mean_diff": self.mean_diff, "sd_diff": None if math.isnan(self.sd_diff) else self.sd_diff,
                "n_now": self.n_now, "n_needed": self.n_needed, "alpha_per_test": self.alpha_per_test,
                "power": self.power, "n_needed_labelled": self.n_needed_labelled, "why": self.why}


def questions_needed_rows(pq: pl.DataFrame, comp: Comparison | None, names: dict[str, str], labels: dict[str, str],
                          power: float = DEFAULT_POWER) -> tuple[QuestionsNeeded, ...]:
    """One :class:`QuestionsNeeded` per config tied with ``comp.best`` (best mean first), from ``pq``'s per-query
    values of ``comp.measure`` (``config_id, query_id, measure, value``; NaN dropped pairwise, as the paired test
    drops them). Empty when nothing is tied or there is no comparison."""
    if comp is None:
        return ()
    tied = sorted((c for c in comp.tied_with_best if c != comp.best), key=lambda c: (-comp.config(c).mean, c))
    if not tied:
        return ()
    m = max(comp.n_comparisons, 1)
    values = pq.filter(pl.col("measure") == comp.measure).select("config_id", "query_id", "value")
    share = _heldout_share(pq, comp)
    best = values.filter(pl.col("config_id") == comp.best).drop("config_id")
    rows = []
    for cid in tied:
        paired = best.join(values.filter(pl.col("config_id") == cid).drop("config_id"), on="query_id", how="full",
                           suffix="_other", coalesce=True)
        a = paired["value"].fill_null(math.nan).to_numpy()
        b = paired["value_other"].fill_null(math.nan).to_numpy()
        est = questions_needed(a, b, alpha=comp.alpha / m, power=power)
        rows.append(QuestionsNeeded(cid, names.get(cid, cid), labels.get(cid, cid), est.mean_diff, est.sd_diff,
                                    est.n_now, est.n_needed, comp.alpha, est.alpha, m, est.power, est.why, share))
    return tuple(rows)


def _heldout_share(pq: pl.DataFrame, comp: Comparison) -> float:
    """The share of the best config's scored questions stored as held out (``heldout_<measure>``); 0 without a
    held-out set."""
    best = pq.filter((pl.col("config_id") == comp.best) & pl.col("value").is_not_nan())
    held = best.filter(pl.col("measure") == heldout_key(comp.measure)).height
    tuning = best.filter(pl.col("measure") == comp.measure).height
    return held / (held + tuning) if held and tuning else 0.0


def questions_lines(rows: tuple[QuestionsNeeded, ...], limit: int | None = None) -> list[str]:
    """The section in words: a heading sentence, then one sentence per tied config (the first ``limit``, the rest
    counted); empty when nothing is tied."""
    if not rows:
        return []
    shown = rows if limit is None else rows[:limit]
    more = len(rows) - len(shown)
    return ["Questions needed to separate the winner from the configs tied with it (paired per-query differences "
            "of the primary measure; a planning figure, not a promise):",
            *(r.sentence() for r in shown),
            *([f"… and {more} more tied configs (every one in the HTML and JSON reports)."] if more else [])]


def decision_lines(rows: tuple[QuestionsNeeded, ...], repeats: HoldoutRepeats | None,
                   limit: int | None = None) -> list[str]:
    """What every renderer says under the winner's held-out check: :func:`questions_lines` (the first ``limit``
    tied configs), then how stable the pick is over repeated splits (:meth:`HoldoutRepeats.lines`)."""
    return [*questions_lines(rows, limit), *(repeats.lines() if repeats is not None else [])]


def decision_columns(rows: tuple[QuestionsNeeded, ...], repeats: HoldoutRepeats | None) -> dict[str, dict]:
    """Per config id, the CSV report's extra cells: ``questions_needed`` (tied configs: the questions needed to
    tell it from the best) and, with repeated splits, ``holdout_wins`` (repeats it won on the tuning part) and
    ``holdout_repeats_heldout_mean`` (its held-out mean across repeats)."""
    out: dict[str, dict] = {r.config_id: {"questions_needed": r.n_needed} for r in rows}
    for c in repeats.configs if repeats is not None else ():
        out.setdefault(c.config_id, {}).update(holdout_wins=c.wins, holdout_repeats_heldout_mean=c.heldout_mean)
    return out
