"""Production: put a configuration into production only on evidence, and be able to take it back.

:func:`promote` asks the promotion gate (:func:`ragbench.promotion.promotion_gate.check_promotion_gate`; or
``force`` with a recorded reason), then

1. logs the config as an MLflow model, registers a new version of ``ragbench-retriever`` and moves its alias
   ``production`` there (:mod:`ragbench.promotion.registry`);
2. points the Qdrant collection alias ``production`` at the config's collection
   (:mod:`ragbench.promotion.collection_alias`; a BM25 config has none: the alias is removed);
3. writes a row into the DuckDB table ``promotions`` (:mod:`ragbench.results.store_promotions`) and marks it the
   only ``active`` one.

If step 2 or 3 fails, the earlier steps are reverted (aliases moved back). :func:`rollback` deactivates the live
promotion (``rolled_back_at`` set) and reactivates the one before it, moving both aliases back.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass, replace
from datetime import datetime, timezone

from ragbench.core.errors import RagbenchError
from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.promotion.collection_alias import ALIAS, collection_alias, set_collection_alias
from ragbench.promotion.promotion_gate import PromotionRefused, check_promotion_gate
from ragbench.promotion.registry import MODEL_NAME, describe_version, register_model, set_model_alias
from ragbench.results.completion import sweep_completion
from ragbench.results.lookup import resolve_config_id, resolve_sweep_id
from ragbench.results.store import ResultStore
from ragbench.results.store_promotions import Promotion
from ragbench.results.tracking import check_mlflow_store

__all__ = ["Promotion", "PromotionRefused", "PromotionRequest", "production", "history", "promote", "rollback"]


@dataclass(frozen=True)
class PromotionRequest:
    """What to promote, and on whose word.

    Attributes
    ----------
    sweep : str
        A sweep id, a unique prefix, or ``latest``.
    config : str
        Config id, unique id prefix, or exact name within the sweep.
    primary : str, optional
        Measure the gate compares (default: the sweep's primary measure).
    alpha : float
        Significance level of the gate.
    force, reason : bool, str
        Promote despite the gate; ``reason`` is required and recorded.
    who : str, optional
        Recorded as the promoter (default: the OS user).
    model_name : str
        The MLflow registered model the promoted version belongs to.
    """

    sweep: str
    config: str
    primary: str | None = None
    alpha: float = 0.05
    force: bool = False
    reason: str | None = None
    who: str | None = None
    model_name: str = MODEL_NAME


def production(store: ResultStore) -> Promotion | None:
    """The live promotion, or None."""
    rows = store.promotion_records(active=True)
    return rows[0] if rows else None


def history(store: ResultStore) -> list[Promotion]:
    """Every promotion, newest first (rolled-back ones included, with ``rolled_back_at``)."""
    return store.promotion_records()


def promote(store: ResultStore, request: PromotionRequest, *, settings: Settings | None = None) -> Promotion:
    """Promote a config of a sweep to production if the gate allows it (or ``request.force`` with a ``reason``).

    ``settings``: where the MLflow store, collections and cache are (default: the embedded stores, with the
    store's folder as home). Returns the new live promotion.

    Raises
    ------
    PromotionRefused
        The gate refused; the message has the evidence.
    """
    from ragbench.promotion.serving import config_collection, model_payload

    r = request
    if r.force and not (r.reason and r.reason.strip()):
        raise RagbenchError("--force needs --reason TEXT: say why the gate is overridden (it is recorded)")
    settings = settings or Settings(home=store.path.parent)
    sweep_id = resolve_sweep_id(store, r.sweep)
    config_id = resolve_config_id(store, sweep_id, r.config, primary=r.primary)
    _refuse_unfinished(store, sweep_id, r)
    check_mlflow_store(settings)  # a damaged mlflow.db: one line naming it, before anything is registered
    decision = check_promotion_gate(store, sweep_id, config_id, primary=r.primary, alpha=r.alpha)
    if not decision.allowed and not r.force:
        raise PromotionRefused(f"promotion refused: {decision.evidence}. To promote anyway: --force --reason TEXT")
    if not decision.allowed:
        log.warning("gate overridden (%s): %s", r.reason, decision.evidence)

    sweep = store.sweep(sweep_id)
    row = store.config(sweep_id, config_id)
    spec = json.loads(row["spec_json"])
    fp = sweep["dataset_fingerprint"]
    collection = config_collection(spec, fp)
    dataset_spec = json.loads(sweep["spec_json"]).get("dataset")
    who = r.who or _user(settings)
    previous = production(store)

    payload = model_payload(spec, fp, settings.home, dataset_spec, name=row["name"], sweep_id=sweep_id,
                            config_id=config_id)
    version = register_model(settings, payload, decision, model_name=r.model_name, tags={
        "ragbench.kind": "promotion", "ragbench.sweep_id": sweep_id, "ragbench.config_id": config_id,
        "ragbench.dataset_fingerprint": fp, "ragbench.forced": r.force, "ragbench.who": who,
        "ragbench.reason": r.reason or "", "ragbench.evidence": decision.evidence})
    record = Promotion(
        promoted_at=datetime.now(timezone.utc), sweep_id=sweep_id, config_id=config_id, name=row["name"], spec=spec,
        dataset_fingerprint=fp, primary_measure=decision.primary, primary_value=decision.candidate_mean,
        p_value=decision.p_value, forced=r.force and not decision.allowed, reason=r.reason, who=who,
        mlflow_model_version=version, collection=collection, active=True, model_name=r.model_name,
        evidence=decision.evidence)
    try:  # the registry is for browsing: a version without its description is still the promoted model
        describe_version(settings, record, source_run=row.get("mlflow_run_id"), previous=previous)
    except Exception as e:
        log.warning("MLflow: could not describe %s version %s: %s", r.model_name, version, e)
    _go_live(store, settings, record, previous)
    log.info("promoted %s (sweep %s) as %s version %s; Qdrant alias %s -> %s", record.label, sweep_id, r.model_name,
             version, ALIAS, collection or "(none: BM25)")
    return production(store)


def _refuse_unfinished(store: ResultStore, sweep_id: str, r: PromotionRequest) -> None:
    """Refuse a config of a sweep that did not finish (its best may be among the configs never evaluated), unless
    ``force`` with a reason; a forced one is logged."""
    done = sweep_completion(store, sweep_id)
    if done is None or done.finished:
        return
    if not r.force:
        raise PromotionRefused(f"promotion refused: sweep {sweep_id} is {done.text} ({done.why}); its best config "
                               "may be one it never evaluated. To promote anyway: --force --reason TEXT")
    log.warning("promoting from sweep %s, %s (%s): %s", sweep_id, done.text, done.why, r.reason)


def _go_live(store: ResultStore, settings: Settings, record: Promotion, previous: Promotion | None) -> None:
    """Move both aliases to ``record`` and store it as the live promotion; on any failure the aliases go back to
    where they were (production is the previous record, or nothing)."""
    prev_target = collection_alias(settings)
    set_model_alias(settings, record.model_name, record.mlflow_model_version)
    try:
        set_collection_alias(settings, record.collection)
        store.record_promotion(replace(record, promoted_at=datetime.now(timezone.utc)))
    except BaseException:
        set_model_alias(settings, record.model_name, previous.mlflow_model_version if previous else None)
        try:
            set_collection_alias(settings, prev_target)
        except Exception as e:  # pragma: no cover - best effort
            log.error("could not restore the Qdrant alias to %s: %s", prev_target, e)
        raise


def rollback(store: ResultStore, *, settings: Settings | None = None) -> Promotion:
    """Restore the promotion before the live one (MLflow alias, Qdrant alias, DuckDB record); returns it.

    Raises
    ------
    PromotionRefused
        Nothing is in production, or the live promotion is the first one (nothing to go back to).
    """
    settings = settings or Settings(home=store.path.parent)
    live = production(store)
    if live is None:
        raise PromotionRefused("nothing is in production: no promotion to roll back")
    earlier = store.promotion_records(active=False, rolled_back=False, before=live.promoted_at)
    if not earlier:
        raise PromotionRefused(f"no previous promotion to roll back to: {live.label} (promoted "
                               f"{live.promoted_at:%Y-%m-%d %H:%M}) is the first one still standing")
    prev = earlier[0]
    check_mlflow_store(settings)
    set_model_alias(settings, prev.model_name, prev.mlflow_model_version)
    try:
        set_collection_alias(settings, prev.collection)
        store.restore_promotion(prev.promoted_at, prev.config_id, rolled_back_at=datetime.now(timezone.utc))
    except BaseException:
        set_model_alias(settings, live.model_name, live.mlflow_model_version)
        set_collection_alias(settings, live.collection)
        raise
    log.info("rolled back %s; production is %s again (%s version %s)", live.label, prev.label, prev.model_name,
             prev.mlflow_model_version)
    return production(store)


def _user(settings: Settings) -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return settings.user
