"""How many questions it would take: the sample size at which a paired test detects a given mean difference.

Two configs tied with each other on 30 questions are not equal; the data may just be too few to tell them apart.
From the paired per-query differences ``d_i = a_i - b_i`` (mean ``Δ``, sample standard deviation ``s``, ``ddof=1``)
:func:`questions_needed` answers: how many questions drawn like these would a two-sided paired test at level
``alpha`` reject "no difference" on, with probability ``power`` (80 % by default), if the true difference were
the observed ``Δ``?

The number is the smallest ``n >= 2`` whose paired t-test power reaches ``power``: with ``df = n - 1``, critical
value ``c = t_{1 - alpha/2, df}`` and noncentrality ``λ = sqrt(n) |Δ| / s``,

    power(n) = P(T' > c) + P(T' < -c),   T' ~ noncentral t(df, λ)

(the exact power of the t-test for normal differences). It is chosen over the normal approximation
``n = ⌈((z_{1-alpha/2} + z_{power}) s / |Δ|)²⌉`` (:func:`normal_approximation`), which it approaches for large
``n`` and exceeds by a few questions at small ``n`` and small ``alpha`` (where the t's heavier tails matter: at
``alpha / m`` with many configs, or a large effect that needs 10 questions). The report's default test is the
paired randomization (sign-flip) test, whose power for differences like these follows the t-test's (Lehmann &
Romano, *Testing Statistical Hypotheses*, 15.2); ``tests/unit/test_power.py`` checks the number by simulating
sweeps and running that test. One more bound is the randomization test's own: it cannot return ``p`` below
``2 / 2^n``, so ``n`` is at least the least ``n`` with ``2 / 2^n < alpha``.

This is a planning figure, not a promise: ``Δ`` and ``s`` are estimates from the questions at hand, and new
questions may differ from them. A zero ``Δ`` has no answer (the means are equal), and neither do fewer than two
paired questions (no spread to estimate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ragbench.evaluation.paired_tests import paired_diffs

__all__ = ["DEFAULT_POWER", "MAX_N", "PowerEstimate", "normal_approximation", "questions_needed",
           "randomization_floor_n", "t_test_power"]

#: The power the report asks for: a difference of the observed size is detected in 4 of 5 such samples.
DEFAULT_POWER = 0.8
#: Differences smaller than this count as none (as the win/tie/loss counts do).
ZERO = 1e-12
#: The search gives up beyond this many questions (a difference this small is no reason to label more).
MAX_N = 10**9


@dataclass(frozen=True)
class PowerEstimate:
    """The sample size for one pair: ``n_needed`` questions (None when there is no answer: ``why`` says so) to detect
    ``mean_diff`` with spread ``sd_diff`` at ``alpha`` (two-sided, per test) with probability ``power``;
    ``n_now`` paired questions at hand."""

    mean_diff: float
    sd_diff: float
    n_now: int
    n_needed: int | None
    alpha: float
    power: float
    why: str | None = None


def t_test_power(n: int, effect: float, alpha: float) -> float:
    """The power of the two-sided paired t-test at level ``alpha`` on ``n`` questions for a standardized effect
    ``effect = |Δ| / s``: ``P(|T'| > t_{1-alpha/2, n-1})`` with ``T'`` noncentral t of ``n - 1`` degrees of freedom and
    noncentrality ``sqrt(n) * effect``."""
    # scipy.special's distribution functions, not scipy.stats (a second to import on every report)
    from scipy.special import nctdtr, ndtr, ndtri, stdtrit

    if n < 2:
        return 0.0
    df = n - 1
    crit = float(stdtrit(df, 1 - alpha / 2))
    nc = math.sqrt(n) * abs(effect)
    power = float(1 - nctdtr(df, nc, crit) + nctdtr(df, nc, -crit))
    if math.isnan(power):  # the noncentral t fails far in the tail (large nc): the normal limit is exact there
        z = float(ndtri(1 - alpha / 2))
        power = float(1 - ndtr(z - nc) + ndtr(-z - nc))
    return power


def normal_approximation(effect: float, alpha: float, power: float = DEFAULT_POWER) -> int:
    """``⌈((z_{1-alpha/2} + z_{power}) / effect)²⌉`` for a standardized effect ``|Δ| / s`` (the start of the
    t-test search; the textbook formula)."""
    from scipy.special import ndtri

    return math.ceil(((float(ndtri(1 - alpha / 2)) + float(ndtri(power))) / abs(effect)) ** 2)


def randomization_floor_n(alpha: float) -> int:
    """The fewest nonzero differences on which the sign-flip test can reach ``p < alpha``: its smallest p-value
    is ``2 / 2^n``, so the least ``n`` with ``2 / 2^n < alpha``."""
    return math.floor(math.log2(2 / alpha)) + 1


def _t_search(effect: float, alpha: float, power: float) -> int:
    """The least ``n >= 2`` with :func:`t_test_power` at least ``power``: from the normal approximation (the t-test
    needs at least as many, up to rounding), up until the power is reached, then down while it still is."""
    n = max(2, min(MAX_N, normal_approximation(effect, alpha, power)))
    while n < MAX_N and t_test_power(n, effect, alpha) < power:
        n = n + 1 if n < 1000 else math.ceil(n * 1.001)
    while n > 2 and t_test_power(n - 1, effect, alpha) >= power:
        n -= 1
    return n


def questions_needed(a, b=None, *, alpha: float = 0.05, power: float = DEFAULT_POWER) -> PowerEstimate:
    """The questions a two-sided paired test at level ``alpha`` needs to detect the mean of the differences
    ``a - b`` (or of ``a`` itself when ``b`` is None) with probability ``power`` (see the module docstring:
    the least ``n`` whose noncentral-t power reaches ``power`` for ``|Δ| / s``, and at least
    :func:`randomization_floor_n`).

    ``alpha`` is the level of this one test: for a Holm family of ``m`` comparisons pass ``alpha / m``, the
    threshold of Holm's first step, the strictest any pair of the family meets (conservative for the rest).
    NaN values are dropped pairwise. ``n_needed`` is None, with ``why``, when ``Δ`` is zero or fewer than two
    pairs remain.
    """
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must lie strictly between 0 and 1, got {alpha}, {power}")
    d = paired_diffs(a, np.zeros_like(np.asarray(a, dtype=float)) if b is None else b)
    n_now = int(d.size)
    if n_now < 2:
        return PowerEstimate(float(d.mean()) if n_now else math.nan, math.nan, n_now, None, alpha, power,
                             "fewer than two paired questions: no spread to estimate")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if abs(mean) <= ZERO:
        return PowerEstimate(mean, sd, n_now, None, alpha, power, "the means are equal")
    n_t = 2 if sd <= ZERO else _t_search(abs(mean) / sd, alpha, power)
    return PowerEstimate(mean, sd, n_now, max(n_t, randomization_floor_n(alpha)), alpha, power)
