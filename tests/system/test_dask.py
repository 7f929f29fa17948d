"""Scale-out on Dask: embedding shards run on a cluster of real worker processes and give the same vectors, the
same cache and the same per-query metrics as the local runner; a worker killed mid-shard costs only that shard."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import duckdb
import psutil
import pytest
from conftest import DEMO, ROOT, write_config

SWEEP = f"""name: dask
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: fixed, size: 32, overlap: 8}}, {{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: dense, exact: true}}, {{kind: bm25}}]
metrics: {{cutoffs: [1, 10]}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""


def _start(cfg, home, *extra) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env.update(RAGBENCH_PROGRESS="0", RAGBENCH_EMBED_SEGMENT_ROWS="16")  # many small shards
    return subprocess.Popen([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local",
                             "--json", "--home", str(home), *extra], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _per_query(home) -> list[tuple]:
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT config_id, query_id, measure, value FROM query_metrics ORDER BY ALL").fetchall()
        return [(c, q, m, None if v != v else v) for c, q, m, v in rows]  # NaN (unlabelled) compares equal
    finally:
        con.close()


def _finish(proc) -> None:
    out, err = proc.communicate(timeout=1200)
    assert proc.returncode == 0, err[-3000:]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    cfg = write_config(tmp / "dask.yaml", SWEEP)
    _finish(_start(cfg, tmp / "home"))
    return cfg, _per_query(tmp / "home")


def test_dask_workers_give_the_metrics_of_the_local_runner(local_run, tmp_path):
    cfg, expected = local_run
    proc = _start(cfg, tmp_path / "home", "--task-runner", "dask", "--workers", "2")
    _finish(proc)
    assert _per_query(tmp_path / "home") == expected


def test_a_worker_killed_mid_embedding_costs_only_its_shard(local_run, tmp_path):
    cfg, expected = local_run
    home = tmp_path / "home"
    proc = _start(cfg, home, "--task-runner", "dask", "--workers", "2")
    segments = home / "cache" / "vectors"
    deadline, killed = time.monotonic() + 600, None
    while time.monotonic() < deadline and proc.poll() is None and killed is None:
        if len(list(segments.rglob("seg-*.parquet"))) >= 2:  # embedding under way on the workers
            workers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                       if any("multiprocessing" in part or "spawn" in part for part in p.cmdline())]
            if workers:
                killed = workers[-1].pid
                os.kill(killed, signal.SIGKILL)
        time.sleep(0.2)
    assert killed is not None, "embedding finished before a worker could be killed"
    _finish(proc)
    assert _per_query(home) == expected
