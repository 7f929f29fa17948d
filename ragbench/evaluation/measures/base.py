"""Rank measures as registered functions (in the style of ranx's ``metrics/`` and ir_measures' registry).

A measure is one function registered under its name with :func:`rank_measure`, in a module of its own in this
package. The built-in ones take every query at once, ``f(batch: RankedBatch, k, gain) -> ndarray`` (one value per
query; registered with ``batched=True``), so a sweep of a thousand queries makes one numpy call per measure, not a
thousand. A measure may also be written for one query, ``f(top, ideal, n_relevant, k, gain) -> float``, with

* ``top``        -- relevance labels of the ranked documents, best first, cut at ``k`` (:data:`UNJUDGED`, -1,
  when unjudged: every measure but ``judged`` reads it as not relevant, ``label > 0``, gain 0);
* ``ideal``      -- the labels of **all judged documents** of the query (the full judged pool), highest first;
* ``n_relevant`` -- how many judged documents have a label > 0 (always >= 1: unlabelled queries never reach a
  measure; they get NaN and are counted apart);
* ``k``          -- the cutoff; ``gain`` -- the gain convention name (``exponential`` or ``linear``).

:class:`RankedBatch` holds the same for many queries as matrices. A sum over a query's first ``n`` positions is
taken with :func:`row_sums`, in the order numpy sums an array of ``n`` values, so a batched measure equals the
same formula applied one query at a time bit for bit (stored results keep their values).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: the label of a ranked document the query has no judgment for (below every grade: not relevant, gain 0)
UNJUDGED = -1

MeasureFn = Callable[..., "float | np.ndarray"]
RANK_MEASURES: dict[str, MeasureFn] = {}
#: ``name -> version`` of every registered measure (see :func:`rank_measure`)
MEASURE_VERSIONS: dict[str, int] = {}


def rank_measure(name: str, version: int = 1, *, batched: bool = False) -> Callable[[MeasureFn], MeasureFn]:
    """Decorator: register ``fn`` as the rank measure ``name`` (used as ``name@k`` in configs and results).

    ``version``: bump it when a change to ``fn`` can change a value. Stored results record the version each of
    their measures was computed with; a later sweep recomputes only the measures whose version changed, from the
    stored rankings (the rest of a config's results are reused). ``batched``: ``fn(batch, k, gain)`` takes a
    :class:`RankedBatch` and returns one value per query; otherwise ``fn(top, ideal, n_relevant, k, gain)`` is
    called once per query."""
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"measure {name!r}: version must be an integer >= 1, not {version!r}")

    def add(fn: MeasureFn) -> MeasureFn:
        fn.batched = batched
        RANK_MEASURES[name] = fn
        MEASURE_VERSIONS[name] = version
        return fn
    return add


def measure_version(name: str) -> int:
    """The registered version of rank measure ``name`` (1 for a measure registered before versions, or unknown)."""
    return MEASURE_VERSIONS.get(name, 1) if name in RANK_MEASURES else 1


def gain(labels: np.ndarray, convention: str) -> np.ndarray:
    """``exponential``: 2^rel - 1 (Burges et al. 2005); ``linear``: rel (Järvelin & Kekäläinen 2002). Labels
    below 0 count as 0."""
    labels = np.clip(labels.astype(np.float64), 0, None)
    return np.exp2(labels) - 1.0 if convention == "exponential" else labels


@dataclass(frozen=True)
class Measure:
    """A measure at a cutoff, e.g. ``Measure("ndcg", 10)`` is ``ndcg@10``."""

    name: str
    k: int
    gain: str = "exponential"

    def __str__(self) -> str:
        return f"{self.name}@{self.k}"

    def compute(self, batch: "RankedBatch") -> np.ndarray:
        """One value per query of ``batch``; NaN for a query with no relevant label."""
        fn = RANK_MEASURES.get(self.name)
        if fn is None:
            raise ValueError(f"unknown measure {self.name!r}; known: {', '.join(sorted(RANK_MEASURES))}")
        labelled = batch.n_relevant > 0
        if getattr(fn, "batched", False):
            with np.errstate(divide="ignore", invalid="ignore"):  # unlabelled rows: replaced by NaN below
                values = np.asarray(fn(batch, self.k, self.gain), dtype=np.float64)
        else:  # a measure written for one query
            values = np.array([fn(*batch.one_query(i, self.k), self.k, self.gain) if labelled[i] else math.nan
                               for i in range(len(labelled))], dtype=np.float64)
        return np.where(labelled, values, math.nan)


@dataclass(frozen=True)
class RankedBatch:
    """Many queries' judged rankings as matrices (one row per query).

    ``labels``: the labels of each query's ranked documents, best first, :data:`UNJUDGED` for an unjudged document
    and for every position after the query's last one; ``lengths``: how many documents each query ranked (up to
    the matrix's width, the deepest cutoff); ``ideal``: the query's highest judged labels, descending, as many as
    the deepest cutoff, :data:`UNJUDGED` after the last; ``n_judged``, ``n_relevant``: judged labels, and those
    > 0, per query; ``judged``, ``judged_start``: every judged label, query after query (each highest first),
    and where each query's begin (a query may have far more judged documents than any cutoff)."""

    labels: np.ndarray
    lengths: np.ndarray
    ideal: np.ndarray
    n_judged: np.ndarray
    n_relevant: np.ndarray
    judged: np.ndarray
    judged_start: np.ndarray

    def top(self, k: int) -> np.ndarray:
        """The labels of the first ``k`` positions (UNJUDGED where a query ranked fewer)."""
        return self.labels[:, :k]

    def top_lengths(self, k: int) -> np.ndarray:
        """How many documents each query has in its top ``k``: min(k, ranked)."""
        return np.minimum(self.lengths, k)

    def one_query(self, i: int, k: int) -> tuple[np.ndarray, np.ndarray, int]:
        """``(top, ideal, n_relevant)`` of query ``i`` as a one-query measure takes them (``ideal``: all its judged
        labels)."""
        start = int(self.judged_start[i])
        return self.labels[i, :min(k, int(self.lengths[i]))], self.judged[start:start + int(self.n_judged[i])], \
            int(self.n_relevant[i])


def row_sums(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Row ``i``'s sum over its first ``lengths[i]`` entries, added as numpy adds an array of that length
    (pairwise, so the association depends on the length): rows of one length are summed together, and each row's
    sum is bit for bit the sum of the row alone."""
    out = np.zeros(len(values), dtype=np.float64)
    for n in np.unique(lengths):
        rows = lengths == n
        out[rows] = values[rows, :n].sum(axis=1)
    return out
