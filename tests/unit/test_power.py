"""How many questions it would take: the predicted number checked by simulation with the report's own paired test,
and against the textbook sample sizes of the paired t-test."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.evaluation.paired_tests import paired_randomization_test
from ragbench.evaluation.power import (
    MAX_N,
    normal_approximation,
    questions_needed,
    randomization_floor_n,
    t_test_power,
)

SIMULATED_SWEEPS = 1000  # binomial SE of the rate at 0.8: 1.3 %, so the ±5 % band is ±4 SE


def _with_moments(mean: float, sd: float, n: int = 400) -> np.ndarray:
    """Differences whose sample mean and sd (ddof=1) are exactly ``mean`` and ``sd``: the "observed" sweep."""
    z = np.random.default_rng(7).standard_normal(n)
    return mean + sd * (z - z.mean()) / z.std(ddof=1)


TIES = 0.3  # the share of questions two configs score the same on
MU = 0.06 / (1 - TIES)  # the untied differences: N(MU, SIGMA), so that all of them have mean 0.06 and sd 0.2
SIGMA = ((0.2**2 + 0.06**2) / (1 - TIES) - MU**2) ** 0.5


def _zero_inflated(rng, n):
    """30 % of the questions tie (difference 0, as two configs that find the same page do), the rest N(MU, SIGMA):
    mean 0.06, sd 0.2 overall."""
    return np.where(rng.random(n) < TIES, 0.0, rng.normal(MU, SIGMA, n))


@pytest.mark.parametrize("mean, sd, alpha, draw, resamples", [
    (0.06, 0.2, 0.05, lambda rng, n: rng.normal(0.06, 0.2, n), 1000),  # one comparison
    (0.3, 0.3, 0.05 / 19, lambda rng, n: rng.normal(0.3, 0.3, n), 4000),  # 20 configs: Holm's first step
    (0.06, 0.2, 0.05 / 4, _zero_inflated, 4000),  # ties and a skew, as per-query metric differences have
])
def test_at_the_predicted_number_the_randomization_test_rejects_in_80_percent_of_sweeps(mean, sd, alpha, draw,
                                                                                         resamples):
    est = questions_needed(_with_moments(mean, sd), alpha=alpha)
    assert (est.mean_diff, est.sd_diff, est.n_now, est.alpha, est.power) == (
        pytest.approx(mean), pytest.approx(sd), 400, alpha, 0.8)
    n = est.n_needed
    rng = np.random.default_rng(2026)
    rejected = 0
    for i in range(SIMULATED_SWEEPS):  # a sweep of n fresh questions, judged as the report judges one pair
        d = draw(rng, n)
        p = paired_randomization_test(d, np.zeros(n), n_resamples=resamples, seed=i, exact_limit=0).p_value
        rejected += p < alpha
    assert rejected / SIMULATED_SWEEPS == pytest.approx(0.8, abs=0.05), (n, rejected)


def test_the_t_based_number_where_the_normal_formula_falls_short():
    # a large effect at Holm's first step of 20 configs: the normal formula's 15 questions reject in about 57 % of
    # sweeps (simulated as above); the t-based number is larger
    assert normal_approximation(1.0, 0.05 / 19) == 15
    assert questions_needed(_with_moments(0.3, 0.3), alpha=0.05 / 19).n_needed == 20


@pytest.mark.parametrize("effect, n", [(0.2, 199), (0.3, 90), (0.5, 34), (0.8, 15)])
def test_sample_sizes_of_the_paired_t_test_match_the_published_tables(effect, n):
    # Cohen (1988) / G*Power, paired t-test, two-sided alpha 0.05, power 0.80: d = 0.2 -> 199, 0.3 -> 90,
    # 0.5 -> 34, 0.8 -> 15
    assert questions_needed(_with_moments(effect, 1.0), alpha=0.05).n_needed == n
    assert t_test_power(n, effect, 0.05) >= 0.8 > t_test_power(n - 1, effect, 0.05)


def test_equal_means_have_no_number_and_identical_differences_meet_the_tests_floor():
    tied = questions_needed([0.5, 0.2, 0.1], [0.5, 0.1, 0.2])
    assert tied.n_needed is None and tied.why == "the means are equal"
    assert questions_needed([0.5], [0.2]).n_needed is None  # one pair: no spread
    # every question 0.1 better: the t-test needs 2, but the sign-flip test cannot go below p = 2 / 2^n
    same = questions_needed(np.full(5, 0.1))
    assert same.n_needed == randomization_floor_n(0.05) == 6 and 2 / 2**6 < 0.05 <= 2 / 2**5
    assert randomization_floor_n(0.05 / 19) == 10
    assert questions_needed([0.3, np.nan, 0.1], [0.1, 0.2, np.nan]).n_now == 1  # NaN dropped pairwise


def test_far_tails_and_tiny_differences_give_numbers_not_nan():
    # scipy's noncentral t returns NaN far in its tail; the power there is 1 (the normal limit)
    assert t_test_power(30, 3.0, 0.05) == pytest.approx(1.0)
    assert questions_needed(_with_moments(0.9, 0.3), alpha=0.05 / 19).n_needed == 10  # the sign-flip floor
    tiny = questions_needed(_with_moments(1e-5, 0.3), alpha=0.05 / 190)
    assert tiny.n_needed == MAX_N
