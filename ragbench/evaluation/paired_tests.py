"""Paired tests of two configurations on the same queries, and the Holm correction over a family of them.

Inputs are two configs' per-query values of one measure, aligned by query; NaN marks an unlabelled query, and a
paired test uses only the queries where *both* values are non-NaN.

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
  - two-sided by default; ``alternative="less"`` (H1: ``a`` lower than ``b``)
    counts the sign vectors with ``sum s d <= sum d`` instead (``"greater"``:
    ``>=``), floor ``1 / 2 ** n`` exact: the p-value scipy's
    ``permutation_test(..., permutation_type="samples", alternative=...)``
    gives on paired samples.  The screen asks a one-sided question (does a
    pair fall short of the leader?) and uses it.

* Number of resamples (:func:`required_resamples`): a Holm family of ``m``
  comparisons at level ``alpha`` gets ``R >= 100 * m / alpha - 1``, so the
  p floor times the Holm factor is at most ``alpha / 100`` and, at the strictest
  Holm threshold ``alpha / m``, the Monte Carlo p-value has a relative standard
  error of at most 10 %.
* Random streams: each pair gets its own stream (:func:`pair_seed`), the child of
  ``numpy.random.SeedSequence(seed)`` keyed by the pair's two config ids
  (``spawn_key``), so streams are independent across pairs and a pair's stream
  does not depend on which other configs are in the grid.
* Paired t-test: two-sided ``scipy.stats.ttest_rel`` (same as ``ranx``'s
  ``stat_test="student"``); no floor.
* Multiple comparisons: Holm–Bonferroni (:func:`holm_correction`); a pair is significant when its adjusted
  p-value is ``< alpha``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from ragbench.evaluation.intervals import as_1d_float, chunk_rows
from ragbench.evaluation.kept import kept
from ragbench.evaluation.means import query_mean

__all__ = [
    "EXACT_LIMIT",
    "RESOLUTION",
    "DEFAULT_RESAMPLES",
    "PairedTest",
    "required_resamples",
    "pair_seed",
    "ALTERNATIVES",
    "paired_randomization_test",
    "paired_t_test",
    "holm_correction",
]

#: Enumerate every sign vector (exact p-value) when ``2 ** n`` is at most this (or at most the resamples asked for).
EXACT_LIMIT = 1 << 20

#: Resampling resolution: the p floor times the number of comparisons is at most ``alpha / RESOLUTION``.
RESOLUTION = 100

DEFAULT_RESAMPLES = 10_000
#: bump when a change to :func:`paired_randomization_test` can change a result: kept results of older versions are
#: unused (:mod:`ragbench.evaluation.kept`)
RANDOMIZATION_VERSION = 2  # 2: mean_diff is query_mean's (exact, then rounded once)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class PairedTest:
    """Result of a paired test of ``a`` against ``b`` (two-sided unless ``alternative`` says otherwise).

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
        p-value under ``alternative`` (NaN when the test is undefined, e.g. ``n < 2``).
    n_resamples : int | None
        Sign vectors the randomization test used: ``2 ** n_nonzero`` when
        exact, ``R`` for Monte Carlo; ``None`` for the t-test.
    exact : bool
        The randomization p-value is exact (full enumeration).
    p_floor : float
        Smallest p-value this test could have returned on these queries:
        ``2 / 2 ** n_nonzero`` when exact (1.0 when every difference is 0),
        ``1 / (R + 1)`` for Monte Carlo, 0.0 for the t-test (no floor); one-sided exact: ``1 / 2 ** n_nonzero``.
    alternative : str
        ``"two-sided"``, ``"less"`` (H1: ``a`` below ``b``) or ``"greater"``.
    """

    test: str
    n: int
    mean_diff: float
    statistic: float
    p_value: float
    n_resamples: int | None = None
    exact: bool = False
    p_floor: float = 0.0
    alternative: str = "two-sided"


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` at the positions where both are non-NaN."""
    a = as_1d_float(a)
    b = as_1d_float(b)
    if a.shape != b.shape:
        raise ValueError(f"paired inputs differ in length: {a.shape[0]} vs {b.shape[0]}")
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep], b[keep]


def paired_diffs(a, b) -> np.ndarray:
    """``a - b`` over positions where both are non-NaN."""
    a, b = _paired(a, b)
    return a - b


def paired_means(a, b) -> tuple[float, float]:
    """The means (:func:`~ragbench.evaluation.means.query_mean`) of ``a`` and of ``b`` over the positions where
    both are non-NaN: the two sides of a paired comparison (NaN when no position is left)."""
    a, b = _paired(a, b)
    return query_mean(a), query_mean(b)


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


def paired_randomization_test(a, b, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int | np.random.SeedSequence = 0,
                              exact_limit: int = EXACT_LIMIT, alternative: str = "two-sided") -> PairedTest:
    r"""Paired randomization (sign-flip permutation) test, two-sided unless ``alternative`` says otherwise.

    Under H0 the two systems are exchangeable on every query, so each per-query difference :math:`d_i = a_i - b_i`
    is equally likely to have either sign.  Queries with :math:`d_i = 0` are dropped (their sign changes no sum, so
    the p-value is the same); with the remaining ``n`` differences, :math:`T = |\sum_i d_i|` observed and
    :math:`T_s = |\sum_i s_i d_i|` for sign vectors :math:`s \in \{-1, +1\}^n`:

    * **exact**, when :math:`2^n \le \max(R, \text{exact\_limit})`: every sign vector is enumerated (half of them:
      :math:`T_s = T_{-s}`) and :math:`p = \#\{s : T_s \ge T\} / 2^n`; floor :math:`2 / 2^n`;
    * **Monte Carlo** otherwise, over :math:`R` random sign vectors:
      :math:`p = (1 + \#\{r : T_r \ge T\}) / (1 + R)` (Phipson & Smyth 2010; never 0); floor :math:`1 / (R + 1)`.

    ``>=`` is evaluated with a tolerance of ``1e-9 * sum |d_i|`` so floating-point rounding of equal sums cannot
    undercount.  This is the test ranx calls ``"fisher"``, but ranx reports ``c / R`` without the +1 terms.

    One-sided (``alternative="less"``, H1: ``a`` is lower than ``b``): :math:`S = \sum_i d_i` and
    :math:`S_s = \sum_i s_i d_i`, counted when :math:`S_s \le S` (same tolerance); exact :math:`p = \#\{s : S_s
    \le S\} / 2^n`, floor :math:`1 / 2^n`; Monte Carlo as above. ``"greater"`` is ``"less"`` of ``b`` against
    ``a``. At the same level it rejects where a two-sided test rejects in that direction, and more often: the
    question "does ``a`` fall short of ``b``?" spends all of ``alpha`` on the side it asks about.

    Parameters
    ----------
    a, b : array_like
        Per-query values of the two systems, aligned by query.  Queries where either is NaN are dropped.
    n_resamples : int
        Monte Carlo resamples ``R``.
    seed : int or numpy.random.SeedSequence
        Seed of ``numpy.random.default_rng`` (``compare_configs`` passes each pair its own :func:`pair_seed`).
    exact_limit : int
        Enumerate exactly when ``2 ** n`` is at most ``max(n_resamples, exact_limit)``; ``0`` enumerates only when
        ``2 ** n <= n_resamples``.
    alternative : str
        ``"two-sided"`` (default), ``"less"`` or ``"greater"``.

    Returns
    -------
    PairedTest
        ``n`` counts every paired query (zeros included); ``p_value`` is NaN if no paired query remains and 1.0 if
        all differences are zero; ``n_resamples``, ``exact`` and ``p_floor`` describe the resolution. Inside
        :func:`~ragbench.evaluation.kept.stats_kept_in` it is read from the cache when the same values, stream and
        parameters were tested before.
    """
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}, not {alternative!r}")
    a, b = as_1d_float(a), as_1d_float(b)
    stream = {"entropy": seed.entropy, "spawn_key": list(seed.spawn_key)} \
        if isinstance(seed, np.random.SeedSequence) else int(seed)
    params = {"n_resamples": n_resamples, "exact_limit": exact_limit, "seed": stream}
    if alternative != "two-sided":  # so two-sided results kept before the one-sided test keep their keys
        params["alternative"] = alternative
    return kept("paired_randomization_test", RANDOMIZATION_VERSION, params, [a, b],
                lambda: _randomization(a, b, n_resamples, seed, exact_limit, alternative), PairedTest)


#: the hypotheses :func:`paired_randomization_test` can test against H0 (the two systems exchangeable)
ALTERNATIVES = ("two-sided", "less", "greater")


def _randomization(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int | np.random.SeedSequence,
                   exact_limit: int, alternative: str) -> PairedTest:
    d_all = paired_diffs(a, b)
    n_all = int(d_all.size)
    if n_all == 0:
        return PairedTest("randomization", 0, math.nan, math.nan, math.nan, 0, True, math.nan, alternative)
    mean_diff = query_mean(d_all)
    d = d_all[d_all != 0.0]  # a zero's sign changes nothing: same p-value, fewer sign vectors
    n = int(d.size)
    if n == 0:
        return PairedTest("randomization", n_all, mean_diff, mean_diff, 1.0, 1, True, 1.0, alternative)
    if alternative == "greater":  # a above b: b below a
        d = -d
    # Tolerance scaled by the magnitude of the data, so ties that differ only
    # by summation rounding still count as "at least as extreme".
    tolerance = 1e-9 * float(np.abs(d).sum())
    if alternative == "two-sided":  # |S_s| >= |S|: compare |sums|, same ordering as |means|
        extreme = SignSums(abs(float(d.sum())) - tolerance, two_sided=True)
    else:  # S_s <= S
        extreme = SignSums(float(d.sum()) + tolerance, two_sided=False)
    if n < 63 and (1 << n) <= max(n_resamples, exact_limit):
        return PairedTest("randomization", n_all, mean_diff, mean_diff, _extreme_signs(d, extreme) / (1 << n), 1 << n,
                          True, (2.0 if extreme.two_sided else 1.0) / (1 << n), alternative)
    p = (_extreme_flips(d, extreme, n_resamples, seed) + 1) / (n_resamples + 1)
    return PairedTest("randomization", n_all, mean_diff, mean_diff, float(p), n_resamples, False,
                      1.0 / (n_resamples + 1), alternative)


@dataclass(frozen=True)
class SignSums:
    """Which signed sums count as at least as extreme as the observed one: ``|S_s| >= threshold`` (two-sided) or
    ``S_s <= threshold`` (one-sided, lower tail)."""

    threshold: float
    two_sided: bool

    def count(self, sums: np.ndarray) -> int:
        """How many of ``sums`` count."""
        if self.two_sided:
            return int(np.count_nonzero(np.abs(sums) >= self.threshold))
        return int(np.count_nonzero(sums <= self.threshold))


def _extreme_signs(d: np.ndarray, extreme: SignSums) -> int:
    """Of all ``2^n`` sign vectors, those whose sum ``extreme`` counts, enumerated over half of them: the first sign
    is fixed to + and each sum ``S`` stands for its mirror image ``-S`` too; the other ``n - 1`` signs run through
    the bits of ``0 .. 2^(n-1) - 1``."""
    n = int(d.size)
    half = 1 << (n - 1)
    count = 0
    step = chunk_rows(n)
    bits = np.arange(n - 1, dtype=np.int64)
    for start in range(0, half, step):
        codes = np.arange(start, min(start + step, half), dtype=np.int64)
        signs = 1.0 - 2.0 * ((codes[:, None] >> bits) & 1)
        sums = d[0] + signs @ d[1:]
        count += extreme.count(sums) + extreme.count(-sums)
    return count


def _extreme_flips(d: np.ndarray, extreme: SignSums, n_resamples: int, seed) -> int:
    """Of ``n_resamples`` random sign vectors (``default_rng(seed)``, a chunk of rows at a time), those whose sum
    ``extreme`` counts."""
    n = int(d.size)
    rng = np.random.default_rng(seed)
    count = 0
    step = chunk_rows(n)
    total = float(d.sum())
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        flips = rng.integers(0, 2, size=(rows, n), dtype=np.int8)  # 1 = flip the sign
        count += extreme.count(total - 2.0 * (flips.astype(np.float64) @ d))
    return count


def paired_t_test(a, b) -> PairedTest:
    r"""Two-sided paired Student's t-test (``scipy.stats.ttest_rel``).

    :math:`t = \bar d / (s_d / \sqrt n)` with :math:`d_i = a_i - b_i`,
    :math:`n-1` degrees of freedom, :math:`p = 2\,P(T_{n-1} \ge |t|)`.  Same as
    ranx's ``stat_test="student"``.

    Queries where either value is NaN are dropped.  Degenerate cases: if all
    differences are exactly zero (scipy returns NaN, 0/0) the p-value is 1.0 —
    the data give no evidence of a difference; with ``n < 2`` it is NaN.
    """
    d = paired_diffs(a, b)
    n = int(d.size)
    if n == 0:
        return PairedTest("student", 0, math.nan, math.nan, math.nan)
    mean_diff = query_mean(d)
    if n < 2:
        return PairedTest("student", n, mean_diff, math.nan, math.nan)
    if not np.any(d):
        return PairedTest("student", n, mean_diff, 0.0, 1.0)
    from scipy import stats  # imported here: 0.9 s that every sweep and report would pay for one test

    res = stats.ttest_rel(d, np.zeros_like(d), alternative="two-sided")
    return PairedTest("student", n, mean_diff, float(res.statistic), float(res.pvalue))


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
