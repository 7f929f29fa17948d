"""The mean over queries is the exact average rounded once: the same bits in any order, NaN and None left out.

The reference is rational arithmetic (:mod:`fractions`), not the code under test; the fixtures are chosen so that a
plain sum depends on the order and the rounded sum divided by ``n`` misses the exact mean, so either shortcut fails.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

from ragbench.evaluation.means import exact_sum, query_mean, query_means


def _exact(values) -> float:
    kept = [Fraction(v) for v in values if v is not None and not math.isnan(v)]
    return float(sum(kept, Fraction(0)) / len(kept))


def _values(seed: int = 4, n: int = 40) -> list[float]:
    rng = random.Random(seed)
    return [1 / math.log2(rng.randint(1, 10) + 1) for _ in range(n)]


def test_the_mean_is_the_exact_average_rounded_once_in_every_order():
    values = _values()
    assert math.fsum(values) / len(values) != _exact(values)  # the fixture tells the rule from fsum / n
    rng = random.Random(0)
    plain, ours = set(), set()
    for _ in range(50):
        rng.shuffle(values)
        plain.add(sum(values))
        ours.add(query_mean(values))
    assert len(plain) > 1  # a plain sum moves with the order
    assert ours == {_exact(values)}


@pytest.mark.parametrize("values", [
    [1e16, 1.0, -1e16],  # a plain sum loses the 1.0
    [1e-300, 1.0, 1e-300, -1.0],  # what is left is far below the first sum's last bit
    [0.1] * 10,
    [-0.25, 0.5, -1 / 3, 2 / 3],  # paired differences have signs
    [5e-324, 5e-324, 5e-324],  # subnormals
])
def test_hard_sums_are_exact(values):
    assert exact_sum(values) == sum(map(Fraction, values), Fraction(0))
    assert query_mean(values) == _exact(values)


def test_unlabelled_values_are_left_out_and_nothing_left_is_nan():
    assert query_mean([0.5, math.nan, None, 0.25]) == 0.375
    assert math.isnan(query_mean([math.nan, None]))
    assert math.isnan(query_mean([]))
    assert query_mean(iter([0.5, 1.0])) == 0.75  # any iterable
    assert query_mean(pl.Series([0.5, None, 1.0])) == 0.75
    assert query_mean(np.array([[0.5], [1.0]])) == 0.75
    assert query_mean([1.0, math.inf]) == math.inf  # not finite: numpy's mean, no exact sum


def test_group_means_keep_the_first_appearance_order_and_further_aggregations():
    values = _values(seed=7, n=30)
    frame = pl.DataFrame({"g": ["b", "a"] * 15, "value": values})
    out = query_means(frame, "g", n=pl.len())
    assert out.columns == ["g", "n", "mean"] and out["g"].to_list() == ["b", "a"]
    assert out["mean"].to_list() == [_exact(values[0::2]), _exact(values[1::2])]
    assert out["n"].to_list() == [15, 15]
    reversed_frame = frame.reverse()
    again = dict(query_means(reversed_frame, "g").iter_rows())
    assert again == dict(out.select("g", "mean").iter_rows())
    nulls = query_means(pl.DataFrame({"g": ["a", "b", "b"], "value": [None, 0.5, None]}), "g")
    assert nulls["g"].to_list() == ["a", "b"] and math.isnan(nulls["mean"][0]) and nulls["mean"][1] == 0.5
    assert query_means(frame.clear(), "g").height == 0
