"""Overnight faults: a killed sweep resumes without recomputing or duplicating anything, a failing config is
isolated, two sweeps on one store don't trip over each other, and an unreachable MLflow loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import DEMO, ROOT, without_costs, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.locks import LockBusyError, file_lock
from ragbench.core.settings import Settings
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

RESUME_SWEEP = f"""name: resume-test
dataset: {{path: {DEMO}, queries: all}}
chunkers:
  - {{kind: fixed, size: 48, overlap: 0}}
  - {{kind: sentences, window: 2}}
  - {{kind: whole}}
embedders: [{{model: all-MiniLM-L6-v2, batch_size: 16}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
"""


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env.update(RAGBENCH_HOME=str(home), RAGBENCH_PROGRESS="0", RAGBENCH_EMBED_SEGMENT_ROWS="32")
    return env


def _start(cfg: Path, home: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local",
                             "--json"], cwd=ROOT, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _kill_when(proc: subprocess.Popen, condition, timeout: float = 600) -> bool:
    """SIGKILL ``proc`` as soon as ``condition()`` holds; False if it finished first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if condition():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("condition never met")


def _segments(home: Path) -> list[Path]:
    return list((home / "cache" / "vectors").rglob("seg-*.parquet"))


def _finished_configs(home: Path) -> int:
    db = home / "results.duckdb"
    if not db.exists():
        return 0
    try:
        return ResultStore(db, wait_seconds=1).query(
            "SELECT count(*) AS n FROM configs WHERE status = 'finished'")["n"][0]
    except Exception:
        return 0


def test_sigkill_mid_embedding_and_mid_evaluation_then_resume(tmp_path):
    home, cfg = tmp_path / "home", write_config(tmp_path / "resume.yaml", RESUME_SWEEP)

    killed_embedding = _kill_when(_start(cfg, home), lambda: len(_segments(home)) >= 2)
    assert killed_embedding, "the sweep finished before it could be killed mid-embedding"
    done_before = _finished_configs(home)  # BM25 of the first chunker may already have landed
    assert done_before < 6
    killed_evaluation = _kill_when(_start(cfg, home), lambda: _finished_configs(home) > done_before)
    assert killed_evaluation, "the sweep finished before it could be killed mid-evaluation"
    assert _finished_configs(home) < 6
    final = _start(cfg, home)
    out, err = final.communicate(timeout=600)
    assert final.returncode == 0, err[-3000:]
    resumed = {r["config_id"]: r for r in map(json.loads, out.splitlines())}
    assert len(resumed) == 6 and {r["status"] for r in resumed.values()} == {"finished"}
    assert "resuming sweep" in err

    # zero recomputed vectors: every cached vector row has a distinct text hash
    hashes = [h for seg in _segments(home) for h in pq.read_table(seg, columns=["text_hash"]).column(0).to_pylist()]
    assert len(hashes) == len(set(hashes))

    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    (sweep_id,), = con.execute("SELECT sweep_id FROM sweeps").fetchall()  # one sweep, resumed twice
    for table, key in [("configs", "config_id"), ("config_metrics", "config_id, measure"),
                       ("query_metrics", "config_id, query_id, measure"), ("rankings", "config_id, query_id, rank")]:
        dups = con.execute(f"SELECT count(*) FROM (SELECT {key}, count(*) c FROM {table} GROUP BY ALL "
                           "HAVING c > 1)").fetchall()[0][0]
        assert dups == 0, table
    con.close()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragbench/resume-test")
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if r.data.tags.get("ragbench.kind") == "config"]
    assert len([r for r in runs if r.data.tags.get("ragbench.kind") == "sweep"]) == 1
    assert sorted(r.data.tags["ragbench.config_id"] for r in children) == sorted(resumed), err[-3000:]

    # an uninterrupted run (a new sweep from the same cache, evaluated anew) gives the same results, computing no
    # vector
    fresh = run_sweep(load_config(cfg), Settings(home=home), fresh=True)
    assert fresh.vectors_computed == 0
    for o in fresh.outcomes:  # timings and sizes are measured anew: every result is the same
        assert without_costs(o.metrics) == pytest.approx(without_costs(resumed[o.config_id]["metrics"]),
                                                         nan_ok=True)


def test_one_failing_config_is_isolated(home, tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    cfg = write_config(tmp_path / "iso.yaml", f"""name: isolation
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}, {{model: {broken}}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(home)])
    assert res.exit_code == 1
    assert "1 of 3 configs failed" in res.stdout
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    rows = dict(con.execute("SELECT status, count(*) FROM configs GROUP BY status").fetchall())
    assert rows == {"finished": 2, "failed": 1}
    (error,), = con.execute("SELECT error FROM configs WHERE status = 'failed'").fetchall()
    assert "failed to load" in error and str(broken) in error
    con.close()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ragbench/isolation").experiment_id],
                              filter_string="tags.`ragbench.kind` = 'config'")
    statuses = sorted(r.info.status for r in runs)
    assert statuses == ["FAILED", "FINISHED", "FINISHED"]
    assert any("failed to load" in r.data.tags.get("ragbench.error", "") for r in runs)


BM25_ONLY = """name: {name}
dataset: {{path: {demo}, queries: all}}
chunkers: [{{kind: {chunker}}}]
retrievers: [{{kind: bm25}}]
output: {{mlflow: false}}
"""


def test_same_sweep_twice_at_once_is_refused_clearly(home, settings, tmp_path):
    cfg = write_config(tmp_path / "a.yaml", BM25_ONLY.format(name="a", demo=DEMO, chunker="whole"))
    config = load_config(cfg)
    from ragbench.core.hashing import stable_hash
    from ragbench.data import load_dataset

    fp = load_dataset(config.dataset).fingerprint
    with file_lock(home / "locks" / f"sweep-{stable_hash(config.canonical())}-{fp}.lock", "held"):
        with pytest.raises(LockBusyError, match=r"sweep 'a' is in use by another process \(pid \d+"):
            run_sweep(config, settings)


def test_two_different_sweeps_on_one_store_both_land(tmp_path):
    home = tmp_path / "home"
    procs = [_start(write_config(tmp_path / f"{n}.yaml", BM25_ONLY.format(name=n, demo=DEMO, chunker=c)), home)
             for n, c in [("left", "whole"), ("right", "markdown")]]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM sweeps WHERE status = 'finished'").fetchall()[0][0] == 2
    con.close()


def test_unreachable_mlflow_keeps_results_in_duckdb_then_sync(home, settings, tmp_path, monkeypatch):
    cfg = write_config(tmp_path / "m.yaml", BM25_ONLY.format(name="degraded", demo=DEMO, chunker="whole")
                       .replace("output: {mlflow: false}\n", ""))
    down = settings.replace(mlflow_tracking_uri="http://127.0.0.1:9")  # nothing listens there
    result = run_sweep(load_config(cfg), down)
    assert result.n_failed == 0
    store = ResultStore(home / "results.duckdb")
    assert store.query("SELECT count(*) AS n FROM configs WHERE mlflow_run_id IS NULL")["n"][0] == 1

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    res = CliRunner().invoke(app, ["sync-mlflow", "--home", str(home)])
    assert res.exit_code == 0 and "uploaded 1 config run" in res.output
    assert store.query("SELECT count(*) AS n FROM configs WHERE mlflow_run_id IS NULL")["n"][0] == 0
    res = CliRunner().invoke(app, ["sync-mlflow", "--home", str(home)])
    assert "uploaded 0 config run" in res.output  # idempotent
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("ragbench/degraded").experiment_id])
    assert len(runs) == 2 and any("ndcg_at_10" in r.data.metrics for r in runs)
