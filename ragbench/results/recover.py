"""Rebuilding a damaged store from what survives (``ragbench doctor --repair``).

A damaged file is never deleted: :func:`set_aside` renames it (and its write-ahead log) to
``<name>.damaged-<UTC time>`` beside it. A new ``results.duckdb`` is refilled by :func:`refill_from_mlflow` from
the MLflow runs (each sweep's parent run, each config's child run with its params, metrics, ``config.json``,
``per_query.parquet``, ``rankings.parquet`` and side tables), then from the spool; a new ``mlflow.db`` from DuckDB
(``sync-mlflow`` after :meth:`~ragbench.results.store.ResultStore.forget_mlflow_runs`). What neither holds is
listed in :attr:`Recovered.lost`.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ragbench.results.outcomes import MEASURE_SCHEMA, ConfigResult, config_level
from ragbench.results.store import ResultStore
from ragbench.results.tracking import CONFIG_TAG, SWEEP_TAG

#: the sidecar files a store may have beside it: DuckDB's WAL, SQLite's WAL, shared memory and journal
SIDECARS = (".wal", "-wal", "-shm", "-journal")
#: child-run metrics that are not measures
_COUNTS = ("n_queries", "n_unlabelled", "retrieval_ms_per_query")
#: the optional per-config tables a child run carries, by ConfigResult field
_SIDE_TABLES = {"diagnostics": "reachability.parquet", "ann": "ann_fidelity.parquet", "answers": "answers.parquet"}


def set_aside(path: Path) -> Path:
    """Rename ``path`` and its sidecars to ``<name>.damaged-<UTC time>`` (never deleted); returns the new path."""
    stamp = f"{datetime.now(timezone.utc):%Y%m%dT%H%M%S%f}"
    target = path.with_name(f"{path.name}.damaged-{stamp}")
    path.rename(target)
    for suffix in SIDECARS:
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(target.with_name(target.name + suffix))
    return target


@dataclass
class Recovered:
    """What a refill restored: ``sweeps`` and ``configs`` counts, and ``lost``, what could not be recovered (one
    line each)."""

    sweeps: int = 0
    configs: int = 0
    lost: list[str] = field(default_factory=list)


def _sweep_status(run, failed: int) -> str:
    """``running`` for a sweep MLflow says did not finish (tag ``ragbench.finished``, else the run's status)."""
    tag = run.data.tags.get("ragbench.finished")
    done = tag == "true" if tag is not None else run.info.status in ("FINISHED", "FAILED")
    return ("finished_with_failures" if failed else "finished") if done else "running"


def _download(client, run_id: str, name: str, tmp: Path) -> Path | None:
    try:
        return Path(client.download_artifacts(run_id, name, str(tmp)))
    except Exception:  # not logged (an older run) or its artifact store is gone
        return None


def _config_result(client, run, sweep_fp: str, tmp: Path) -> ConfigResult | None:
    """A finished child run as a :class:`ConfigResult` (no evaluation key: a later sweep evaluates it again rather
    than reuse it), or None when its per-query table is missing."""
    rid, params, metrics = run.info.run_id, run.data.params, run.data.metrics
    per_query, rankings = _download(client, rid, "per_query.parquet", tmp), _download(client, rid, "rankings.parquet",
                                                                                      tmp)
    if per_query is None or rankings is None:
        return None
    spec_file = _download(client, rid, "config.json", tmp)
    spec = json.loads(spec_file.read_text()) if spec_file else {}
    pq = pl.read_parquet(per_query).select(list(MEASURE_SCHEMA)).cast(MEASURE_SCHEMA)
    per_query_measures = set(pq["measure"].unique().to_list())
    level = {k: v for k, v in metrics.items() if k not in _COUNTS and not k.startswith("chunkstat_")
             and k not in per_query_measures}
    side = {f: pl.read_parquet(p) for f, name in _SIDE_TABLES.items() if (p := _download(client, rid, name, tmp))}
    return ConfigResult(
        run.data.tags[CONFIG_TAG], params.get("config_name") or run.info.run_name, spec,
        params.get("dataset_fingerprint") or sweep_fp, pl.concat([pq, config_level(level)]),
        pl.read_parquet(rankings), int(metrics.get("n_queries", 0)), int(metrics.get("n_unlabelled", 0)),
        float(metrics.get("retrieval_ms_per_query", 0.0)),
        chunk_stats={k.removeprefix("chunkstat_"): v for k, v in metrics.items() if k.startswith("chunkstat_")},
        **side)


def _dataset_spec(params: dict[str, str]) -> dict:
    return {k.removeprefix("dataset."): v for k, v in params.items() if k.startswith("dataset.")}


def _refill_sweep(client, experiment, run, store: ResultStore, out: Recovered) -> None:
    """One sweep's row and its configs' rows from its parent run ``run`` and the child runs tagged with it."""
    tags, params = run.data.tags, run.data.params
    sid, fp = tags[SWEEP_TAG], params.get("dataset_fingerprint", "")
    children = client.search_runs([experiment.experiment_id], max_results=50_000,
                                  filter_string=f"tags.`{SWEEP_TAG}` = '{sid}' and tags.`ragbench.kind` = 'config'")
    total = tags.get("ragbench.configs_total")
    # what the sweep's spec can be rebuilt from: its dataset (parent params), primary measure and grid size
    spec = {"dataset": _dataset_spec(params), "metrics": {"primary": tags.get("ragbench.primary") or "ndcg@10"},
            "recovered": {"from": "mlflow", "configs_total": int(total) if total else None}}
    ds = spec["dataset"]
    store.begin_sweep(sweep_id=sid, name=tags.get("ragbench.sweep_name", sid), spec_hash=None, spec=spec,
                      dataset_name=ds.get("name") if ds.get("name") not in (None, "none") else tags.get(
                          "ragbench.sweep_name", sid), dataset_fingerprint=fp, experiment=experiment.name)
    store.set_sweep_mlflow_run(sid, run.info.run_id)
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for child in children:
            cid, status = child.data.tags.get(CONFIG_TAG), child.info.status
            if status == "FAILED":
                failed += 1
                spec_file = _download(client, child.info.run_id, "config.json", Path(tmp))
                store.write_config_failure(sid, cid, child.data.params.get("config_name") or cid,
                                           json.loads(spec_file.read_text()) if spec_file else {}, fp,
                                           child.data.tags.get("ragbench.error", ""), child.info.run_id)
            elif status == "FINISHED":
                result = _config_result(client, child, fp, Path(tmp))
                if result is None:
                    out.lost.append(f"sweep {sid}: config {cid} has no per-query table in MLflow")
                    continue
                store.write_config(sid, result, mlflow_run_id=child.info.run_id)
            else:
                continue
            out.configs += 1
    if int(tags.get("ragbench.reused_configs", "0") or 0):
        out.lost.append(f"sweep {sid}: its {tags['ragbench.reused_configs']} reused config(s) (their runs belong "
                        "to the sweeps that evaluated them); rerun the sweep to copy them again")
    status = _sweep_status(run, failed)
    if status != "running":
        store.finish_sweep(sid, status)
    out.sweeps += 1


def refill_from_mlflow(uri: str, store: ResultStore) -> Recovered:
    """Refill ``store`` (a new, empty results file) with every sweep the MLflow store at ``uri`` tracked, oldest
    first (so ``latest`` is the newest again). Evaluation keys, measure versions and promotions are not in MLflow
    runs: :attr:`Recovered.lost` says so."""
    from mlflow.tracking import MlflowClient

    client, out = MlflowClient(tracking_uri=uri), Recovered()
    found = [(run.info.start_time, experiment, run) for experiment in client.search_experiments()
             for run in client.search_runs([experiment.experiment_id], max_results=50_000,
                                           filter_string="tags.`ragbench.kind` = 'sweep'")]
    for _, experiment, run in sorted(found, key=lambda t: t[0]):
        _refill_sweep(client, experiment, run, store, out)
    if out.configs:
        out.lost.append("evaluation keys: the next sweep evaluates these configs again instead of reusing them "
                        "(chunks and vectors come from the cache)")
    out.lost.append("promotions (what is live): promote again with `ragbench promote` (the MLflow registry still "
                    "lists the versions)")
    return out
