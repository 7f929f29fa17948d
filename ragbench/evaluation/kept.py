"""Resampling statistics kept by what they are computed from.

A report draws 10,000 bootstrap resamples per config and measure and runs a randomization test per compared
pair; a sweep that reused its configs would draw them all again. Inside :func:`stats_kept_in`, a statistic that
goes through :func:`kept` is read from a :class:`~ragbench.core.cache.StatsCache` when the cache holds one of the
same name and version, parameters and input values (the float64 bytes of every array, NaN included), else computed
and kept there. JSON keeps every float exactly (the shortest repr round-trips), so a kept value equals a computed
one bit for bit; every entry carries its checksum, and a damaged one is quarantined and computed again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from ragbench.core.cache import StatsCache

T = TypeVar("T")

_KEPT_IN: ContextVar[StatsCache | None] = ContextVar("stats_kept_in", default=None)


@contextmanager
def stats_kept_in(cache: StatsCache | None) -> Iterator[None]:
    """Inside the block (this thread or task), the statistics computed through :func:`kept` are read from and kept
    in ``cache``; ``None``: computed every time."""
    token = _KEPT_IN.set(cache)
    try:
        yield
    finally:
        _KEPT_IN.reset(token)


def kept(stat: str, version: int, params: Mapping[str, Any], arrays: Sequence[np.ndarray],
         compute: Callable[[], T], record: Callable[..., T]) -> T:
    """``compute()`` (a dataclass ``record``), through the cache :func:`stats_kept_in` set: keyed by ``stat``, its
    ``version`` (bump it when a change can change a value), ``params`` (JSON-able) and the bytes of ``arrays``.
    Without a cache, or when it cannot be written (a home read only to this user), simply computed."""
    cache = _KEPT_IN.get()
    if cache is None:
        return compute()
    from ragbench.core.hashing import stable_hash

    key = stable_hash({"stat": stat, "version": version, "params": dict(params),
                       "arrays": [(hashlib.sha256(a.tobytes()).hexdigest(), a.dtype.str, a.shape) for a in arrays]},
                      length=32)
    held = cache.get(key)
    if held is not None:
        try:
            return record(**held)
        except TypeError:  # kept by a version of the record with other fields: computed again
            pass
    value = compute()
    try:
        cache.put(key, asdict(value))
    except OSError:
        pass
    return value
