"""The report's "before and after the pooled judgments" section: each config's primary score on the dataset's own
labels and on them plus the judgments ``ragbench judge merge`` added (:mod:`ragbench.judgments`).

"Before" is the stored ``unpooled_<primary>`` mean: the same stored ranking judged with the original labels only
(:func:`ragbench.judgments.rescore.unpooled_means`); "after" is the primary itself. ``judged@10`` is shown beside
both when stored (the share of the top 10 that carries a judgment). Configs are listed by their "after" score,
best first; the section is absent when no judgment was added to the sweep's dataset.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragbench.core.measure_keys import MeasureMap

UNPOOLED = "unpooled_"
JUDGED = "judged_at_10"


@dataclass(frozen=True)
class PooledScore:
    """One config's ``before`` and ``after`` means of the primary (and of judged@10, None when not stored)."""

    config_id: str
    label: str
    before: float
    after: float
    judged_before: float | None = None
    judged_after: float | None = None

    @property
    def change(self) -> float:
        return self.after - self.before

    def as_dict(self) -> dict:
        return {"config_id": self.config_id, "label": self.label, "before": _num(self.before),
                "after": _num(self.after), "change": _num(self.change), "judged_at_10_before": _num(self.judged_before),
                "judged_at_10_after": _num(self.judged_after)}


@dataclass(frozen=True)
class PooledJudgments:
    """The section: the ``primary`` measure and one :class:`PooledScore` per config, best "after" first."""

    primary: str
    rows: tuple[PooledScore, ...]

    def lines(self, limit: int | None = None) -> list[str]:
        """Sentences: a title line, then one line per config (``limit`` best ones): ``label: 0.524 -> 0.587 (+0.063);
        judged@10 0.31 -> 0.62``."""
        rows = self.rows if limit is None else self.rows[:limit]
        out = [f"Before and after the pooled judgments ({self.primary} on the original labels -> with the added "
               "judgments, same rankings):"]
        for r in rows:
            judged = (f"; judged@10 {r.judged_before:.2f} -> {r.judged_after:.2f}"
                      if r.judged_before is not None and r.judged_after is not None else "")
            out.append(f"  {r.label}: {r.before:.3f} -> {r.after:.3f} ({r.change:+.3f}){judged}")
        if limit is not None and len(self.rows) > limit:
            out.append(f"  … {len(self.rows) - limit} more configs in the HTML report")
        return out

    def as_dict(self) -> dict:
        return {"primary": self.primary, "configs": [r.as_dict() for r in self.rows]}


def _num(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def pooled_scores(stored: dict[str, MeasureMap], primary: str, labels: dict[str, str]) -> PooledJudgments | None:
    """The section from each config's stored means ``stored`` (``config_id -> measures``), ``primary`` a measure
    key and ``labels`` the configs in words; None when no config stored an ``unpooled_`` mean of ``primary``."""
    rows = []
    for config_id, means in stored.items():
        before, after = means.get(UNPOOLED + primary), means.get(primary)
        if before is None or after is None:
            continue
        rows.append(PooledScore(config_id, labels.get(config_id, config_id), before, after,
                                means.get(UNPOOLED + JUDGED), means.get(JUDGED)))
    if not rows:
        return None
    rows.sort(key=lambda r: (-(r.after if r.after == r.after else -math.inf), r.config_id))
    return PooledJudgments(primary, tuple(rows))
