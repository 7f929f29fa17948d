"""The scale-out path against servers started here as processes: a real `mlflow server` (HTTP tracking) and
Qdrant through qdrant-client (its local mode: no Qdrant server binary can run on this machine)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.sweep import run_sweep


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"mlflow server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError("mlflow server did not become healthy in 180 s")
    yield url
    os.killpg(proc.pid, signal.SIGINT)  # `mlflow server` ignores SIGTERM for a long time; SIGINT stops it
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_sweep_against_an_mlflow_server_and_qdrant_client(home, settings, tmp_path, monkeypatch, mlflow_server):
    settings = settings.replace(mlflow_tracking_uri=mlflow_server, qdrant_url=":memory:")
    cfg = write_config(tmp_path / "s.yaml", f"""name: server-path
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 10]}}
""")
    result = run_sweep(load_config(cfg), settings)
    assert result.n_failed == 0
    assert not (home / "mlflow.db").exists() and not (home / "qdrant-edge").exists()  # nothing embedded was used
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name("ragbench/server-path")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`ragbench.kind` = 'config'")
    assert len(runs) == 2 and all("ndcg_at_10" in r.data.metrics for r in runs)
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id)} >= {"per_query.parquet"}
    dense = next(o for o in result.outcomes if o.spec["retriever"]["kind"] == "dense")
    assert 0 < dense.metrics["ndcg@10"] <= 1
