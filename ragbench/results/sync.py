"""Upload to MLflow what reached only DuckDB (the tracking server was down during the sweep)."""

from __future__ import annotations

import json
from pathlib import Path

from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.results.night import log_night, log_unlogged
from ragbench.results.store import ResultStore
from ragbench.results.tracking import Tracker, check_tracking_server, default_tracking_uri, sweep_params


def sync_mlflow(settings: Settings, sweep_id: str | None = None) -> int:
    """Log every stored config that has no MLflow run yet; returns how many were uploaded.

    Parent runs are found (or created) by the sweep-id tag and child runs by the config-id tag, so running this
    twice, or after a sweep that did log some configs, never creates duplicates. Runs go to the experiment the
    sweep recorded (``output.experiment`` or ``ragbench/<sweep name>``); sweeps stored before the experiment was
    recorded use ``ragbench/<sweep name>``.
    """
    home = Path(settings.home)
    store = ResultStore(home / "results.duckdb")
    uri = default_tracking_uri(settings)
    from ragbench.results.tracking import check_mlflow_store

    check_mlflow_store(settings)  # a damaged mlflow.db: one line naming it and the repair, before any upload
    uploaded = 0
    for row in store.sweeps(sweep_id).iter_rows(named=True):
        sid, name, fingerprint, status = row["sweep_id"], row["name"], row["dataset_fingerprint"], row["status"]
        pending = store.pending_mlflow_configs(sid)
        if pending.is_empty():
            continue
        spec = json.loads(row["spec_json"])
        # the default matches ragbench.sweep.orchestrator.experiment_name for a sweep without output.experiment
        experiment = row["experiment"] or f"ragbench/{name}"
        if not uploaded:  # once, before MLflow's client, which would retry a dead server for minutes
            check_tracking_server(uri)
        tracker = Tracker(uri, experiment, artifact_root=Path(home) / "mlartifacts")
        parent = tracker.sweep_run(sid, name, sweep_params(spec.get("dataset", {}), fingerprint))
        store.set_sweep_mlflow_run(sid, parent)
        tracker.client.set_tag(parent, "ragbench.finished", "false" if status == "running" else "true")
        uploaded += log_unlogged(tracker, store, sid, parent, fingerprint)
        log_night(tracker, store, sid, parent, fingerprint)  # the configs it reused: children of its run too
        if status != "running":
            tracker.client.set_terminated(parent, "FINISHED" if status == "finished" else "FAILED")
        log.info("sync-mlflow: sweep %s: %d config(s) uploaded to %s", sid, len(pending), uri)
    return uploaded
