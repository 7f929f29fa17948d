"""The leaderboard's default columns, defined once for the terminal table (:mod:`ragbench.reporting.terminal`) and
the report (:mod:`ragbench.reporting.report`)."""

from __future__ import annotations

from collections.abc import Iterable

#: Measures shown next to the primary one; ``{max_k}`` stands for the deepest recall cutoff the sweep computed.
LEADERBOARD_MEASURES = ("ndcg@10", "recall@10", "recall@{max_k}", "mrr@10", "precision@10")


def deepest_recall_k(present: Iterable[str], default: int = 100) -> int:
    """The largest k of the ``recall@k`` measures in ``present`` (``default`` when there is none)."""
    return max((int(m.split("@")[1]) for m in present if m.startswith("recall@") and m.split("@")[1].isdigit()),
               default=default)


def leaderboard_measures(present: Iterable[str], measures: Iterable[str] = LEADERBOARD_MEASURES) -> tuple[str, ...]:
    """``measures`` with ``{max_k}`` filled in from ``present`` and duplicates dropped (``recall@{max_k}`` is
    ``recall@10`` when 10 is the deepest cutoff); measures absent from ``present`` are kept, callers decide."""
    max_k = deepest_recall_k(present)
    return tuple(dict.fromkeys(m.format(max_k=max_k) for m in measures))
