"""Label coverage in a report: how much of each config's top k is judged, and when that makes the verdict uncertain.

Every document measure counts an unjudged document as not relevant, so where a config's top ``k`` is mostly unjudged
its nDCG is a lower bound on what people would score it. ``judged@k`` (:mod:`ragbench.evaluation.measures.judged`,
the share of the top-k documents that carry a judgment, as ir_measures' ``Judged@k``) measures that, at the primary
measure's cutoff. It is shown beside the primary on every leaderboard, never compared, never a primary.

The report warns (:attr:`LabelCoverage.sentence`) when

* the winner's judged@k is below :data:`LOW_COVERAGE` (0.5): more than half its top k was never judged; or
* it differs by more than :data:`COVERAGE_GAP` (0.2) from that of a config tied with the winner: the two lower
  bounds are off by different amounts, so the tie and the order may change once the pool is judged.

Both point at the judgment pool (``ragbench judge pool SWEEP``: the unjudged documents of every config's top k).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragbench.core.measure_keys import measure_key
from ragbench.evaluation.measures.judged import COVERAGE_MEASURES

#: below this judged@k the winner's scores are called lower bounds
LOW_COVERAGE = 0.5
#: a larger judged@k gap between the winner and a config tied with it is called out
COVERAGE_GAP = 0.2
#: the leaderboard row key of a config's judged@k (``extra`` cells)
JUDGED_CELL = "judged"
_CUTOFF = re.compile(r"(?:heldout_)?(?:[a-z_]+?)_at_(\d+)")


def coverage_key(primary: str) -> str | None:
    """``judged_at_k`` for the cutoff ``k`` of ``primary`` (``ndcg_at_10`` -> ``judged_at_10``); None for a measure
    without a cutoff."""
    m = _CUTOFF.fullmatch(measure_key(primary))
    return f"{COVERAGE_MEASURES[0]}_at_{m.group(1)}" if m else None


def coverage_header(primary: str) -> str | None:
    """The leaderboard column's header for ``primary``: ``judged@10``; None without a cutoff."""
    key = coverage_key(primary)
    return key.replace("_at_", "@") if key else None


def is_coverage(measure: str) -> bool:
    """Whether ``measure`` (any spelling, ``heldout_`` ones too) is a label-coverage measure: never compared."""
    key = measure_key(measure).removeprefix("heldout_")
    return any(key.startswith(f"{name}_at_") for name in COVERAGE_MEASURES)


def _fraction(v: float) -> str:
    return f"{v:.2f}"


@dataclass(frozen=True)
class LabelCoverage:
    """Each config's mean judged@k (``values``, config id -> share; k the primary's cutoff) with the winner, the
    configs tied with it and the warning :attr:`sentence` (None when coverage does not put the verdict in doubt)."""

    measure: str
    primary: str
    sweep_id: str
    values: dict[str, float]
    winner: str | None
    tied: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def k(self) -> int:
        return int(self.measure.rsplit("_at_", 1)[1])

    @property
    def header(self) -> str:
        """The leaderboard column's header: ``judged@10``."""
        return f"{COVERAGE_MEASURES[0]}@{self.k}"

    def value(self, config_id: str) -> float | None:
        v = self.values.get(config_id)
        return None if v is None or math.isnan(v) else v

    @property
    def gaps(self) -> dict[str, float]:
        """Config tied with the winner -> |its judged@k − the winner's|, for the gaps above :data:`COVERAGE_GAP`."""
        w = self.value(self.winner) if self.winner else None
        if w is None:
            return {}
        return {c: abs(v - w) for c in self.tied if c != self.winner and (v := self.value(c)) is not None
                and abs(v - w) > COVERAGE_GAP}

    @property
    def sentence(self) -> str | None:
        """Why the winner's primary score is a lower bound (low coverage, or a coverage gap to a tied config) and
        what to do, or None."""
        w = self.value(self.winner) if self.winner else None
        if w is None:
            return None
        name, pool = self.labels.get(self.winner, self.winner), f"`ragbench judge pool {self.sweep_id}`"
        parts = []
        if w < LOW_COVERAGE:
            parts.append(f"only {w:.0%} of the winner's ({name}) top {self.k} documents carry a judgment "
                         f"({self.header} {_fraction(w)} < {LOW_COVERAGE:g})")
        gaps = self.gaps
        if gaps:
            shown = "; ".join(f"{self.labels.get(c, c)} {_fraction(self.values[c])}"
                              for c in sorted(gaps, key=gaps.get, reverse=True)[:3])
            parts.append(f"{self.header} of the winner ({_fraction(w)}) differs by more than {COVERAGE_GAP:g} from "
                         f"config(s) tied with it ({shown}{'; ...' if len(gaps) > 3 else ''}), so the tie and the "
                         "order may change once more documents are judged")
        if not parts:
            return None
        return (f"Label coverage: {'; and '.join(parts)}. Unjudged documents count as not relevant, so the winner's "
                f"{self.primary} is a lower bound. Judge the unjudged documents of every config's top {self.k}: "
                f"{pool}.")

    def as_dict(self) -> dict:
        """``measure, winner, values`` (config id -> judged@k), ``tied_gaps`` and ``sentence`` (null when none)."""
        return {"measure": self.measure, "winner": self.winner, "values": dict(self.values),
                "tied_gaps": self.gaps, "sentence": self.sentence}


def label_coverage(stored: Mapping[str, Mapping[str, float]], primary: str, comparison, sweep_id: str,
                   labels: Mapping[str, str] | None = None) -> LabelCoverage | None:
    """The report's :class:`LabelCoverage` from the configs' ``stored`` config-level means (config id -> measure ->
    mean) and the primary measure's ``comparison`` (its ``best`` and ``tied_with_best``); None when the sweep did
    not store judged@k at the primary's cutoff (a sweep made before the measure) or nothing was compared."""
    key = coverage_key(primary)
    if key is None or comparison is None:
        return None
    values = {cid: float(m[key]) for cid, m in stored.items() if m.get(key) is not None}
    if not values:
        return None
    return LabelCoverage(key, measure_key(primary), sweep_id, values, comparison.best,
                         tuple(comparison.tied_with_best), dict(labels or {}))


def coverage_cells(coverage: LabelCoverage | None, config_id: str) -> dict:
    """The leaderboard row's cell: ``{"judged": share}`` (nothing without coverage)."""
    return {} if coverage is None else {JUDGED_CELL: coverage.value(config_id)}
