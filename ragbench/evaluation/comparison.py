"""The comparison of a grid of configurations on one measure: per-config means with CIs, paired tests, Holm.

The input to :func:`compare_configs` is a long polars DataFrame ``per_query`` with columns::

    config_id: str, query_id: str, measure: str, value: float

``value`` may be NaN for queries that have no relevance labels.  NaN values are excluded from means and confidence
intervals (:mod:`ragbench.evaluation.intervals`), and paired tests (:mod:`ragbench.evaluation.paired_tests`, where
the conventions of the tests, their resolution and their random streams are stated) use only the queries where
*both* configurations have a non-NaN value.

Multiple comparisons: Holm–Bonferroni over the compared pairs -- by default each config against the best
(``m = configs - 1``), all unordered pairs on request (``pairs="all"``, ``m = k (k - 1) / 2``); a pair is
significant when its adjusted p-value is ``< alpha``.  Per-query differences with ``|a - b| <= TIE_TOLERANCE``
count as ties in the win/tie/loss counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np
import polars as pl

from ragbench.core.measure_keys import measure_key, measure_key_expr
from ragbench.evaluation.intervals import ConfidenceInterval, bootstrap_ci
from ragbench.evaluation.paired_tests import (
    DEFAULT_RESAMPLES,
    PairedTest,
    holm_correction,
    pair_seed,
    paired_diffs,
    paired_randomization_test,
    paired_t_test,
    required_resamples,
)

__all__ = ["TIE_TOLERANCE", "ConfigSummary", "PairComparison", "Comparison", "compare_configs"]

#: Per-query differences with ``|diff| <= TIE_TOLERANCE`` count as ties.
TIE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class ConfigSummary:
    """Per-configuration summary for one measure."""

    config_id: str
    mean: float
    ci: ConfidenceInterval
    n: int  # queries with a non-NaN value
    n_unlabelled: int  # queries whose value is NaN


@dataclass(frozen=True)
class PairComparison:
    """Comparison of ``config_a`` against ``config_b`` (differences are a - b).

    ``wins`` counts queries where ``a`` beats ``b`` by more than
    :data:`TIE_TOLERANCE`, ``losses`` the reverse, ``ties`` the rest; all over
    the ``n`` paired (both non-NaN) queries.
    """

    config_a: str
    config_b: str
    n: int
    mean_diff: float
    p_value: float
    p_adjusted: float
    significant: bool
    wins: int
    ties: int
    losses: int
    n_resamples: int | None = None  # sign vectors used (2 ** n_nonzero when exact); None for the t-test
    exact: bool = False  # exact enumeration
    p_floor: float = 0.0  # smallest p-value attainable by this pair's test


@dataclass(frozen=True)
class Comparison:
    """Everything :func:`compare_configs` computes for one measure.

    * ``configs``: sorted by ``config_id``; mean, CI, ``n`` (non-NaN queries) and ``n_unlabelled`` (NaN/null values
      present for that config).
    * ``best``: highest mean (ties -> first ``config_id``; configs with no scored query are skipped).
    * ``pairs``: the compared pairs ``(a, b)`` with ``a < b`` (use :meth:`pair` for either orientation);
      ``mean_diff`` is ``mean(a - b)`` over queries where both are non-NaN (a query missing from one config is
      treated as NaN); Holm adjustment is over the compared pairs; ``significant`` is ``p_adjusted < alpha``.
    * ``tied_with_best``: ``best`` plus every config whose Holm-adjusted p-value against ``best`` is ``>= alpha``
      or NaN (not distinguishable, e.g. fewer than 2 paired queries for the t-test), ordered by mean descending;
      configs with no scored query are never included.

    Resampling resolution (what a report should state next to the p-values):

    * ``n_comparisons`` -- ``m``, the size of the Holm family (pairs with a
      p-value);
    * ``n_resamples`` -- Monte Carlo sign flips per pair, ``R`` (``None`` for
      the t-test); ``n_exact`` -- pairs whose p-value was computed exactly by
      enumeration instead (``exact``: all of them);
    * ``p_floor`` -- the Monte Carlo floor ``1 / (R + 1)``, the smallest raw
      p-value a resampled pair can get (0.0 for the t-test, which has none).
      Exactly enumerated pairs have no resampling error; their own floor,
      ``2 / 2 ** n_nonzero``, is in :attr:`PairComparison.p_floor`;
    * ``p_floor_adjusted`` -- ``min(1, m * p_floor)``: what Holm makes of a
      p-value at the floor (at most ``alpha / 100`` by
      :func:`~ragbench.evaluation.paired_tests.required_resamples`).
    """

    measure: str
    test: str
    alpha: float
    configs: tuple[ConfigSummary, ...]
    pairs: tuple[PairComparison, ...]
    best: str
    tied_with_best: tuple[str, ...]
    pairs_compared: str = "all"  # "vs_best" or "all"
    n_comparisons: int = 0
    n_resamples: int | None = None
    n_exact: int = 0
    p_floor: float = 0.0

    @property
    def exact(self) -> bool:
        """Every pair's p-value is exact (enumerated), none Monte Carlo."""
        return bool(self.pairs) and self.n_exact == len(self.pairs) and self.test == "randomization"

    @property
    def p_floor_adjusted(self) -> float:
        """``min(1, n_comparisons * p_floor)``."""
        return min(1.0, self.n_comparisons * self.p_floor)

    def config(self, config_id: str) -> ConfigSummary:
        """Summary of one configuration."""
        for c in self.configs:
            if c.config_id == config_id:
                return c
        raise KeyError(config_id)

    def pair(self, a: str, b: str) -> PairComparison:
        """The comparison of ``a`` vs ``b`` (orientation as requested).

        If stored as ``(b, a)``, the returned record is flipped so that
        ``mean_diff`` and win/loss are from ``a``'s point of view.
        """
        for p in self.pairs:
            if (p.config_a, p.config_b) == (a, b):
                return p
            if (p.config_a, p.config_b) == (b, a):
                return PairComparison(
                    config_a=a,
                    config_b=b,
                    n=p.n,
                    mean_diff=-p.mean_diff,
                    p_value=p.p_value,
                    p_adjusted=p.p_adjusted,
                    significant=p.significant,
                    wins=p.losses,
                    ties=p.ties,
                    losses=p.wins,
                    n_resamples=p.n_resamples,
                    exact=p.exact,
                    p_floor=p.p_floor,
                )
        raise KeyError((a, b))

    def to_polars(self) -> pl.DataFrame:
        """Pairs table: one row per unordered pair."""
        return pl.DataFrame(
            {
                "measure": [self.measure] * len(self.pairs),
                "config_a": [p.config_a for p in self.pairs],
                "config_b": [p.config_b for p in self.pairs],
                "n": [p.n for p in self.pairs],
                "mean_diff": [p.mean_diff for p in self.pairs],
                "p_value": [p.p_value for p in self.pairs],
                "p_adjusted": [p.p_adjusted for p in self.pairs],
                "significant": [p.significant for p in self.pairs],
                "wins": [p.wins for p in self.pairs],
                "ties": [p.ties for p in self.pairs],
                "losses": [p.losses for p in self.pairs],
            },
            schema={
                "measure": pl.String,
                "config_a": pl.String,
                "config_b": pl.String,
                "n": pl.Int64,
                "mean_diff": pl.Float64,
                "p_value": pl.Float64,
                "p_adjusted": pl.Float64,
                "significant": pl.Boolean,
                "wins": pl.Int64,
                "ties": pl.Int64,
                "losses": pl.Int64,
            },
        )

    def configs_to_polars(self) -> pl.DataFrame:
        """Per-config table: mean, CI, counts, and best / tied-with-best flags."""
        tied = set(self.tied_with_best)
        return pl.DataFrame(
            {
                "measure": [self.measure] * len(self.configs),
                "config_id": [c.config_id for c in self.configs],
                "mean": [c.mean for c in self.configs],
                "ci_low": [c.ci.low for c in self.configs],
                "ci_high": [c.ci.high for c in self.configs],
                "n": [c.n for c in self.configs],
                "n_unlabelled": [c.n_unlabelled for c in self.configs],
                "is_best": [c.config_id == self.best for c in self.configs],
                "tied_with_best": [c.config_id in tied for c in self.configs],
            },
            schema={
                "measure": pl.String,
                "config_id": pl.String,
                "mean": pl.Float64,
                "ci_low": pl.Float64,
                "ci_high": pl.Float64,
                "n": pl.Int64,
                "n_unlabelled": pl.Int64,
                "is_best": pl.Boolean,
                "tied_with_best": pl.Boolean,
            },
        )


def compare_configs(per_query: pl.DataFrame, measure: str, *, test: Literal["randomization", "student"] =
                    "randomization", alpha: float = 0.05, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                    confidence: float = 0.95, pairs: Literal["vs_best", "all"] = "vs_best") -> Comparison:
    """Compare configurations on one measure: each against the best (default) or every pair.

    Parameters
    ----------
    per_query : polars.DataFrame
        Long table with ``config_id, query_id, measure, value``; at most one row per ``(config_id, query_id,
        measure)``.  NaN/null ``value`` means the query is unlabelled for that config.
    measure : str
        Which measure to compare (either spelling: ``ndcg@10`` or its key ``ndcg_at_10``).
    test : {"randomization", "student"}
        Paired test: :func:`~ragbench.evaluation.paired_tests.paired_randomization_test` (exact enumeration when
        ``2 ** n_nonzero <= max(R, EXACT_LIMIT)``) or :func:`~ragbench.evaluation.paired_tests.paired_t_test`.
    alpha : float
        FWER level for the Holm-adjusted p-values.
    n_resamples : int
        Bootstrap resamples of the CIs, and the *minimum* Monte Carlo resamples of the randomization test: the test
        uses ``R = max(n_resamples, required_resamples(m, alpha))`` for a family of ``m`` pairs (see
        :func:`~ragbench.evaluation.paired_tests.required_resamples`).
    seed : int
        Seed of every config's bootstrap; each pair's randomization stream is
        :func:`~ragbench.evaluation.paired_tests.pair_seed` ``(seed, a, b)``: independent of the others.
    confidence : float
        Coverage of the per-config bootstrap CIs.
    pairs : {"vs_best", "all"}
        ``"vs_best"``: each config against the best (``m = configs - 1`` comparisons, what "tied with the best"
        needs); ``"all"``: every unordered pair (``m = k (k - 1) / 2``, more corrections).

    Returns
    -------
    Comparison
        Per-config summaries, the best, the compared pairs, the configs tied with the best and the resolution
        of the p-values (see :class:`Comparison`).
    """
    _check_choices(test, pairs, alpha)
    grid = _Grid.of(per_query, measure)
    cis = {c: bootstrap_ci(grid.values(c), n_resamples=n_resamples, confidence=confidence, seed=seed)
           for c in grid.configs}
    summaries = [ConfigSummary(c, ci.mean, ci, ci.n, grid.n_unlabelled[c]) for c, ci in cis.items()]
    scored = [s for s in summaries if s.n > 0]
    if not scored:
        raise ValueError(f"no config has a non-NaN value for measure {measure!r}")
    best = max(scored, key=lambda s: s.mean).config_id  # max() keeps the first maximum: the smallest id on ties

    if pairs == "all":
        compared = list(combinations(grid.configs, 2))
    else:
        compared = [tuple(sorted((best, c))) for c in grid.configs if c != best]
    resamples = max(n_resamples, required_resamples(len(compared), alpha)) if test == "randomization" else None
    raw = {(ca, cb): _paired_test(grid, (ca, cb), test, resamples, seed) for ca, cb in compared}
    adjusted = holm_correction({k: v.p_value for k, v in raw.items()})
    results = [_pair_comparison(grid, pair, res, adjusted[pair], alpha) for pair, res in raw.items()]
    tested = [r for r in raw.values() if not math.isnan(r.p_value)]
    return Comparison(measure=measure, test=test, alpha=alpha, configs=tuple(summaries), pairs=tuple(results),
                      best=best, tied_with_best=_tied_with_best(summaries, best, adjusted, alpha), pairs_compared=pairs,
                      n_comparisons=len(tested), n_resamples=resamples,
                      n_exact=sum(1 for r in tested if r.exact) if test == "randomization" else 0,
                      p_floor=1.0 / (resamples + 1) if resamples is not None else 0.0)


def _check_choices(test: str, pairs: str, alpha: float) -> None:
    if test not in ("randomization", "student"):
        raise ValueError(f"unknown test {test!r}; use 'randomization' or 'student'")
    if pairs not in ("vs_best", "all"):
        raise ValueError(f"unknown pairs {pairs!r}; use 'vs_best' or 'all'")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")


@dataclass(frozen=True)
class _Grid:
    """One measure's dense (config x query) matrix; a query absent for a config stays NaN, so pairing drops it."""

    configs: list[str]
    matrix: np.ndarray
    n_unlabelled: dict[str, int]

    @classmethod
    def of(cls, per_query: pl.DataFrame, measure: str) -> "_Grid":
        missing = {"config_id", "query_id", "measure", "value"} - set(per_query.columns)
        if missing:
            raise ValueError(f"per_query is missing columns: {sorted(missing)}")
        # either spelling of the measure name (ndcg@10 or its key ndcg_at_10) on either side
        df = per_query.filter(measure_key_expr(pl.col("measure")) == measure_key(measure)).select(
            pl.col("config_id").cast(pl.String),
            pl.col("query_id").cast(pl.String),
            # null -> NaN so one missing-value convention is used downstream.
            pl.col("value").cast(pl.Float64).fill_null(float("nan")),
        )
        if df.height == 0:
            raise ValueError(f"no rows for measure {measure!r}")
        dup = df.group_by("config_id", "query_id").len().filter(pl.col("len") > 1)
        if dup.height:
            raise ValueError(
                f"duplicate (config_id, query_id) rows for measure {measure!r}: "
                f"{dup.head(5).rows()}"
            )
        configs = sorted(df.get_column("config_id").unique().to_list())
        queries = sorted(df.get_column("query_id").unique().to_list())
        q_index = {q: i for i, q in enumerate(queries)}
        matrix = np.full((len(configs), len(queries)), np.nan)
        n_unlabelled: dict[str, int] = {}
        for ci, cfg in enumerate(configs):
            sub = df.filter(pl.col("config_id") == cfg)
            vals = sub.get_column("value").to_numpy().astype(np.float64)
            cols = np.fromiter((q_index[q] for q in sub.get_column("query_id").to_list()), dtype=np.int64)
            matrix[ci, cols] = vals
            n_unlabelled[cfg] = int(np.isnan(vals).sum())
        return cls(configs, matrix, n_unlabelled)

    def values(self, config_id: str) -> np.ndarray:
        """The config's per-query values, in the grid's query order."""
        return self.matrix[self.configs.index(config_id)]


def _paired_test(grid: _Grid, pair: tuple[str, str], test: str, resamples: int | None, seed: int) -> PairedTest:
    """The pair's paired t-test, or its randomization test on its own stream (:func:`pair_seed`)."""
    a, b = (grid.values(c) for c in pair)
    if test == "student":
        return paired_t_test(a, b)
    return paired_randomization_test(a, b, n_resamples=resamples, seed=pair_seed(seed, *pair))


def _pair_comparison(grid: _Grid, pair: tuple[str, str], res: PairedTest, p_adj: float,
                     alpha: float) -> PairComparison:
    """The record of one compared pair: its test, Holm-adjusted p-value and win/tie/loss counts."""
    ca, cb = pair
    d = paired_diffs(grid.values(ca), grid.values(cb))
    return PairComparison(
        config_a=ca,
        config_b=cb,
        n=res.n,
        mean_diff=res.mean_diff,
        p_value=res.p_value,
        p_adjusted=p_adj,
        significant=bool(p_adj < alpha),  # NaN -> False
        wins=int(np.count_nonzero(d > TIE_TOLERANCE)),
        ties=int(np.count_nonzero(np.abs(d) <= TIE_TOLERANCE)),
        losses=int(np.count_nonzero(d < -TIE_TOLERANCE)),
        n_resamples=res.n_resamples,
        exact=res.exact,
        p_floor=res.p_floor,
    )


def _tied_with_best(summaries: list[ConfigSummary], best: str, adjusted: dict[tuple[str, str], float],
                    alpha: float) -> tuple[str, ...]:
    """``best``, then every scored config whose Holm-adjusted p against it is ``>= alpha`` or NaN, by mean
    descending."""

    def _adj_vs_best(cfg: str) -> float:
        return adjusted[tuple(sorted((best, cfg)))]

    tied = [best] + [
        s.config_id
        for s in summaries
        if s.config_id != best
        and s.n > 0  # a config with no scored query cannot be "tied"
        and (math.isnan(_adj_vs_best(s.config_id)) or _adj_vs_best(s.config_id) >= alpha)
    ]
    mean_of = {s.config_id: s.mean for s in summaries}
    # Stable sort: best first (it has the max mean), then by mean descending.
    tied.sort(key=lambda c: -mean_of[c] if not math.isnan(mean_of[c]) else math.inf)
    return tuple(tied)
