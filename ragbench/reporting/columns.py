"""The leaderboard's default columns, defined once for the terminal table (:mod:`ragbench.reporting.terminal`) and
the report (:mod:`ragbench.reporting.report`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragbench.core.measures import measure_key

#: Measures shown next to the primary one; ``{max_k}`` stands for the deepest recall cutoff the sweep computed.
LEADERBOARD_MEASURES = ("ndcg_at_10", "recall_at_10", "recall_at_{max_k}", "mrr_at_10", "precision_at_10")

_RECALL = re.compile(r"^recall_at_(\d+)$")


def deepest_recall_k(present: Iterable[str], default: int = 100) -> int:
    """The largest k of the ``recall_at_k`` measures in ``present`` (``default`` when there is none)."""
    return max((int(m.group(1)) for m in map(_RECALL.match, map(measure_key, present)) if m), default=default)


def leaderboard_measures(present: Iterable[str], measures: Iterable[str] = LEADERBOARD_MEASURES) -> tuple[str, ...]:
    """``measures`` (as keys) with ``{max_k}`` filled in from ``present`` and duplicates dropped
    (``recall_at_{max_k}`` is ``recall_at_10`` when 10 is the deepest cutoff); measures absent from ``present`` are
    kept, callers decide."""
    max_k = deepest_recall_k(present)
    return tuple(dict.fromkeys(measure_key(m.format(max_k=max_k)) for m in measures))
