"""The held-out split (``dataset.holdout``): labelled queries set aside so the winner is measured on questions the
choice was not made on.

The best of 40 configs on 50 questions is optimistic (the winner's curse). The sweep ranks configs on the tuning
queries and measures every config on the held-out ones too, stored as ``heldout/<measure>``
(:data:`HELDOUT_PREFIX`), so the report can show the winner's drop and the promotion gate can judge on data the
choice never saw.

The split is seeded and stratified by query class: in each class the labelled queries are ordered by a hash of
``(seed, query id)`` and the first ones held out, the counts rounded by largest remainder so the total is
``round(holdout * labelled)``. Ordering by hash rather than shuffling makes the split independent of file order and
keeps most queries on their side when questions are added. Unlabelled queries stay in the tuning set (they are counted there, never scored).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from ragbench.core.errors import DatasetError
from ragbench.core.hashing import stable_hash
from ragbench.core.measure_keys import measure_key

HELDOUT_PREFIX = "heldout/"


def heldout_key(measure: str) -> str:
    """The stored key of ``measure`` on the held-out set: ``ndcg@10`` -> ``heldout_ndcg_at_10`` (idempotent)."""
    key = measure_key(measure)
    return key if key.startswith(measure_key(HELDOUT_PREFIX)) else measure_key(HELDOUT_PREFIX + key)


def spec_holdout(spec: dict) -> tuple[float, int] | None:
    """``(share, seed)`` of a sweep's stored spec (``sweeps.spec_json``: ``dataset.holdout``, ``dataset.seed``), or
    None when the sweep had no held-out set (``holdout`` is dumped only when set)."""
    dataset = (spec or {}).get("dataset") or {}
    share = dataset.get("holdout")
    return (float(share), int(dataset.get("seed") or 0)) if share else None


@dataclass(frozen=True)
class HoldoutSplit:
    """Query ids on each side (``tuning`` includes the unlabelled queries)."""

    tuning: frozenset[str]
    heldout: frozenset[str]
    fraction: float
    seed: int
    n_labelled: int

    def describe(self) -> str:
        """One line for logs: the sizes of both sides."""
        return (f"holdout {self.fraction:g} (seed {self.seed}): {self.n_labelled - len(self.heldout)} labelled "
                f"tuning queries, {len(self.heldout)} held out")


def holdout_split(queries: pl.DataFrame, qrels: pl.DataFrame, fraction: float, seed: int = 0) -> HoldoutSplit:
    """Split ``queries`` into tuning and held-out ids (see the module docstring).

    Raises :class:`DatasetError` when either side would have no labelled query.
    """
    if not 0 < fraction < 1:
        raise DatasetError(f"holdout must lie strictly between 0 and 1, got {fraction}")
    labelled = set(qrels.filter(pl.col("relevance") > 0)["query_id"].to_list())
    by_class: dict[str, list[str]] = {}
    for qid, cls in queries.select("query_id", "query_class").iter_rows():
        if qid in labelled:
            by_class.setdefault(cls or "", []).append(qid)
    n = sum(len(v) for v in by_class.values())
    total = round(fraction * n)
    if total < 1 or total >= n:
        raise DatasetError(f"holdout {fraction:g} of {n} labelled queries leaves "
                           f"{'none held out' if total < 1 else 'none to tune on'}; label more questions or change "
                           "holdout")
    exact = {c: fraction * len(v) for c, v in by_class.items()}
    quota = {c: math.floor(x) for c, x in exact.items()}
    for c in sorted(exact, key=lambda c: (-(exact[c] - quota[c]), c))[: total - sum(quota.values())]:
        quota[c] += 1
    heldout: set[str] = set()
    for c, ids in by_class.items():
        heldout.update(sorted(ids, key=lambda q: (stable_hash([seed, q]), q))[: quota[c]])
    return HoldoutSplit(frozenset(queries["query_id"].to_list()) - heldout, frozenset(heldout), fraction, seed, n)
