"""The MLflow model registry side of a promotion: the promoted config as a loadable model, its version and alias.

A promotion logs an ``mlflow.pyfunc`` model (:class:`ragbench.promotion.serving.RetrieverModel`, the config JSON as
an artifact) in experiment ``ragbench/promotions``, registers it as a new version of ``ragbench-retriever``, tags and
describes that version with what it was promoted on, and moves the alias ``production`` to it, so
``mlflow.pyfunc.load_model("models:/ragbench-retriever@production")`` answers queries. What decides and records a
promotion is :mod:`ragbench.promotion.production`.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.promotion.collection_alias import ALIAS
from ragbench.promotion.promotion_gate import GateDecision, format_p
from ragbench.results.store_promotions import DEFAULT_MODEL_NAME, Promotion

MODEL_NAME = DEFAULT_MODEL_NAME
PROMOTIONS_EXPERIMENT = "ragbench/promotions"


def _client(settings: Settings):
    """An MLflow client on the settings' tracking (and registry) store."""
    from mlflow.tracking import MlflowClient

    from ragbench.results.tracking import default_tracking_uri

    uri = default_tracking_uri(settings)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


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


def register_model(settings: Settings, payload: dict, decision: GateDecision | None, *, model_name: str,
                   tags: dict) -> str:
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


def describe_version(settings: Settings, promotion: Promotion, *, source_run: str | None,
                     previous: Promotion | None) -> None:
    """Give a registered version what it was promoted on: tags (``sweep_id, config_id, config, label,
    dataset_fingerprint, metric, metric_value, p_value, p_value_vs, forced, reason, who, source_run_id,
    previous_version``) and a markdown description linking the config's run in its sweep (``source_run``).

    ``promotion`` is the record about to be stored (its ``mlflow_model_version`` the version to describe),
    ``previous`` the promotion it replaces."""
    from ragbench.config.labels import ConfigLabels

    p = promotion
    client = _client(settings)
    label = ConfigLabels.from_stored(p.spec, p.name).text
    if previous is not None:
        vs = f"production {previous.label} (version {previous.mlflow_model_version})"
    else:
        vs = "the best config of the sweep" if p.p_value is not None else "none (the sweep's best)"
    tags = {"sweep_id": p.sweep_id, "config_id": p.config_id, "config": label, "label": label,
            "config_name": p.name,
            "dataset_fingerprint": p.dataset_fingerprint, "metric": p.primary_measure,
            "metric_value": f"{p.primary_value:.6g}",
            "p_value": format_p(p.p_value) if p.p_value is not None else "none", "p_value_vs": vs,
            "forced": str(p.forced).lower(), "reason": p.reason or "none", "who": p.who,
            "source_run_id": source_run or "none",
            "previous_version": previous.mlflow_model_version if previous and previous.mlflow_model_version
            else "none"}
    for key, value in tags.items():
        client.set_model_version_tag(p.model_name, p.mlflow_model_version, key, str(value)[:5000])
    link = "(not logged to MLflow)"
    if source_run:
        run = client.get_run(source_run)
        link = f"[{source_run}](#/experiments/{run.info.experiment_id}/runs/{source_run})"
    gate = ("**FORCED** past the gate: " + (p.reason or "") if p.forced else "passed the promotion gate")
    client.update_model_version(p.model_name, p.mlflow_model_version, description="\n".join([
        f"**{label}** from sweep `{p.sweep_id}` (config `{p.config_id}`), {gate}.", "",
        f"* {p.primary_measure} = {p.primary_value:.4f} on dataset `{p.dataset_fingerprint}`",
        f"* p-value vs {vs}: {tags['p_value']}",
        f"* evidence: {p.evidence}",
        f"* promoted by {p.who}; source run: {link}"]))


def set_model_alias(settings: Settings, model_name: str, version: str | None, alias: str = ALIAS) -> None:
    """Point the registered model's ``alias`` at ``version`` (None removes the alias)."""
    client = _client(settings)
    if version is None:
        try:
            client.delete_registered_model_alias(model_name, alias)
        except Exception:  # no alias to delete
            pass
    else:
        client.set_registered_model_alias(model_name, alias, str(version))
