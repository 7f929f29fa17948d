"""Rank measures as registered functions (in the style of ranx's ``metrics/`` and ir_measures' registry).

A measure is one function ``f(top, ideal, n_relevant, k, gain) -> float`` registered under its name with
:func:`rank_measure`, in a module of its own in this package:

* ``top``        -- relevance labels of the ranked documents, best first, cut at ``k`` (:data:`UNJUDGED`, -1,
  when unjudged: every measure but ``judged`` reads it as not relevant, ``label > 0``, gain 0);
* ``ideal``      -- the labels of **all judged documents** of the query (the full judged pool);
* ``n_relevant`` -- how many judged documents have a label > 0 (always >= 1: unlabelled queries never reach a
  measure; they get NaN and are counted apart);
* ``k``          -- the cutoff; ``gain`` -- the gain convention name (``exponential`` or ``linear``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: the label of a ranked document the query has no judgment for (below every grade: not relevant, gain 0)
UNJUDGED = -1

MeasureFn = Callable[[np.ndarray, np.ndarray, int, int, str], float]
RANK_MEASURES: dict[str, MeasureFn] = {}
#: ``name -> version`` of every registered measure (see :func:`rank_measure`)
MEASURE_VERSIONS: dict[str, int] = {}


def rank_measure(name: str, version: int = 1) -> Callable[[MeasureFn], MeasureFn]:
    """Decorator: register ``fn`` as the rank measure ``name`` (used as ``name@k`` in configs and results).

    ``version``: bump it when a change to ``fn`` can change a value. Stored results record the version each of
    their measures was computed with; a later sweep recomputes only the measures whose version changed, from the
    stored rankings (the rest of a config's results are reused)."""
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"measure {name!r}: version must be an integer >= 1, not {version!r}")

    def add(fn: MeasureFn) -> MeasureFn:
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

    def compute(self, gains: np.ndarray, ideal: np.ndarray, n_relevant: int) -> float:
        """Value for one query. ``gains``: labels of the ranked docs in order; ``ideal``: all judged labels.
        NaN when the query has no relevant label."""
        if n_relevant == 0:
            return math.nan
        if self.name not in RANK_MEASURES:
            raise ValueError(f"unknown measure {self.name!r}; known: {', '.join(sorted(RANK_MEASURES))}")
        return RANK_MEASURES[self.name](gains[: self.k], ideal, n_relevant, self.k, self.gain)
