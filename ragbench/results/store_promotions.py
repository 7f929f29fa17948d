"""The ``promotions`` table of the results file: what went to production, when, on what evidence, and rollbacks.

A :class:`Promotion` is one row. At most one row is ``active`` (the live one): :meth:`PromotionsTable.
record_promotion` deactivates the previous one in the same transaction, :meth:`PromotionsTable.restore_promotion`
marks the live one rolled back and reactivates an earlier one. The gate and the aliases around it live in
:mod:`ragbench.promotion`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import polars as pl

#: the MLflow registered model a promotion goes to unless told otherwise (and that of rows stored before the
#: ``model_name`` column)
DEFAULT_MODEL_NAME = "ragbench-retriever"


@dataclass(frozen=True)
class Promotion:
    """One row of ``promotions``: the config (``spec``) of ``sweep_id`` promoted on ``dataset_fingerprint`` with its
    ``primary_measure`` value and the gate's ``p_value`` and ``evidence`` (``forced`` past the gate with a
    ``reason``), the MLflow model version and the Qdrant collection its aliases point at."""

    promoted_at: datetime
    sweep_id: str
    config_id: str
    name: str
    spec: dict
    dataset_fingerprint: str
    primary_measure: str
    primary_value: float
    p_value: float | None
    forced: bool
    reason: str | None
    who: str
    mlflow_model_version: str | None
    collection: str | None
    active: bool
    rolled_back_at: datetime | None = None
    model_name: str = DEFAULT_MODEL_NAME
    evidence: str = ""

    @property
    def label(self) -> str:
        """The promoted config's name for people (:func:`ragbench.config.labels.config_label`)."""
        from ragbench.config.labels import config_label

        return config_label(self.spec, self.name)


class PromotionsTable:
    """The ``promotions`` methods of :class:`ragbench.results.store.ResultStore` (they use its ``query`` and
    ``transaction``)."""

    def promotions(self, *, active: bool | None = None, rolled_back: bool | None = None,
                   before: datetime | None = None) -> pl.DataFrame:
        """Rows of ``promotions`` (every column), newest first.

        Filters: ``active`` (the live one, or the others), ``rolled_back`` (``rolled_back_at`` set or not),
        ``before`` (promoted strictly earlier).
        """
        where, params = [], []
        if active is not None:
            where.append("active" if active else "NOT active")
        if rolled_back is not None:
            where.append("rolled_back_at IS NOT NULL" if rolled_back else "rolled_back_at IS NULL")
        if before is not None:
            where.append("promoted_at < ?")
            params.append(before)
        return self.query("SELECT * FROM promotions" + (" WHERE " + " AND ".join(where) if where else "")
                          + " ORDER BY promoted_at DESC", params)

    def promotions_state(self) -> str:
        """A hash of every promotion's identity and state (when, which config, live or not, rolled back when): a
        promotion or a rollback changes it."""
        from ragbench.core.hashing import stable_hash

        rows = self.promotions().select("promoted_at", "config_id", "active", "rolled_back_at").rows()
        return stable_hash([[str(v) for v in row] for row in rows])

    def promotion_records(self, *, active: bool | None = None, rolled_back: bool | None = None,
                          before: datetime | None = None) -> list[Promotion]:
        """:meth:`promotions` (same filters, newest first) as :class:`Promotion` records."""
        out = []
        for r in self.promotions(active=active, rolled_back=rolled_back, before=before).iter_rows(named=True):
            r = dict(r)
            r["spec"] = json.loads(r.pop("spec_json") or "{}")
            r["evidence"] = r.get("evidence") or ""
            r["model_name"] = r.get("model_name") or DEFAULT_MODEL_NAME
            out.append(Promotion(**r))
        return out

    def record_promotion(self, promotion: Promotion) -> None:
        """Insert ``promotion`` as the only active one (the previous live one is deactivated), in one transaction;
        its ``active`` and ``rolled_back_at`` are not read (a new promotion is live and not rolled back)."""
        p = promotion
        with self.transaction() as con:
            con.execute("UPDATE promotions SET active = false WHERE active")
            con.execute("INSERT INTO promotions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true, NULL, ?, "
                        "?)",
                        [p.promoted_at, p.sweep_id, p.config_id, p.name, json.dumps(p.spec, sort_keys=True),
                         p.dataset_fingerprint, p.primary_measure, p.primary_value, p.p_value, p.forced, p.reason,
                         p.who, p.mlflow_model_version, p.collection, p.model_name, p.evidence])

    def restore_promotion(self, promoted_at: datetime, config_id: str, rolled_back_at: datetime) -> None:
        """Roll back: mark the live promotion rolled back at ``rolled_back_at`` and make the promotion
        ``(promoted_at, config_id)`` active again, in one transaction."""
        with self.transaction() as con:
            con.execute("UPDATE promotions SET active = false, rolled_back_at = ? WHERE active",
                        [rolled_back_at])
            con.execute("UPDATE promotions SET active = true WHERE promoted_at = ? AND config_id = ?",
                        [promoted_at, config_id])
