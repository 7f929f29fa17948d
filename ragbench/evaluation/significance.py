"""Comparison statistics between retrieval configurations.

Plain functions over per-query metric values, in the spirit of ``ir_measures``
and ``ranx``.  The input to :func:`compare_configs` is a long polars DataFrame
``per_query`` with columns::

    config_id: str, query_id: str, measure: str, value: float

``value`` may be NaN for queries that have no relevance labels.  NaN values are
excluded from means and confidence intervals, and paired tests use only the
queries where *both* configurations have a non-NaN value.

Conventions
-----------
* Paired differences are always ``a - b`` (first argument minus second).
* Randomization (sign-flip) test.  Queries whose difference is exactly 0 are
  dropped first: flipping a zero changes no sum, so the p-value is unchanged
  and enumeration gets cheaper.  With ``n`` nonzero differences:

  - **exact** when ``2 ** n <= max(R, exact_limit)`` (default
    ``exact_limit = 2 ** 20``): all sign vectors are enumerated and
    ``p = #{s : |sum s d| >= |sum d|} / 2 ** n``; its floor (smallest attainable
    value) is ``2 / 2 ** n`` (the observed signs and their mirror image);
  - otherwise **Monte Carlo** over ``R`` random sign vectors:
    ``p = (c + 1) / (R + 1)`` (Phipson & Smyth 2010; never 0), floor
    ``1 / (R + 1)``.  ``ranx``'s ``stat_test="fisher"`` reports ``c / R``
    instead (it can return 0); both estimate the same exact p-value.

* Number of resamples (:func:`required_resamples`): a Holm family of ``m``
  comparisons at level ``alpha`` gets ``R >= 100 * m / alpha - 1``, so the
  p floor times the Holm factor is at most ``alpha / 100`` and, at the strictest
  Holm threshold ``alpha / m``, the Monte Carlo p-value has a relative standard
  error of at most 10 %.  ``n_resamples`` is a minimum, raised to that.
* Random streams: each pair gets its own stream, the child of
  ``numpy.random.SeedSequence(seed)`` keyed by the pair's two config ids
  (``spawn_key``), so streams are independent across pairs and a pair's stream
  does not depend on which other configs are in the grid.
* Paired t-test: two-sided ``scipy.stats.ttest_rel`` (same as ``ranx``'s
  ``stat_test="student"``); no floor.
* Multiple comparisons: Holm–Bonferroni over the compared pairs -- by default
  each config against the best (``m = configs - 1``), all unordered pairs on
  request (``pairs="all"``, ``m = k (k - 1) / 2``); a pair is significant when
  its adjusted p-value is ``< alpha``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Literal, TypeVar

import numpy as np
import polars as pl

from ragbench.core.measure_keys import measure_key, measure_key_expr

__all__ = [
    "TIE_TOLERANCE",
    "EXACT_LIMIT",
    "RESOLUTION",
    "required_resamples",
    "ConfidenceInterval",
    "PairedTest",
    "ConfigSummary",
    "PairComparison",
    "Comparison",
    "bootstrap_ci",
    "pair_seed",
    "paired_randomization_test",
    "paired_t_test",
    "holm_correction",
    "compare_configs",
]

#: Per-query differences with ``|diff| <= TIE_TOLERANCE`` count as ties.
TIE_TOLERANCE = 1e-12

#: Enumerate every sign vector (exact p-value) when ``2 ** n`` is at most this (or at most the resamples asked for).
EXACT_LIMIT = 1 << 20

#: Resampling resolution: the p floor times the number of comparisons is at most ``alpha / RESOLUTION``.
RESOLUTION = 100

DEFAULT_RESAMPLES = 10_000

# Upper bound on the number of float64 cells materialised per resampling chunk
# (~8 MB), so memory stays flat whatever n_resamples is.
_CHUNK_CELLS = 1_000_000

K = TypeVar("K", bound=Hashable)


# --------------------------------------------------------------------------
# Result types
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfidenceInterval:
    """Mean of per-query values with a percentile-bootstrap interval.

    Attributes
    ----------
    mean : float
        Mean over the non-NaN values (NaN if there are none).
    low, high : float
        Lower / upper bound of the interval (NaN if ``n == 0``).
    n : int
        Number of non-NaN values used.
    confidence : float
        Nominal coverage, e.g. 0.95.
    """

    mean: float
    low: float
    high: float
    n: int
    confidence: float = 0.95


@dataclass(frozen=True)
class PairedTest:
    """Result of a two-sided paired test of ``a`` against ``b``.

    Attributes
    ----------
    test : str
        ``"randomization"`` or ``"student"``.
    n : int
        Number of queries where both ``a`` and ``b`` are non-NaN.
    mean_diff : float
        ``mean(a - b)`` over those queries.
    statistic : float
        t statistic for ``"student"``; ``mean_diff`` for ``"randomization"``.
    p_value : float
        Two-sided p-value (NaN when the test is undefined, e.g. ``n < 2``).
    n_resamples : int | None
        Sign vectors the randomization test used: ``2 ** n_nonzero`` when
        exact, ``R`` for Monte Carlo; ``None`` for the t-test.
    exact : bool
        The randomization p-value is exact (full enumeration).
    p_floor : float
        Smallest p-value this test could have returned on these queries:
        ``2 / 2 ** n_nonzero`` when exact (1.0 when every difference is 0),
        ``1 / (R + 1)`` for Monte Carlo, 0.0 for the t-test (no floor).
    """

    test: str
    n: int
    mean_diff: float
    statistic: float
    p_value: float
    n_resamples: int | None = None
    exact: bool = False
    p_floor: float = 0.0


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
      :func:`required_resamples`).
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


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _as_1d_float(x) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {arr.shape}")
    return arr


def _paired_diffs(a, b) -> np.ndarray:
    """``a - b`` over positions where both are non-NaN."""
    a = _as_1d_float(a)
    b = _as_1d_float(b)
    if a.shape != b.shape:
        raise ValueError(f"paired inputs differ in length: {a.shape[0]} vs {b.shape[0]}")
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep] - b[keep]


def _chunk_rows(n_cols: int) -> int:
    return max(1, _CHUNK_CELLS // max(1, n_cols))


# --------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------
def bootstrap_ci(
    values,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> ConfidenceInterval:
    r"""Percentile bootstrap confidence interval of the mean over queries.

    NaN values are dropped first.  With the remaining ``n`` values
    :math:`x_1..x_n`, draw ``n_resamples`` samples of size ``n`` with
    replacement, compute each resample mean :math:`\bar x^*_r`, and return the
    empirical :math:`\alpha/2` and :math:`1-\alpha/2` quantiles of those means
    (``numpy.quantile``, linear interpolation) with
    :math:`\alpha = 1 - \mathrm{confidence}`.

    Parameters
    ----------
    values : array_like
        Per-query metric values (1-D).  NaN = unlabelled query.
    n_resamples : int
        Number of bootstrap resamples.
    confidence : float
        Nominal coverage in (0, 1).
    seed : int
        Seed for ``numpy.random.default_rng``; same seed, same interval.

    Returns
    -------
    ConfidenceInterval
        ``mean`` is the plain sample mean (not the bootstrap mean).  With
        ``n == 0`` every field but ``n`` is NaN; with ``n == 1`` the interval
        collapses to the single value.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    x = _as_1d_float(values)
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return ConfidenceInterval(math.nan, math.nan, math.nan, 0, confidence)
    mean = float(x.mean())
    if n == 1:
        return ConfidenceInterval(mean, mean, mean, 1, confidence)

    rng = np.random.default_rng(seed)
    boot_means = np.empty(n_resamples, dtype=np.float64)
    step = _chunk_rows(n)
    # Chunked so that the (resamples x n) index matrix never exceeds ~8 MB;
    # the RNG stream is consumed in order, so results don't depend on chunking
    # beyond the fixed chunk size.
    for start in range(0, n_resamples, step):
        stop = min(start + step, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot_means[start:stop] = x[idx].mean(axis=1)

    alpha = 1.0 - confidence
    low, high = np.quantile(boot_means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return ConfidenceInterval(mean, float(low), float(high), n, confidence)


# --------------------------------------------------------------------------
# Paired tests
# --------------------------------------------------------------------------
def required_resamples(n_comparisons: int, alpha: float, *, resolution: float = RESOLUTION) -> int:
    r"""Monte Carlo resamples ``R`` a Holm family of ``n_comparisons`` at level ``alpha`` needs.

    The smallest Monte Carlo p-value is :math:`1/(R+1)`; Holm multiplies the
    smallest raw p by ``m``.  ``R`` is the least integer with

    .. math::

        \frac{m}{R + 1} \le \frac{\alpha}{\text{resolution}},
        \qquad R = \Bigl\lceil \frac{\text{resolution}\cdot m}{\alpha} \Bigr\rceil - 1,

    so the floor times the Holm factor is at most ``alpha / resolution``
    (``alpha / 100`` by default), and at Holm's strictest threshold
    :math:`p = \alpha/m` the Monte Carlo estimate has relative standard error
    :math:`\sqrt{(1-p)/(pR)} \le 1/\sqrt{\text{resolution}}` (10 %).
    E.g. ``m = 19, alpha = 0.05``: ``R = 37_999``; ``m = 190``: ``379_999``.
    """
    if n_comparisons < 0:
        raise ValueError("n_comparisons must be >= 0")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    if resolution <= 0:
        raise ValueError("resolution must be > 0")
    if n_comparisons == 0:
        return 0
    return max(1, math.ceil(resolution * n_comparisons / alpha - 1e-9) - 1)


def pair_seed(seed: int, a: str, b: str) -> np.random.SeedSequence:
    """The random stream of the pair ``(a, b)``: the child of ``SeedSequence(seed)`` keyed by both config ids
    (order-free), independent of every other pair's and of which other configs are compared."""
    lo, hi = sorted((str(a), str(b)))
    key = hashlib.blake2b(f"{lo}\x00{hi}".encode(), digest_size=8).digest()
    return np.random.SeedSequence(seed, spawn_key=(int.from_bytes(key, "little"),))


def paired_randomization_test(
    a,
    b,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int | np.random.SeedSequence = 0,
    exact_limit: int = EXACT_LIMIT,
) -> PairedTest:
    r"""Two-sided paired randomization (sign-flip permutation) test.

    Under H0 the two systems are exchangeable on every query, so each
    per-query difference :math:`d_i = a_i - b_i` is equally likely to have
    either sign.  Queries with :math:`d_i = 0` are dropped (their sign changes
    no sum, so the p-value is the same); with the remaining ``n`` differences,
    :math:`T = |\sum_i d_i|` observed and :math:`T_s = |\sum_i s_i d_i|` for
    sign vectors :math:`s \in \{-1, +1\}^n`:

    * **exact**, when :math:`2^n \le \max(R, \text{exact\_limit})`: every sign
      vector is enumerated (half of them: :math:`T_s = T_{-s}`) and
      :math:`p = \#\{s : T_s \ge T\} / 2^n`; floor :math:`2 / 2^n`;
    * **Monte Carlo** otherwise, over :math:`R` random sign vectors:

      .. math::

          p = \frac{1 + \#\{r : T_r \ge T\}}{1 + R}

      (Phipson & Smyth 2010; never 0); floor :math:`1 / (R + 1)`.

    ``>=`` is evaluated with a tolerance of ``1e-9 * sum |d_i|`` so
    floating-point rounding of equal sums cannot undercount.  This is the test
    ranx calls ``"fisher"``, but ranx reports ``c / R`` without the +1 terms.

    Parameters
    ----------
    a, b : array_like
        Per-query values of the two systems, aligned by query.  Queries where
        either is NaN are dropped.
    n_resamples : int
        Monte Carlo resamples ``R``.
    seed : int or numpy.random.SeedSequence
        Seed of ``numpy.random.default_rng`` (:func:`compare_configs` passes
        each pair its own :func:`pair_seed`).
    exact_limit : int
        Enumerate exactly when ``2 ** n`` is at most ``max(n_resamples,
        exact_limit)``; ``0`` enumerates only when ``2 ** n <= n_resamples``.

    Returns
    -------
    PairedTest
        ``n`` counts every paired query (zeros included); ``p_value`` is NaN if
        no paired query remains and 1.0 if all differences are zero;
        ``n_resamples``, ``exact`` and ``p_floor`` describe the resolution.
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    d_all = _paired_diffs(a, b)
    n_all = int(d_all.size)
    if n_all == 0:
        return PairedTest("randomization", 0, math.nan, math.nan, math.nan, 0, True, math.nan)
    mean_diff = float(d_all.mean())
    d = d_all[d_all != 0.0]  # a zero's sign changes nothing: same p-value, fewer sign vectors
    n = int(d.size)
    if n == 0:
        return PairedTest("randomization", n_all, mean_diff, mean_diff, 1.0, 1, True, 1.0)
    observed = abs(float(d.sum()))  # compare |sums|: same ordering as |means|
    # Tolerance scaled by the magnitude of the data, so ties that differ only
    # by summation rounding still count as "at least as extreme".
    threshold = observed - 1e-9 * float(np.abs(d).sum())

    if n < 63 and (1 << n) <= max(n_resamples, exact_limit):
        # Exact: the first sign is fixed to + (T_s = T_{-s}), the other n-1 run through the bits of 0..2^(n-1)-1.
        half = 1 << (n - 1)
        count = 0
        step = _chunk_rows(n)
        bits = np.arange(n - 1, dtype=np.int64)
        for start in range(0, half, step):
            codes = np.arange(start, min(start + step, half), dtype=np.int64)
            signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
            count += int(np.count_nonzero(np.abs(d[0] + signs @ d[1:]) >= threshold))
        return PairedTest("randomization", n_all, mean_diff, mean_diff, count / half, 1 << n, True, 1.0 / half)

    rng = np.random.default_rng(seed)
    count = 0
    step = _chunk_rows(n)
    total = float(d.sum())
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        flips = rng.integers(0, 2, size=(rows, n), dtype=np.int8)  # 1 = flip the sign
        sums = total - 2.0 * (flips.astype(np.float64) @ d)
        count += int(np.count_nonzero(np.abs(sums) >= threshold))
    p = (count + 1) / (n_resamples + 1)
    return PairedTest("randomization", n_all, mean_diff, mean_diff, float(p), n_resamples, False,
                      1.0 / (n_resamples + 1))


def paired_t_test(a, b) -> PairedTest:
    r"""Two-sided paired Student's t-test (``scipy.stats.ttest_rel``).

    :math:`t = \bar d / (s_d / \sqrt n)` with :math:`d_i = a_i - b_i`,
    :math:`n-1` degrees of freedom, :math:`p = 2\,P(T_{n-1} \ge |t|)`.  Same as
    ranx's ``stat_test="student"``.

    Queries where either value is NaN are dropped.  Degenerate cases: if all
    differences are exactly zero (scipy returns NaN, 0/0) the p-value is 1.0 —
    the data give no evidence of a difference; with ``n < 2`` it is NaN.
    """
    d = _paired_diffs(a, b)
    n = int(d.size)
    if n == 0:
        return PairedTest("student", 0, math.nan, math.nan, math.nan)
    mean_diff = float(d.mean())
    if n < 2:
        return PairedTest("student", n, mean_diff, math.nan, math.nan)
    if not np.any(d):
        return PairedTest("student", n, mean_diff, 0.0, 1.0)
    from scipy import stats  # imported here: 0.9 s that every sweep and report would pay for one test

    res = stats.ttest_rel(d, np.zeros_like(d), alternative="two-sided")
    return PairedTest("student", n, mean_diff, float(res.statistic), float(res.pvalue))


# --------------------------------------------------------------------------
# Multiple comparisons
# --------------------------------------------------------------------------
def holm_correction(pvalues: Mapping[K, float]) -> dict[K, float]:
    r"""Holm–Bonferroni step-down adjusted p-values.

    Sort the ``m`` p-values ascending, :math:`p_{(1)} \le \dots \le p_{(m)}`;
    then

    .. math::

        \tilde p_{(i)} = \min\Bigl(1, \max_{j \le i} (m - j + 1)\, p_{(j)}\Bigr)

    The running max makes the adjusted values monotone in the raw ones.
    Rejecting ``adjusted < alpha`` controls the family-wise error rate at
    ``alpha``.  NaN p-values stay NaN and are not counted in ``m``.

    Parameters
    ----------
    pvalues : Mapping
        Key -> raw p-value.

    Returns
    -------
    dict
        Same keys (same order) -> adjusted p-value.
    """
    keys = list(pvalues)
    out: dict[K, float] = {k: math.nan for k in keys}
    finite = [(float(pvalues[k]), i) for i, k in enumerate(keys) if not math.isnan(float(pvalues[k]))]
    finite.sort()  # ties broken by input position -> deterministic
    m = len(finite)
    running = 0.0
    for rank, (p, i) in enumerate(finite):
        running = max(running, min(1.0, (m - rank) * p))
        out[keys[i]] = running
    return out


# --------------------------------------------------------------------------
# Grid comparison
# --------------------------------------------------------------------------
def compare_configs(
    per_query: pl.DataFrame,
    measure: str,
    *,
    test: Literal["randomization", "student"] = "randomization",
    alpha: float = 0.05,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    pairs: Literal["vs_best", "all"] = "vs_best",
    exact_limit: int = EXACT_LIMIT,
) -> Comparison:
    """Compare configurations on one measure: each against the best (default) or every pair.

    Parameters
    ----------
    per_query : polars.DataFrame
        Long table with ``config_id, query_id, measure, value``; at most one
        row per ``(config_id, query_id, measure)``.  NaN/null ``value`` means
        the query is unlabelled for that config.
    measure : str
        Which measure to compare.
    test : {"randomization", "student"}
        Paired test: :func:`paired_randomization_test` or
        :func:`paired_t_test`.
    alpha : float
        FWER level for the Holm-adjusted p-values.
    n_resamples : int
        Bootstrap resamples of the CIs, and the *minimum* Monte Carlo
        resamples of the randomization test: the test uses
        ``R = max(n_resamples, required_resamples(m, alpha))`` for a family of
        ``m`` pairs (see the module docstring).
    seed : int
        Seed of every config's bootstrap; each pair's randomization stream is
        :func:`pair_seed` ``(seed, a, b)``: independent of the others.
    confidence : float
        Coverage of the per-config bootstrap CIs.
    pairs : {"vs_best", "all"}
        ``"vs_best"``: each config against the best (``m = configs - 1``
        comparisons, what "tied with the best" needs); ``"all"``: every
        unordered pair (``m = k (k - 1) / 2``, more corrections).
    exact_limit : int
        Passed to :func:`paired_randomization_test`: enumerate exactly when
        ``2 ** n_nonzero <= max(R, exact_limit)``.

    Returns
    -------
    Comparison
        * ``configs``: sorted by ``config_id``; mean, CI, ``n`` (non-NaN
          queries) and ``n_unlabelled`` (NaN/null values present for that
          config).
        * ``best``: highest mean (ties -> first ``config_id``; configs with no
          scored query are skipped).
        * ``pairs``: the compared pairs ``(a, b)`` with ``a < b`` (use
          :meth:`Comparison.pair` for either orientation); ``mean_diff`` is
          ``mean(a - b)`` over queries where both are non-NaN (a query missing
          from one config is treated as NaN); Holm adjustment is over the
          compared pairs; ``significant`` is ``p_adjusted < alpha``.
        * ``tied_with_best``: ``best`` plus every config whose Holm-adjusted
          p-value against ``best`` is ``>= alpha`` or NaN (not distinguishable,
          e.g. fewer than 2 paired queries for the t-test), ordered by mean
          descending; configs with no scored query are never included.
        * ``n_comparisons``, ``n_resamples``, ``n_exact``, ``p_floor`` (and the
          properties ``exact``, ``p_floor_adjusted``): the resolution of the
          p-values, for the report (see :class:`Comparison`).
    """
    if test not in ("randomization", "student"):
        raise ValueError(f"unknown test {test!r}; use 'randomization' or 'student'")
    if pairs not in ("vs_best", "all"):
        raise ValueError(f"unknown pairs {pairs!r}; use 'vs_best' or 'all'")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
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
    c_index = {c: i for i, c in enumerate(configs)}

    # Dense (config x query) matrix; absent rows stay NaN so pairing drops them.
    matrix = np.full((len(configs), len(queries)), np.nan)
    n_unlabelled: dict[str, int] = {}
    for ci, cfg in enumerate(configs):
        sub = df.filter(pl.col("config_id") == cfg)
        vals = sub.get_column("value").to_numpy().astype(np.float64)
        cols = np.fromiter((q_index[q] for q in sub.get_column("query_id").to_list()), dtype=np.int64)
        matrix[ci, cols] = vals
        n_unlabelled[cfg] = int(np.isnan(vals).sum())

    summaries = []
    for ci, cfg in enumerate(configs):
        ci_res = bootstrap_ci(matrix[ci], n_resamples=n_resamples, confidence=confidence, seed=seed)
        summaries.append(ConfigSummary(cfg, ci_res.mean, ci_res, ci_res.n, n_unlabelled[cfg]))

    scored = [s for s in summaries if s.n > 0]
    if not scored:
        raise ValueError(f"no config has a non-NaN value for measure {measure!r}")
    # max() keeps the first maximum, i.e. the smallest config_id on ties.
    best = max(scored, key=lambda s: s.mean).config_id

    if pairs == "all":
        compared = [(configs[i], configs[j]) for i, j in combinations(range(len(configs)), 2)]
    else:
        compared = [tuple(sorted((best, c))) for c in configs if c != best]
    resamples = max(n_resamples, required_resamples(len(compared), alpha)) if test == "randomization" else None

    raw: dict[tuple[str, str], PairedTest] = {}
    for ca, cb in compared:
        x, y = matrix[c_index[ca]], matrix[c_index[cb]]
        if test == "student":
            raw[(ca, cb)] = paired_t_test(x, y)
        else:
            raw[(ca, cb)] = paired_randomization_test(x, y, n_resamples=resamples, seed=pair_seed(seed, ca, cb),
                                                      exact_limit=exact_limit)
    adjusted = holm_correction({k: v.p_value for k, v in raw.items()})

    results = []
    for (ca, cb), res in raw.items():
        d = _paired_diffs(matrix[c_index[ca]], matrix[c_index[cb]])
        p_adj = adjusted[(ca, cb)]
        results.append(
            PairComparison(
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
        )

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

    tested = [r for r in raw.values() if not math.isnan(r.p_value)]
    return Comparison(
        measure=measure,
        test=test,
        alpha=alpha,
        configs=tuple(summaries),
        pairs=tuple(results),
        best=best,
        tied_with_best=tuple(tied),
        pairs_compared=pairs,
        n_comparisons=len(tested),
        n_resamples=resamples,
        n_exact=sum(1 for r in tested if r.exact) if test == "randomization" else 0,
        p_floor=1.0 / (resamples + 1) if resamples is not None else 0.0,
    )
