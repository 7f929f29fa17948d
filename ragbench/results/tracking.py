"""MLflow tracking: one parent run per sweep, one child run per config (params = flattened spec, metrics =
means, the per-query table as an artifact). Runs are found again by tag, so a resumed sweep reuses its parent run
and never creates a second child for a finished config.

Tracking is for browsing; DuckDB is the record. If MLflow is unreachable the sweep goes on, says so, and the
results can be uploaded later with ``ragbench sync-mlflow``.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from ragbench.core.locks import file_lock
from ragbench.core.measures import measure_key
from ragbench.core.progress import log

SWEEP_TAG, CONFIG_TAG = "ragbench.sweep_id", "ragbench.config_id"


def default_tracking_uri(settings) -> str:
    """The settings' MLflow URI (``$MLFLOW_TRACKING_URI``) or a SQLite store under the ragbench home."""
    return settings.mlflow_tracking_uri or f"sqlite:///{(Path(settings.home) / 'mlflow.db').resolve()}"


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": "1"}`` (MLflow params are flat strings)."""
    out: dict[str, str] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        else:
            out[key] = "null" if v is None else str(v)[:6000]
    return out


def config_params(spec: dict, dataset_fingerprint: str, config_id: str) -> dict[str, str]:
    """The MLflow params of a config's child run."""
    return flatten({**spec, "dataset_fingerprint": dataset_fingerprint, "config_id": config_id})


def sweep_params(dataset_spec: dict, dataset_fingerprint: str) -> dict[str, str]:
    """The MLflow params of a sweep's parent run."""
    return flatten({"dataset": dataset_spec, "dataset_fingerprint": dataset_fingerprint})


def metric_key(name: str) -> str:
    """The MLflow metric name of a measure: its key (:func:`ragbench.core.measures.measure_key`, ``ndcg_at_10``),
    the same name DuckDB and the CLI use."""
    return measure_key(name)


class Tracker:
    """Thin wrapper over ``MlflowClient`` with find-or-create semantics keyed by ragbench ids."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None):
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri
        self.client = MlflowClient(tracking_uri=tracking_uri)
        exp = self.client.get_experiment_by_name(experiment)
        if exp is None:
            location = artifact_root.resolve().as_uri() if artifact_root and tracking_uri.startswith("sqlite") \
                else None
            self.experiment_id = self.client.create_experiment(experiment, artifact_location=location)
        else:
            self.experiment_id = exp.experiment_id

    def _find(self, tags: dict[str, str]) -> Any | None:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], filter_string=query, max_results=1,
                                       order_by=["attributes.start_time DESC"])
        return runs[0] if runs else None

    def sweep_run(self, sweep_id: str, name: str, params: dict[str, str]) -> str:
        found = self._find({SWEEP_TAG: sweep_id, "ragbench.kind": "sweep"})
        if found:
            return found.info.run_id
        run = self.client.create_run(self.experiment_id, run_name=name,
                                     tags={SWEEP_TAG: sweep_id, "ragbench.kind": "sweep"})
        self._log_params(run.info.run_id, params)
        return run.info.run_id

    def finished_child(self, sweep_id: str, config_id: str) -> str | None:
        found = self._find({SWEEP_TAG: sweep_id, CONFIG_TAG: config_id})
        return found.info.run_id if found and found.info.status == "FINISHED" else None

    def log_config(self, parent_run_id: str, sweep_id: str, config_id: str, name: str, params: dict[str, str],
                   metrics: dict[str, float], tables: dict[str, pl.DataFrame], status: str = "FINISHED",
                   extra_tags: dict[str, str] | None = None) -> str:
        """Create (or reuse the unfinished) child run for a config, log everything, and close it."""
        found = self._find({SWEEP_TAG: sweep_id, CONFIG_TAG: config_id})
        if found and found.info.status == "FINISHED":
            return found.info.run_id
        run_id = found.info.run_id if found else self.client.create_run(
            self.experiment_id, run_name=name,
            tags={"mlflow.parentRunId": parent_run_id, SWEEP_TAG: sweep_id, CONFIG_TAG: config_id,
                  "ragbench.kind": "config", **(extra_tags or {})}).info.run_id
        if not found:
            self._log_params(run_id, params)
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        clean = [Metric(metric_key(k), float(v), ts, 0) for k, v in metrics.items() if v == v]
        for i in range(0, len(clean), 500):
            self.client.log_batch(run_id, metrics=clean[i:i + 500])
        with tempfile.TemporaryDirectory() as tmp:
            for fname, df in tables.items():
                path = Path(tmp) / fname
                df.write_parquet(path) if fname.endswith(".parquet") else df.write_csv(path)
                self.client.log_artifact(run_id, str(path))
        self.client.set_terminated(run_id, status=status)
        return run_id

    def log_config_result(self, parent_run_id: str, sweep_id: str, config_id: str, name: str, spec: dict,
                          dataset_fingerprint: str, *, metrics: dict[str, float], chunk_stats: dict[str, float],
                          n_queries: int, n_unlabelled: int, ms_per_query: float,
                          tables: dict[str, pl.DataFrame]) -> str:
        """A finished config as a child run: params = flattened spec, metrics = means + ``chunkstat_*`` + counts."""
        return self.log_config(
            parent_run_id, sweep_id, config_id, name, config_params(spec, dataset_fingerprint, config_id),
            {**metrics, **{f"chunkstat_{k}": v for k, v in chunk_stats.items()}, "n_queries": n_queries,
             "n_unlabelled": n_unlabelled, "retrieval_ms_per_query": ms_per_query}, tables)

    def log_config_failure(self, parent_run_id: str, sweep_id: str, config_id: str, name: str, spec: dict,
                           dataset_fingerprint: str, error: str) -> str:
        """A failed config as a FAILED child run with its error in the ``ragbench.error`` tag."""
        return self.log_config(parent_run_id, sweep_id, config_id, name,
                               config_params(spec, dataset_fingerprint, config_id), {}, {}, status="FAILED",
                               extra_tags={"ragbench.error": (error or "")[:5000]})

    def finish_sweep(self, run_id: str, metrics: dict[str, float], status: str = "FINISHED") -> None:
        from mlflow.entities import Metric

        ts = int(time.time() * 1000)
        if metrics:
            self.client.log_batch(run_id, metrics=[Metric(metric_key(k), float(v), ts, 0)
                                                   for k, v in metrics.items() if v == v])
        self.client.set_terminated(run_id, status=status)

    def _log_params(self, run_id: str, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k[:250], v) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i:i + 100])


def _probe(uri: str, timeout: float = 5.0) -> None:
    """Fail fast on an unreachable server (MLflow's own client would retry for minutes)."""
    import urllib.request

    with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
        if resp.status != 200:
            raise ConnectionError(f"MLflow health check answered {resp.status}")


def open_tracker(settings, experiment: str) -> Tracker | None:
    """A tracker, or None (with a warning) when MLflow cannot be reached: results still land in DuckDB."""
    uri = default_tracking_uri(settings)
    try:
        if uri.startswith(("http://", "https://")):
            _probe(uri)
        # a fresh SQLite store is migrated on first use: two sweeps doing it at once race (alembic_version exists)
        with file_lock(Path(settings.home) / "locks" / "mlflow-store.lock", "the MLflow store", wait_seconds=600,
                       on_wait=log.info):
            return Tracker(uri, experiment, artifact_root=Path(settings.home) / "mlartifacts")
    except Exception as e:  # unreachable server, locked store: degrade, don't lose the sweep
        log.warning("MLflow at %s is unavailable (%s); results go to DuckDB only — run `ragbench sync-mlflow` "
                    "later", uri, str(e).splitlines()[0][:200])
        return None
