"""Promotion: put a configuration into production only on evidence, and be able to take it back.

The gate (:func:`check_promotion_gate`)
-----------------------------
A candidate config of a finished sweep is promoted only if

* **there is a production config**: the candidate beats it on the *same dataset fingerprint* on the primary measure
  (default: the sweep's ``metrics.primary``): the paired randomization test (:func:`ragbench.evaluation.paired_tests.
  paired_randomization_test`, two-sided, 10 000 sign flips) over the queries both have a value for must give
  ``p < alpha`` **and** a positive mean difference. Production's per-query values come from the candidate's own
  sweep if it evaluated the production config, otherwise from the newest finished sweep on the same fingerprint
  that did (paired by ``query_id``). If production was never evaluated on that data, the gate refuses: there is no
  evidence. The paired t-test p-value is reported alongside.

  **When the candidate's sweep has a held-out set** (``dataset.holdout`` in its stored spec), the pairs are its
  held-out queries only: the candidate's ``heldout_<primary>`` values against production's values on the same
  queries (production's ``heldout_<primary>`` or, from a sweep with another split or none, its ``<primary>``: a
  per-query value does not depend on the split). The tuning queries chose the candidate, so its lead there is
  optimistic (the winner's curse); the evidence says the gate used the held-out set and how many queries.
* **there is none yet** (first promotion): the candidate is the best config of its sweep or tied with it
  (:func:`ragbench.evaluation.comparison.compare_configs`, Holm-adjusted p >= alpha against the best).
* or ``force=True`` with a non-empty ``reason`` (recorded with the promotion).

What a promotion does
---------------------
1. logs an ``mlflow.pyfunc`` model (:class:`ragbench.promotion.serving.RetrieverModel`, the config JSON as an artifact) in
   experiment ``ragbench/promotions``, registers it as a new version of ``ragbench-retriever`` and moves the alias
   ``production`` to it, so ``mlflow.pyfunc.load_model("models:/ragbench-retriever@production")`` answers queries;
2. points the Qdrant collection alias ``production`` at the config's collection: in one
   ``update_collection_aliases`` request (delete + create) on a Qdrant server, or, for the embedded Edge engine
   (which has no aliases), by rewriting ``<home>/qdrant-edge/aliases.json`` atomically (``os.replace``). A BM25
   config has no collection: the alias is removed;
3. writes a row into the DuckDB table ``promotions`` (its schema and statements live in
   :class:`ragbench.results.store.ResultStore`) and marks it the only ``active`` one.

If step 2 or 3 fails, the earlier steps are reverted (aliases moved back). :func:`rollback` deactivates the live
promotion (``rolled_back_at`` set) and reactivates the one before it, moving both aliases back.
"""

from __future__ import annotations

import contextlib
import getpass
import io
import json
import math
import os
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import polars as pl

from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import MeasureMap, measure_key
from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.data.holdout import heldout_key, spec_holdout
from ragbench.evaluation.metrics import document_cutoff, unreached_depth
from ragbench.evaluation.comparison import compare_configs
from ragbench.evaluation.paired_tests import paired_randomization_test, paired_t_test
from ragbench.results.lookup import resolve_config_id, resolve_sweep_id, sweep_primary
from ragbench.results.store import ResultStore

MODEL_NAME = "ragbench-retriever"
ALIAS = "production"
PROMOTIONS_EXPERIMENT = "ragbench/promotions"


class PromotionRefused(RagbenchError):
    """The gate refused: the message carries the evidence (means, paired queries, p-values) and how to override."""


@dataclass(frozen=True)
class Promotion:
    """One row of ``promotions``."""

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
    model_name: str = MODEL_NAME
    evidence: str = ""


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict and the numbers behind it.

    ``p_value`` / ``t_p_value`` / ``mean_diff`` / ``n`` describe candidate vs production (or, for a first
    promotion, the Holm-adjusted p-value against the sweep's best); ``evidence`` says it in words.
    """

    allowed: bool
    evidence: str
    primary: str
    candidate_mean: float
    baseline: str | None = None  # production config name (or the sweep's best, for a first promotion)
    baseline_mean: float | None = None
    mean_diff: float | None = None
    n: int | None = None
    p_value: float | None = None
    t_p_value: float | None = None


# ---------------------------------------------------------------- the record
def _rows(df: pl.DataFrame) -> list[Promotion]:
    """Rows of :meth:`ResultStore.promotions` as :class:`Promotion` records."""
    out = []
    for r in df.iter_rows(named=True):
        r = dict(r)
        r["spec"] = json.loads(r.pop("spec_json") or "{}")
        r["evidence"] = r.get("evidence") or ""
        r["model_name"] = r.get("model_name") or MODEL_NAME
        out.append(Promotion(**r))
    return out


def production(store: ResultStore) -> Promotion | None:
    """The live promotion, or None."""
    rows = _rows(store.promotions(active=True))
    return rows[0] if rows else None


def history(store: ResultStore) -> list[Promotion]:
    """Every promotion, newest first (rolled-back ones included, with ``rolled_back_at``)."""
    return _rows(store.promotions())


# ---------------------------------------------------------------- the gate
def _fmt_p(p: float | None) -> str:
    return "n/a" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.4g}"


def _refuse_shallow(store: ResultStore, sweep_id: str, config_id: str, name: str, primary: str) -> None:
    """Refuse a gate on a document measure deeper than the documents the config's run reached
    (:func:`ragbench.evaluation.metrics.unreached_depth`): its value is not comparable."""
    depth = unreached_depth(MeasureMap(store.config_means(sweep_id, config_id)), primary)
    if depth is not None:
        raise PromotionRefused(f"{name} cannot be gated on {primary}: its run named only {depth} distinct documents "
                               f"for some query of sweep {sweep_id}, fewer than the cutoff; rerun with "
                               f"retrievers[].documents: {document_cutoff(primary)} or gate on a shallower measure")


def check_promotion_gate(store: ResultStore, sweep_id: str, config_id: str, *, primary: str | None = None,
               alpha: float = 0.05, n_resamples: int = 10_000, seed: int = 0) -> GateDecision:
    """Decide whether ``config_id`` of ``sweep_id`` may replace what is in production (see the module docstring)."""
    sweep = store.sweep(sweep_id)
    if sweep is None:
        raise RagbenchError(f"sweep {sweep_id!r} not found in {store.path}")
    primary = measure_key(primary) if primary else sweep_primary(store, sweep_id)
    board = store.leaderboard(sweep_id)
    names = dict(board.select("config_id", "name").iter_rows())
    cfg = board.filter(pl.col("config_id") == config_id)
    if cfg.is_empty():
        raise RagbenchError(f"config {config_id} is not part of sweep {sweep_id}")
    name, status, error = cfg.select("name", "status", "error").row(0)
    if status != "finished":
        raise PromotionRefused(f"config {name} did not finish in sweep {sweep_id} ({error}); nothing to promote")
    # mean of the per-query values, as the paired tests see them (and as primary_value was always recorded)
    cand = store.measure_values(sweep_id, config_id, primary)
    if cand.is_empty():
        raise RagbenchError(f"measure {primary!r} was not computed for config {name} in sweep {sweep_id}")
    _refuse_shallow(store, sweep_id, config_id, name, primary)
    cand_mean = float(np.nanmean(cand["value"].to_numpy())) if cand["value"].is_not_nan().any() else math.nan
    fp = sweep["dataset_fingerprint"]
    live = production(store)

    if live is None:
        shallow = [c for c, (mets, _, _) in store.stored_config_metrics(sweep_id).items()
                   if unreached_depth(MeasureMap(mets), primary) is not None]  # not comparable on primary
        pq = store.per_query_values(sweep_id, [primary]).filter(~pl.col("config_id").is_in(shallow))
        comp = compare_configs(pq, primary, alpha=alpha, n_resamples=n_resamples, seed=seed)
        best = comp.config(comp.best)
        best_name = names[comp.best]
        if config_id == comp.best:
            return GateDecision(True, f"first promotion: {name} is the best config of sweep {sweep_id} on {primary} "
                                f"({cand_mean:.4f})", primary, cand_mean, best_name, best.mean)
        pair = comp.pair(config_id, comp.best)
        if config_id in comp.tied_with_best:
            return GateDecision(True, f"first promotion: {name} ({primary} {cand_mean:.4f}) is tied with the best "
                                f"config {best_name} ({best.mean:.4f}): Holm-adjusted p = {_fmt_p(pair.p_adjusted)}"
                                f" >= {alpha:g} over {pair.n} paired queries", primary, cand_mean, best_name,
                                best.mean, pair.mean_diff, pair.n, pair.p_adjusted)
        return GateDecision(False, f"first promotion needs the best config of the sweep or one tied with it: {name} "
                            f"has {primary} {cand_mean:.4f}, significantly below the best {best_name} "
                            f"({best.mean:.4f}); mean difference {pair.mean_diff:+.4f} over {pair.n} paired queries, "
                            f"Holm-adjusted p-value = {_fmt_p(pair.p_adjusted)} < {alpha:g}", primary, cand_mean,
                            best_name, best.mean, pair.mean_diff, pair.n, pair.p_adjusted)

    if live.config_id == config_id and live.dataset_fingerprint == fp:
        return GateDecision(False, f"{name} is already in production (promoted {live.promoted_at:%Y-%m-%d %H:%M} "
                            f"from sweep {live.sweep_id})", primary, cand_mean, live.name)
    # production's per-query values on this very data: from this sweep if it ran it, else the newest sweep that did
    base_sweep = store.latest_sweep_with_config(live.config_id, fp, prefer=sweep_id)
    if base_sweep is None:
        return GateDecision(False, f"no evidence: the production config {live.name} ({live.config_id}) was never "
                            f"evaluated on dataset {fp} of sweep {sweep_id} (it was promoted on "
                            f"{live.dataset_fingerprint}); run a sweep on this dataset that includes it",
                            primary, cand_mean, live.name)
    _refuse_shallow(store, base_sweep, live.config_id, f"production {live.name}", primary)
    split = spec_holdout(store.sweep_spec(sweep_id))
    gated_on, held_note = primary, ""
    if split is not None:  # judge on the queries the choice never saw
        gated_on = heldout_key(primary)
        cand = store.measure_values(sweep_id, config_id, gated_on)
        if cand.is_empty():
            raise RagbenchError(f"sweep {sweep_id} has a held-out set (dataset.holdout {split[0]:g}) but config "
                                f"{name} has no {gated_on} values; re-run the sweep")
        cand_mean = float(np.nanmean(cand["value"].to_numpy())) if cand["value"].is_not_nan().any() else math.nan
        base = pl.concat([store.measure_values(base_sweep, live.config_id, gated_on),
                          store.measure_values(base_sweep, live.config_id, primary)]).unique("query_id", keep="first")
    else:
        base = store.measure_values(base_sweep, live.config_id, primary)
    paired = cand.join(base, on="query_id", how="inner", suffix="_prod").sort("query_id")
    a, b = paired["value"].to_numpy(), paired["value_prod"].to_numpy()
    rand = paired_randomization_test(a, b, n_resamples=n_resamples, seed=seed)
    t = paired_t_test(a, b)
    keep = ~(np.isnan(a) | np.isnan(b))
    base_mean = float(b[keep].mean()) if keep.any() else math.nan
    cand_paired = float(a[keep].mean()) if keep.any() else math.nan
    where = "this sweep" if base_sweep == sweep_id else f"sweep {base_sweep}"
    if split is not None:
        held_note = (f"gated on the held-out set: {rand.n} queries never used to rank the configs (dataset.holdout "
                     f"{split[0]:g}, seed {split[1]}); ")
    facts = (f"{held_note}{name} vs production {live.name} on {gated_on} over {rand.n} paired queries of dataset {fp} "
             f"(production values from {where}): {cand_paired:.4f} vs {base_mean:.4f}, mean difference "
             f"{rand.mean_diff:+.4f}; paired randomization p-value = {_fmt_p(rand.p_value)} (t-test p-value = "
             f"{_fmt_p(t.p_value)})")
    ok = rand.n > 0 and rand.mean_diff > 0 and rand.p_value < alpha
    verdict = (f"significantly better (p < {alpha:g})" if ok else
               f"not significantly better: promotion needs a positive difference with p < {alpha:g}")
    return GateDecision(ok, f"{facts}: {verdict}", gated_on, cand_mean, live.name, base_mean, rand.mean_diff,
                        rand.n, rand.p_value, t.p_value)


# ---------------------------------------------------------------- aliases
def edge_aliases_path(home: Path) -> Path:
    return Path(home) / "qdrant-edge" / "aliases.json"


def collection_alias(settings: Settings, alias: str = ALIAS) -> str | None:
    """The collection ``alias`` points at (on the Qdrant server when the settings name one, else Edge)."""
    if settings.qdrant_url:
        from ragbench.index.qdrant import ClientIndex

        idx = ClientIndex(settings.qdrant_url, settings.qdrant_api_key)
        try:
            return next((a.collection_name for a in idx.client.get_aliases().aliases if a.alias_name == alias),
                        None)
        finally:
            idx.close()
    path = edge_aliases_path(settings.home)
    try:
        return json.loads(path.read_text()).get(alias)
    except FileNotFoundError:
        return None


def set_collection_alias(settings: Settings, collection: str | None, alias: str = ALIAS) -> None:
    """Point ``alias`` at ``collection`` atomically (None removes the alias)."""
    if settings.qdrant_url:
        from qdrant_client import models

        from ragbench.index.qdrant import ClientIndex

        idx = ClientIndex(settings.qdrant_url, settings.qdrant_api_key)
        try:
            ops = []
            if any(a.alias_name == alias for a in idx.client.get_aliases().aliases):
                ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
            if collection:
                ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(
                    collection_name=collection, alias_name=alias)))
            if ops:  # one request: readers see the old or the new target, never none
                idx.client.update_collection_aliases(change_aliases_operations=ops)
        finally:
            idx.close()
        return
    path = edge_aliases_path(settings.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        aliases = json.loads(path.read_text())
    except FileNotFoundError:
        aliases = {}
    if collection:
        if not (path.parent / collection).is_dir():
            raise RagbenchError(f"Qdrant Edge collection {collection} does not exist under {path.parent}")
        aliases[alias] = collection
    else:
        aliases.pop(alias, None)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".aliases.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(aliases, f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------- MLflow
@contextmanager
def _mlflow_at(uri: str):
    """Point the fluent MLflow API (which ``pyfunc.log_model`` uses) at ``uri``.

    It is left pointing there afterwards: restoring MLflow's implicit default made later explicit-URI clients read
    the default store in MLflow 3.17 (registered models then appear missing).
    """
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    yield mlflow


def _register_model(settings: Settings, payload: dict, decision: GateDecision | None, *, model_name: str, tags: dict) -> str:
    """Log the pyfunc retriever and register it as a new version of ``model_name``; returns the version."""
    from mlflow.tracking import MlflowClient

    from ragbench.promotion.serving import CONFIG_ARTIFACT, RetrieverModel
    from ragbench.results.tracking import default_tracking_uri

    uri = default_tracking_uri(settings)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    exp = client.get_experiment_by_name(PROMOTIONS_EXPERIMENT)
    exp_id = exp.experiment_id if exp else client.create_experiment(
        PROMOTIONS_EXPERIMENT, artifact_location=(Path(settings.home) / "mlartifacts").resolve().as_uri()
        if uri.startswith("sqlite") else None)
    with tempfile.TemporaryDirectory() as tmp, _mlflow_at(uri) as mlflow:
        cfg_path = Path(tmp) / f"{CONFIG_ARTIFACT}.json"
        cfg_path.write_text(json.dumps(payload, indent=2, sort_keys=True))
        with mlflow.start_run(experiment_id=exp_id, run_name=f"promote {payload['name']}"[:250],
                              tags={k: str(v)[:5000] for k, v in tags.items()}) as run:
            metrics = {"primary_value": decision.candidate_mean} if decision else {}
            if decision and decision.p_value is not None and not math.isnan(decision.p_value):
                metrics["p_value"] = decision.p_value
            mlflow.log_metrics({k: v for k, v in metrics.items() if v == v})
            # MLflow prints "Successfully registered model ..." to stderr itself and warns that a Python object is
            # pickled (the model is ours): ragbench says what happened instead
            with contextlib.redirect_stderr(io.StringIO()), _without_pickle_warning():
                info = mlflow.pyfunc.log_model(
                    name="retriever", python_model=RetrieverModel(), artifacts={CONFIG_ARTIFACT: str(cfg_path)},
                    registered_model_name=model_name,
                    pip_requirements=["mlflow", "ragbench"])  # explicit: inferring them would load the model
    log.info("MLflow: promotion run %s", run.info.run_id)
    version = info.registered_model_version
    if version is None:  # older MLflow: look the version up by run
        found = client.search_model_versions(f"name = '{model_name}' and run_id = '{run.info.run_id}'")
        version = max(int(v.version) for v in found)
    return str(version)


@contextmanager
def _without_pickle_warning():
    """Drop MLflow's "serialized using CloudPickle" warning while the promoted model is logged."""
    import logging

    class _Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return "CloudPickle" not in record.getMessage()

    logger, drop = logging.getLogger("mlflow.pyfunc"), _Drop()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _describe_version(settings: Settings, model_name: str, version: str, *, sweep_id: str, config_id: str,
                      name: str, spec: dict, fp: str, decision: GateDecision, forced: bool, reason: str | None,
                      who: str, source_run: str | None, previous: Promotion | None) -> None:
    """Give a registered version what it was promoted on: tags (``sweep_id, config_id, config, label,
    dataset_fingerprint, metric, metric_value, p_value, p_value_vs, forced, reason, who, source_run_id,
    previous_version``) and a markdown description linking the config's run in its sweep."""
    from mlflow.tracking import MlflowClient

    from ragbench.config.labels import ConfigLabels
    from ragbench.results.tracking import default_tracking_uri

    uri = default_tracking_uri(settings)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    label = ConfigLabels.from_stored(spec, name).text
    if previous is not None:
        vs = f"production {previous.name} (version {previous.mlflow_model_version})"
    else:
        vs = "the best config of the sweep" if decision.p_value is not None else "none (the sweep's best)"
    tags = {"sweep_id": sweep_id, "config_id": config_id, "config": name, "label": label,
            "dataset_fingerprint": fp, "metric": decision.primary, "metric_value": f"{decision.candidate_mean:.6g}",
            "p_value": _fmt_p(decision.p_value) if decision.p_value is not None else "none", "p_value_vs": vs,
            "forced": str(forced).lower(), "reason": reason or "none", "who": who,
            "source_run_id": source_run or "none",
            "previous_version": previous.mlflow_model_version if previous and previous.mlflow_model_version
            else "none"}
    for key, value in tags.items():
        client.set_model_version_tag(model_name, version, key, str(value)[:5000])
    link = "(not logged to MLflow)"
    if source_run:
        run = client.get_run(source_run)
        link = f"[{source_run}](#/experiments/{run.info.experiment_id}/runs/{source_run})"
    gate = ("**FORCED** past the gate: " + (reason or "") if forced else "passed the promotion gate")
    client.update_model_version(model_name, version, description="\n".join([
        f"**{label}** from sweep `{sweep_id}` (config `{config_id}`), {gate}.", "",
        f"* {decision.primary} = {decision.candidate_mean:.4f} on dataset `{fp}`",
        f"* p-value vs {vs}: {tags['p_value']}",
        f"* evidence: {decision.evidence}",
        f"* promoted by {who}; source run: {link}"]))


def _set_model_alias(settings: Settings, model_name: str, version: str | None, alias: str = ALIAS) -> None:
    from mlflow.tracking import MlflowClient

    from ragbench.results.tracking import default_tracking_uri

    uri = default_tracking_uri(settings)
    client = MlflowClient(tracking_uri=uri, registry_uri=uri)
    if version is None:
        try:
            client.delete_registered_model_alias(model_name, alias)
        except Exception:  # no alias to delete
            pass
    else:
        client.set_registered_model_alias(model_name, alias, str(version))


# ---------------------------------------------------------------- promote / rollback
def promote(store: ResultStore, sweep_id: str, config: str, *, primary: str | None = None, alpha: float = 0.05,
            force: bool = False, reason: str | None = None, who: str | None = None,
            settings: Settings | None = None, model_name: str = MODEL_NAME) -> Promotion:
    """Promote a config of a sweep to production if the gate allows it (or ``force`` with a ``reason``).

    Parameters
    ----------
    sweep_id : str
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
    settings : Settings, optional
        Where the MLflow store, collections and cache are (default: the embedded stores, with the store's folder as home).

    Raises
    ------
    PromotionRefused
        The gate refused; the message has the evidence.
    """
    from ragbench.promotion.serving import config_collection, model_payload

    if force and not (reason and reason.strip()):
        raise RagbenchError("--force needs --reason TEXT: say why the gate is overridden (it is recorded)")
    settings = settings or Settings(home=store.path.parent)
    home = settings.home
    sweep_id = resolve_sweep_id(store, sweep_id)
    config_id = resolve_config_id(store, sweep_id, config, primary=primary)
    decision = check_promotion_gate(store, sweep_id, config_id, primary=primary, alpha=alpha)
    if not decision.allowed and not force:
        raise PromotionRefused(f"promotion refused: {decision.evidence}. To promote anyway: --force --reason TEXT")
    if not decision.allowed:
        log.warning("gate overridden (%s): %s", reason, decision.evidence)

    sweep = store.sweep(sweep_id)
    row = store.config(sweep_id, config_id)
    spec = json.loads(row["spec_json"])
    fp = sweep["dataset_fingerprint"]
    collection = config_collection(spec, fp)
    dataset_spec = json.loads(sweep["spec_json"]).get("dataset")
    who = who or _user(settings)
    previous = production(store)

    payload = model_payload(spec, fp, home, dataset_spec, name=row["name"], sweep_id=sweep_id, config_id=config_id)
    version = _register_model(settings, payload, decision, model_name=model_name, tags={
        "ragbench.kind": "promotion", "ragbench.sweep_id": sweep_id, "ragbench.config_id": config_id,
        "ragbench.dataset_fingerprint": fp, "ragbench.forced": force, "ragbench.who": who,
        "ragbench.reason": reason or "", "ragbench.evidence": decision.evidence})
    forced = force and not decision.allowed
    try:  # the registry is for browsing: a version without its description is still the promoted model
        _describe_version(settings, model_name, version, sweep_id=sweep_id, config_id=config_id, name=row["name"],
                          spec=spec, fp=fp, decision=decision, forced=forced, reason=reason, who=who,
                          source_run=row.get("mlflow_run_id"), previous=previous)
    except Exception as e:
        log.warning("MLflow: could not describe %s version %s: %s", model_name, version, e)
    prev_target = collection_alias(settings)
    _set_model_alias(settings, model_name, version)
    try:
        set_collection_alias(settings, collection)
        store.record_promotion(
            promoted_at=datetime.now(timezone.utc), sweep_id=sweep_id, config_id=config_id, name=row["name"],
            spec=spec, dataset_fingerprint=fp, primary_measure=decision.primary,
            primary_value=decision.candidate_mean, p_value=decision.p_value, forced=forced,
            reason=reason, who=who, mlflow_model_version=version, collection=collection, model_name=model_name,
            evidence=decision.evidence)
    except BaseException:
        # put the aliases back where they were: production is the previous record, or nothing
        _set_model_alias(settings, model_name, previous.mlflow_model_version if previous else None)
        try:
            set_collection_alias(settings, prev_target)
        except Exception as e:  # pragma: no cover - best effort
            log.error("could not restore the Qdrant alias to %s: %s", prev_target, e)
        raise
    log.info("promoted %s (sweep %s) as %s version %s; Qdrant alias %s -> %s", row["name"], sweep_id, model_name,
             version, ALIAS, collection or "(none: BM25)")
    return production(store)


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
    earlier = _rows(store.promotions(active=False, rolled_back=False, before=live.promoted_at))
    if not earlier:
        raise PromotionRefused(f"no previous promotion to roll back to: {live.name} (promoted "
                               f"{live.promoted_at:%Y-%m-%d %H:%M}) is the first one still standing")
    prev = earlier[0]
    _set_model_alias(settings, prev.model_name, prev.mlflow_model_version)
    try:
        set_collection_alias(settings, prev.collection)
        store.restore_promotion(prev.promoted_at, prev.config_id, rolled_back_at=datetime.now(timezone.utc))
    except BaseException:
        _set_model_alias(settings, live.model_name, live.mlflow_model_version)
        set_collection_alias(settings, live.collection)
        raise
    log.info("rolled back %s; production is %s again (%s version %s)", live.name, prev.name, prev.model_name,
             prev.mlflow_model_version)
    return production(store)


def _user(settings: Settings) -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return settings.user
