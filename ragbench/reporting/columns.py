"""The leaderboard's default columns, defined once for the terminal table (:mod:`ragbench.reporting.terminal`) and
the report (:mod:`ragbench.reporting.report`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ragbench.core.measure_keys import measure_key
from ragbench.evaluation.metrics import document_cutoff

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


def shown_measures(spec: dict, primary: str, held: str, available: Iterable[str]) -> tuple[str, ...] | None:
    """The measures a report compares under the sweep file's ``metrics.show`` (``spec``: the stored sweep spec):
    ``primary``, its held-out score ``held`` when computed, then ``show``'s measures in its order, as keys, those
    computed per query (``available``) only (label coverage, judged@k, is kept for the caller to place beside the
    primary). None when the sweep file sets no ``show``: the default columns
    (:data:`LEADERBOARD_MEASURES`) apply."""
    show = (spec.get("metrics") or {}).get("show")
    if not show:
        return None
    present = set(available)
    keys = [measure_key(m) for m in show]
    ordered = (primary, *([held] if held in present else []), *keys)
    return tuple(m for m in dict.fromkeys(ordered) if m in present or m == primary)


def shallow_notes(shallow: dict[str, dict[str, int]]) -> list[str]:
    """One sentence per cutoff whose document measures some configs' runs were too shallow for. ``shallow``:
    measure -> ``{config_id: distinct documents reached}`` of those configs
    (:func:`ragbench.evaluation.metrics.unreached_depth`)."""
    by_cutoff: dict[int, tuple[list[str], dict[str, int]]] = {}
    for m, refused in shallow.items():
        if refused:
            names, configs = by_cutoff.setdefault(document_cutoff(m), ([], {}))
            names.append(m)
            configs.update(refused)
    return [f"{', '.join(names)}: {len(configs)} config(s) not compared, their run named fewer than {k} distinct "
            f"documents for some query (fewest {min(configs.values())}); fetch deeper with "
            f"retrievers[].documents: {k}." for k, (names, configs) in sorted(by_cutoff.items())]
