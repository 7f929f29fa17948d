"""The winner's held-out check, in words, for every report (terminal leaderboard, ``ragbench report``, HTML).

With ``dataset.holdout`` the sweep ranks configs on the tuning queries and measures each on the held-out ones too
(``heldout_<measure>``). The winner is the best of N configs on M tuning questions: part of its lead is the noise
of those M questions, so its tuning score is optimistic (the winner's curse). Its held-out score is measured on
questions the choice never saw; ``drop = tuning − held-out`` is how much of the tuning score did not carry over
(negative: the winner scored higher on the held-out questions, which the sentence says as such).

With ``dataset.holdout: {fraction, repeats}`` the report also draws ``repeats`` seeded stratified splits of the
same questions (:func:`ragbench.data.holdout.stratified_heldout`; repeat 0 is the sweep's split) and, from the
stored per-query values of every query (tuning and held-out alike: the sweep evaluates all of them once), finds
each repeat's winner on its tuning part and that winner's held-out score (:func:`holdout_repeats`): how often each
config wins, and the held-out score of the per-repeat winner with the 2.5-97.5 percentiles across repeats. The
repeats share questions, so that spread is how much the pick depends on the split, not a confidence interval for
new questions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from ragbench.core.errors import DatasetError
from ragbench.data.holdout import heldout_key, spec_holdout, spec_repeats, stratified_heldout
from ragbench.evaluation.comparison import Comparison


@dataclass(frozen=True)
class WinnerHeldOut:
    """The winner (best on the tuning set by ``primary``) with its tuning and held-out means.

    ``n_tuning`` / ``n_heldout``: labelled queries scored on each side (None when unknown).
    """

    config_id: str
    label: str
    primary: str
    tuning: float
    heldout: float
    n_configs: int
    n_tuning: int | None = None
    n_heldout: int | None = None

    @property
    def drop(self) -> float:
        """``tuning − heldout`` (positive: the winner scores lower on questions it was not chosen on)."""
        return self.tuning - self.heldout

    def numbers(self) -> str:
        """``"ndcg_at_10: tuning 0.712 (35 q) · held-out 0.655 (15 q) · drop 0.057"``."""
        def n(x: int | None) -> str:
            return f" ({x} q)" if x is not None else ""
        drop = "–" if math.isnan(self.drop) else f"{self.drop:+.3f}"
        return (f"{self.primary}: tuning {self.tuning:.3f}{n(self.n_tuning)} · held-out {self.heldout:.3f}"
                f"{n(self.n_heldout)} · drop (tuning − held-out) {drop}")

    def sentence(self) -> str:
        """The winner's scores side by side and what the signed drop says: a drop is the winner's curse, a rise
        says the held-out questions were easier for it (no curse seen), none says the score carried over."""
        on = f"{self.n_tuning} tuning questions" if self.n_tuning is not None else "the tuning questions"
        head = f"Winner {self.label} on the held-out set — {self.numbers()}. "
        if math.isnan(self.drop):
            return head + "No held-out score: no held-out question was scored."
        if self.drop < 0:
            few = f"{self.n_heldout} held-out questions" if self.n_heldout is not None else "a held-out set"
            return head + (f"The held-out score is {-self.drop:.3f} above the tuning score: no winner's curse shows "
                           f"on these questions (with {few}, much of the gap is which questions fell on which "
                           "side); the held-out score, on questions the choice never saw, is the estimate to expect.")
        if self.drop == 0:
            return head + "The tuning score carried over unchanged to the questions the choice never saw."
        return head + (f"Winner's curse: the best of {self.n_configs} configs on {on} is optimistic, because part "
                       f"of its lead is the luck of those questions; the held-out score, {self.drop:.3f} lower, on "
                       "questions the choice never saw, is the estimate to expect.")


@dataclass(frozen=True)
class RepeatWins:
    """One config over the repeated splits: ``wins`` (repeats it won on the tuning part) and its held-out mean
    across repeats with the 2.5-97.5 percentiles (``heldout_low``, ``heldout_high``)."""

    config_id: str
    label: str
    wins: int
    heldout_mean: float
    heldout_low: float
    heldout_high: float


@dataclass(frozen=True)
class HoldoutRepeats:
    """``repeats`` seeded stratified splits (``fraction`` held out of ``n_questions``, seed ``seed``): each repeat's
    winner on its tuning part (``winners``) with its tuning and held-out means, and every config's wins."""

    primary: str
    fraction: float
    seed: int
    n_questions: int
    n_heldout: int
    winners: tuple[str, ...]
    winner_tuning: tuple[float, ...]
    winner_heldout: tuple[float, ...]
    configs: tuple[RepeatWins, ...]

    @property
    def repeats(self) -> int:
        return len(self.winners)

    def winner_heldout_interval(self) -> tuple[float, float, float]:
        """Mean, 2.5th and 97.5th percentile (linear interpolation) of the per-repeat winners' held-out scores."""
        x = np.asarray(self.winner_heldout)
        return float(x.mean()), float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))

    def lines(self) -> list[str]:
        """The section in words: how often the most frequent winners win, the per-repeat winner's held-out score
        with its spread and its signed drop from tuning."""
        mean, low, high = self.winner_heldout_interval()
        drop = float(np.mean(np.asarray(self.winner_tuning) - np.asarray(self.winner_heldout)))
        winners = [c for c in self.configs if c.wins]
        wins = "; ".join(f"{c.label} {c.wins} of {self.repeats}" for c in winners[:3])
        more = f"; {len(winners) - 3} other configs win the rest" if len(winners) > 3 else ""
        trend = (f"{drop:.3f} below" if drop > 0 else f"{-drop:.3f} above" if drop < 0 else "equal to")
        return [f"How stable the pick is, over {self.repeats} seeded splits of the {self.n_questions} questions "
                f"({self.n_heldout} held out each, seed {self.seed}): wins on the tuning part: {wins}{more}.",
                f"The per-repeat winner's held-out {self.primary}: {mean:.3f} [{low:.3f}, {high:.3f}] (2.5-97.5 "
                f"percentiles of the repeats), on average {trend} its tuning score; the splits share questions, so "
                "this spread is how much the pick depends on the split, not a confidence interval for new questions."]

    def as_dict(self) -> dict:
        """The JSON report's ``holdout_repeats``."""
        mean, low, high = self.winner_heldout_interval()
        return {"primary": self.primary, "fraction": self.fraction, "seed": self.seed, "repeats": self.repeats,
                "n_questions": self.n_questions, "n_heldout": self.n_heldout,
                "winner_heldout": {"mean": mean, "low": low, "high": high},
                "per_repeat": [{"repeat": i, "winner": w, "tuning": t, "heldout": h} for i, (w, t, h) in
                               enumerate(zip(self.winners, self.winner_tuning, self.winner_heldout))],
                "configs": [{"config_id": c.config_id, "label": c.label, "wins": c.wins,
                             "heldout_mean": c.heldout_mean, "heldout_low": c.heldout_low,
                             "heldout_high": c.heldout_high} for c in self.configs]}


def holdout_repeats(pq: pl.DataFrame, comp: Comparison | None, spec: dict,
                    labels: dict[str, str]) -> HoldoutRepeats | None:
    """The repeated splits of a sweep whose stored spec asks for them (``dataset.holdout.repeats`` >= 2), from its
    stored per-query values: ``comp.measure`` (the primary) on the tuning queries and ``heldout_<primary>`` on the
    held-out ones make one value per query and config. The questions are those every config of ``comp`` scored
    (non-NaN), with their stored class; each repeat splits them with
    :func:`~ragbench.data.holdout.stratified_heldout` and its winner is the highest tuning mean (ties: the first
    config id, as the report's best). None when not asked for or when a split would leave a side empty."""
    split, repeats = spec_holdout(spec), spec_repeats(spec)
    if split is None or repeats < 2 or comp is None:
        return None
    fraction, seed = split
    primary, ids = comp.measure, sorted(c.config_id for c in comp.configs)
    values = (pq.filter(pl.col("measure").is_in([primary, heldout_key(primary)]) & pl.col("config_id").is_in(ids))
              .pivot(on="config_id", index=["query_id", "query_class"], values="value", aggregate_function="first"))
    if not all(c in values.columns for c in ids):
        return None
    values = values.filter(pl.all_horizontal(pl.col(ids).is_not_null() & pl.col(ids).is_not_nan())).sort("query_id")
    qids = values["query_id"].to_list()
    matrix = values.select(ids).to_numpy().T  # configs x questions
    pairs = list(zip(qids, values["query_class"].to_list()))
    position = {q: i for i, q in enumerate(qids)}
    winners, tuning, held, per_config = [], [], [], []
    for r in range(repeats):
        try:
            out = stratified_heldout(pairs, fraction, seed, r)
        except DatasetError:
            return None
        mask = np.zeros(len(qids), dtype=bool)
        mask[[position[q] for q in out]] = True
        tune_means, held_means = matrix[:, ~mask].mean(axis=1), matrix[:, mask].mean(axis=1)
        w = int(np.argmax(tune_means))  # first maximum: the first config id, as the report's best
        winners.append(ids[w])
        tuning.append(float(tune_means[w]))
        held.append(float(held_means[w]))
        per_config.append(held_means)
    by_config = np.asarray(per_config).T
    configs = sorted((RepeatWins(cid, labels.get(cid, cid), winners.count(cid), float(by_config[i].mean()),
                                 float(np.percentile(by_config[i], 2.5)), float(np.percentile(by_config[i], 97.5)))
                      for i, cid in enumerate(ids)), key=lambda c: (-c.wins, -c.heldout_mean, c.config_id))
    return HoldoutRepeats(primary, fraction, seed, len(qids), int(mask.sum()), tuple(winners), tuple(tuning),
                          tuple(held), tuple(configs))
