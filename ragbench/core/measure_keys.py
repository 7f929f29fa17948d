"""Measure keys: one spelling of every measure name in DuckDB, MLflow, the CLI, JSON and the report.

MLflow rejects ``@`` in metric names and splits chart groups at ``/``, so the stored and printed key is the
MLflow-safe spelling of the IR notation: ``ndcg@10`` is ``ndcg_at_10``, ``evidence_recall@512tok`` is
``evidence_recall_at_512tok``, ``reach_hit@10/50`` is ``reach_hit_at_10_of_50``. The ``@`` spelling stays valid
input everywhere (configs, ``--measure``, ``--primary``, lookups in Python): :func:`measure_key` maps both to the
key, and is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: (written as, stored as); applied in order. The store's migration of old files uses the same pairs.
SPELLINGS = (("heldout/", "heldout_"), ("@", "_at_"), ("/", "_of_"))  # heldout/ndcg@10 -> heldout_ndcg_at_10


def measure_key(name: str) -> str:
    """The key of a measure name: ``ndcg@10`` -> ``ndcg_at_10`` (an existing key is returned unchanged)."""
    for written, stored in SPELLINGS:
        name = name.replace(written, stored)
    return name


def measure_key_expr(expr):
    """:func:`measure_key` as a polars expression over a column of names."""
    for written, stored in SPELLINGS:
        expr = expr.str.replace_all(written, stored, literal=True)
    return expr


def measure_keys(names: Iterable[str] | None) -> tuple[str, ...] | None:
    """:func:`measure_key` of each name (None stays None)."""
    return None if names is None else tuple(measure_key(n) for n in names)


class MeasureMap(dict):
    """A ``measure -> value`` dict whose keys are measure keys and whose lookups accept either spelling, so
    ``metrics["ndcg@10"]`` and ``metrics["ndcg_at_10"]`` are the same entry."""

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), **kwargs: Any):
        items = data.items() if isinstance(data, Mapping) else data
        super().__init__((measure_key(k), v) for k, v in [*items, *kwargs.items()])

    def __getitem__(self, key: str) -> Any:
        return super().__getitem__(measure_key(key))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(measure_key(key), value)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(measure_key(key))

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(measure_key(key), default)
