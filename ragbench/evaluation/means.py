"""The mean over queries, one rule for every table: the exact mean of the values, rounded once.

A plain floating-point sum depends on the order it is taken in: the same per-query values read back from DuckDB
in another row order, or grouped by polars, give a mean that differs in its last bits. A rerun that copies reused
rows, the leaderboard and the "since the previous sweep" section then showed one config with three means, and two
configs with identical values were ordered by rounding noise rather than by the tie rule (the smallest config id).
Here the sum is exact (:func:`math.fsum` repeated on its own residual until it is zero: a handful of doubles whose
sum is exactly that of the values) and divided by ``n`` in rational arithmetic, so the mean is the nearest double to
the true average, whatever the order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import polars as pl


def exact_sum(values: list[float]) -> Fraction:
    """The exact sum of finite ``values``: :func:`math.fsum` gives the sum rounded; the rounded part is taken out
    and the rest summed again until nothing is left (two or three passes for values of similar size)."""
    rest, total = list(values), Fraction(0)
    while (part := math.fsum(rest)) != 0.0:
        total += Fraction(part)
        rest.append(-part)
    return total


def query_mean(values: Iterable[float | None] | np.ndarray) -> float:
    r"""The mean over queries of ``values``, NaN and None (unlabelled) excluded:
    :math:`\operatorname{round}(\frac1n \sum_i x_i)`, the exact average rounded once to the nearest double, so it does
    not depend on the order of the values. NaN when no value is left; a non-finite value gives numpy's mean."""
    if not hasattr(values, "__array__"):  # a list or a generator; arrays and polars Series convert themselves
        values = list(values)
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[~np.isnan(x)]
    if not x.size:
        return math.nan
    if not np.isfinite(x).all():
        return float(x.mean())
    return float(exact_sum(x.tolist()) / x.size)


def query_means(frame: pl.DataFrame, by: str | list[str], *, value: str = "value", name: str = "mean",
                **aggs: pl.Expr) -> pl.DataFrame:
    """One row per group of ``by`` (in order of first appearance): the group's :func:`query_mean` of ``value`` as
    ``name``, after any further aggregations ``aggs`` (polars expressions, by keyword)."""
    import polars as pl

    groups = frame.group_by(by, maintain_order=True).agg(pl.col(value).cast(pl.Float64).alias("_values"), **aggs)
    # one flat array sliced per group: Python lists of every group's values cost ten times the sums
    flat = groups["_values"].explode().to_numpy()  # no group is empty; null -> NaN
    lengths = groups["_values"].list.len().to_numpy().astype(np.int64)
    ends = np.cumsum(lengths)
    means = [query_mean(flat[start:end]) for start, end in zip((ends - lengths).tolist(), ends.tolist())]
    return groups.with_columns(pl.Series(name, means, dtype=pl.Float64)).drop("_values")
