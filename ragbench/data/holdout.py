"""The held-out split (``dataset.holdout``): labelled queries set aside so the winner is measured on questions the
choice was not made on.

The best of 40 configs on 50 questions is optimistic (the winner's curse). The sweep ranks configs on the tuning
queries and measures every config on the held-out ones too, stored as ``heldout/<measure>``
(:data:`HELDOUT_PREFIX`), so the report can show the winner's drop and the promotion gate can judge on data the
choice never saw.

The split is seeded and stratified by query class: in each class the labelled queries are ordered by a hash of
``(seed, query id)`` and the first ones held out, the counts rounded by largest remainder so the total is
``round(holdout * labelled)``. Ordering by hash rather than shuffling makes the split independent of file order and
keeps most queries on their side when questions are added. Unlabelled queries stay in the tuning set (they are
counted there, never scored).

Repeated splits (``dataset.holdout: {fraction: 0.3, repeats: 20}``): one split is a draw, and with 30-100 questions
another draw can reorder the top. Repeat ``r`` orders each class by a hash of ``(seed, "repeat", r, query id)``
(repeat 0 by ``(seed, query id)``: the split the sweep stores), so the repeats are seeded, independent of file
order and of each other. The sweep still evaluates every query once and stores the tuning and held-out values of
repeat 0; the other repeats are computed by the report from those stored per-query values
(:func:`ragbench.reporting.heldout.holdout_repeats`), nothing is retrieved or scored again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl
from pydantic import BaseModel, ConfigDict, Field

from ragbench.core.errors import DatasetError
from ragbench.core.hashing import stable_hash
from ragbench.core.measure_keys import measure_key

HELDOUT_PREFIX = "heldout/"


def heldout_key(measure: str) -> str:
    """The stored key of ``measure`` on the held-out set: ``ndcg@10`` -> ``heldout_ndcg_at_10`` (idempotent)."""
    key = measure_key(measure)
    return key if key.startswith(measure_key(HELDOUT_PREFIX)) else measure_key(HELDOUT_PREFIX + key)


class HoldoutOptions(BaseModel):
    """The mapping form of ``dataset.holdout``: ``{fraction: 0.3, repeats: 20}``. ``repeats: 1`` is the plain float
    form (one split; the dataset spec stores it as the float, so keys do not change)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fraction: float = Field(gt=0, lt=1, description="the share of the labelled queries held out in each split")
    repeats: int = Field(1, ge=1, le=1000, description="seeded stratified splits the report draws from the stored "
                         "per-query values (repeat 0 is the split the sweep ranks on): how often each config wins "
                         "on the tuning part, and the held-out score of each repeat's winner")


def holdout_fraction(holdout: float | HoldoutOptions | dict | None) -> float | None:
    """The held-out share of ``dataset.holdout`` in either form (None: no held-out set)."""
    if holdout is None:
        return None
    if isinstance(holdout, HoldoutOptions):
        return holdout.fraction
    if isinstance(holdout, dict):
        return float(holdout["fraction"])
    return float(holdout)


def holdout_repeats(holdout: float | HoldoutOptions | dict | None) -> int:
    """How many splits ``dataset.holdout`` asks for: 1 for the plain float form (and for none)."""
    if isinstance(holdout, HoldoutOptions):
        return holdout.repeats
    if isinstance(holdout, dict):
        return int(holdout.get("repeats") or 1)
    return 1


def spec_holdout(spec: dict) -> tuple[float, int] | None:
    """``(share, seed)`` of a sweep's stored spec (``sweeps.spec_json``: ``dataset.holdout`` in either form,
    ``dataset.seed``), or None when the sweep had no held-out set (``holdout`` is dumped only when set)."""
    dataset = (spec or {}).get("dataset") or {}
    share = holdout_fraction(dataset.get("holdout"))
    return (share, int(dataset.get("seed") or 0)) if share else None


def spec_repeats(spec: dict) -> int:
    """The ``repeats`` of a sweep's stored ``dataset.holdout`` (1 for the float form or no held-out set)."""
    return holdout_repeats(((spec or {}).get("dataset") or {}).get("holdout"))


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
    labelled = set(qrels.filter(pl.col("relevance") > 0)["query_id"].to_list())
    pairs = [(qid, cls) for qid, cls in queries.select("query_id", "query_class").iter_rows() if qid in labelled]
    heldout = stratified_heldout(pairs, fraction, seed)
    return HoldoutSplit(frozenset(queries["query_id"].to_list()) - heldout, frozenset(heldout), fraction, seed,
                        len(pairs))


def stratified_heldout(labelled: Iterable[tuple[str, str | None]], fraction: float, seed: int = 0,
                       repeat: int = 0) -> frozenset[str]:
    """The held-out ids among ``labelled`` ``(query id, class)`` pairs: per class the first ``quota`` ids in the
    order of ``stable_hash([seed, id])`` (repeat 0) or ``stable_hash([seed, "repeat", repeat, id])``, the quotas
    ``fraction * class size`` rounded by largest remainder (ties to the first class by name) so they sum to
    ``round(fraction * n)``.

    Raises :class:`DatasetError` when either side would have no query.
    """
    if not 0 < fraction < 1:
        raise DatasetError(f"holdout must lie strictly between 0 and 1, got {fraction}")
    by_class: dict[str, list[str]] = {}
    for qid, cls in labelled:
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
    salt = [seed] if repeat == 0 else [seed, "repeat", repeat]
    heldout: set[str] = set()
    for c, ids in by_class.items():
        heldout.update(sorted(ids, key=lambda q: (stable_hash([*salt, q]), q))[: quota[c]])
    return frozenset(heldout)
