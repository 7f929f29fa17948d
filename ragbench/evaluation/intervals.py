"""Confidence intervals of a mean over queries: the percentile bootstrap.

Input is one config's per-query values of one measure; NaN marks a query without relevance labels and is dropped
before the mean and the interval. Same seed, same interval: the resampling stream is consumed in a fixed order,
a chunk of resamples at a time (memory stays flat whatever the number of resamples).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ragbench.evaluation.kept import kept
from ragbench.evaluation.means import query_mean

__all__ = ["ConfidenceInterval", "bootstrap_ci"]

#: bump when a change to :func:`bootstrap_ci` can change an interval: kept intervals of older versions are unused
BOOTSTRAP_VERSION = 2  # 2: the mean is query_mean's (exact, then rounded once), resampled around it

# Upper bound on the number of float64 cells materialised per resampling chunk
# (~8 MB), so memory stays flat whatever n_resamples is.
_CHUNK_CELLS = 1_000_000


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


def as_1d_float(x) -> np.ndarray:
    """``x`` as a 1-D float64 array (``ValueError`` for any other shape)."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {arr.shape}")
    return arr


def chunk_rows(n_cols: int) -> int:
    """Rows of ``n_cols`` float64 cells per resampling chunk (at most ~8 MB, at least one row)."""
    return max(1, _CHUNK_CELLS // max(1, n_cols))


def bootstrap_ci(values, *, n_resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> ConfidenceInterval:
    r"""Percentile bootstrap confidence interval of the mean over queries.

    NaN values are dropped first.  With the remaining ``n`` values
    :math:`x_1..x_n`, draw ``n_resamples`` samples of size ``n`` with
    replacement, compute each resample mean :math:`\bar x^*_r` (as :math:`\bar x` plus the mean of the
    resample's deviations :math:`x^*_i - \bar x`: the same in exact arithmetic, and exact when every value is
    the same), and return the empirical :math:`\alpha/2` and :math:`1-\alpha/2` quantiles of those means
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
        ``mean`` is the sample mean (:func:`~ragbench.evaluation.means.query_mean`, not the bootstrap mean).  With
        ``n == 0`` every field but ``n`` is NaN; with ``n == 1`` the interval
        collapses to the single value.  Inside
        :func:`~ragbench.evaluation.kept.stats_kept_in` it is read from the
        cache when the same values and parameters were resampled before.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    x = as_1d_float(values)
    return kept("bootstrap_ci", BOOTSTRAP_VERSION, {"n_resamples": n_resamples, "confidence": confidence,
                                                    "seed": seed}, [x],
                lambda: _bootstrap(x, n_resamples, confidence, seed), ConfidenceInterval)


def _bootstrap(x: np.ndarray, n_resamples: int, confidence: float, seed: int) -> ConfidenceInterval:
    x = x[~np.isnan(x)]
    n = int(x.size)
    if n == 0:
        return ConfidenceInterval(math.nan, math.nan, math.nan, 0, confidence)
    mean = query_mean(x)
    if n == 1:
        return ConfidenceInterval(mean, mean, mean, 1, confidence)

    rng = np.random.default_rng(seed)
    # resampled around the mean (mean + the mean of the deviations): values that are all equal then resample to
    # exactly their mean, where a mean of n copies of 0.9 summed in floating point drifts off it and out of its CI
    deviations = x - mean
    boot_means = np.empty(n_resamples, dtype=np.float64)
    step = chunk_rows(n)
    # Chunked so that the (resamples x n) index matrix never exceeds ~8 MB;
    # the RNG stream is consumed in order, so results don't depend on chunking
    # beyond the fixed chunk size.
    for start in range(0, n_resamples, step):
        stop = min(start + step, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot_means[start:stop] = mean + deviations[idx].mean(axis=1)

    alpha = 1.0 - confidence
    low, high = np.quantile(boot_means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return ConfidenceInterval(mean, float(low), float(high), n, confidence)
