"""The nightly schedule, for real: a local Prefect server, the repository's prefect.yaml deployed to a process work
pool, a triggered run of the deployment picked up by a worker, and its results in DuckDB.

Started here (and stopped by PID in a finalizer): `prefect server start` on 127.0.0.1 with a throwaway
PREFECT_HOME. The run uses a tiny BM25-only sweep of the bundled demo set with MLflow off, so the whole test is
dominated by the server start (~25 s) and the flow process start.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from conftest import DEMO, ROOT, write_config

PREFECT = str(Path(sys.executable).with_name("prefect"))
FLOW, DEPLOYMENT = "ragbench-sweep", "ragbench-nightly-sweep"
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _stop(proc: subprocess.Popen) -> None:
    """SIGINT to the process group we started (the server's uvicorn child included), then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)  # start_new_session=True: the group id is the PID we started
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def prefect_server(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_TRACKING_URI",
                                                                     "RAGBENCH_QDRANT"))}
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_UI_ENABLED="false", DO_NOT_TRACK="1", PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", HF_HUB_OFFLINE="1", RAGBENCH_PROGRESS="0")
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 150
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prefect server exited early ({proc.returncode}):\n"
                            f"{(tmp_path / 'server.log').read_text()[-3000:]}")
            try:
                if _get(f"http://127.0.0.1:{port}/api/health") is True:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prefect server not healthy after 150 s:\n{(tmp_path / 'server.log').read_text()[-3000:]}")
            time.sleep(1)
        yield env, f"http://127.0.0.1:{port}/api"
    finally:
        _stop(proc)
        log.close()


def _prefect(env: dict, *args: str, timeout: int = 180) -> str:
    proc = subprocess.Popen([PREFECT, *args], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(proc)
        out, _ = proc.communicate()
        pytest.fail(f"`prefect {' '.join(args)}` timed out after {timeout} s:\n{out[-3000:]}")
    assert proc.returncode == 0, f"`prefect {' '.join(args)}` failed ({proc.returncode}):\n{out[-3000:]}"
    return out


def test_nightly_deployment_registers_and_a_triggered_run_completes(prefect_server, tmp_path):
    env, api = prefect_server
    home = tmp_path / "home"
    env = {**env, "RAGBENCH_PROJECT_DIR": str(ROOT), "RAGBENCH_HOME": str(home)}
    tiny = write_config(tmp_path / "tiny.yaml", f"""name: tiny-nightly
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
output: {{mlflow: false}}
""")

    _prefect(env, "work-pool", "create", "ragbench-process", "--type", "process")
    _prefect(env, "deploy", "--all", "--no-prompt")  # reads the repository's prefect.yaml

    dep = _get(f"{api}/deployments/name/{FLOW}/{DEPLOYMENT}")
    assert dep["entrypoint"] == "flows/sweep.py:sweep_flow" and dep["work_pool_name"] == "ragbench-process"
    assert dep["parameters"] == {"config_path": "configs/scifact.yaml"}
    crons = [(s["schedule"].get("cron"), s["schedule"].get("timezone"), s["active"]) for s in dep["schedules"]]
    assert crons == [("0 2 * * *", "UTC", True)]

    out = _prefect(env, "deployment", "run", f"{FLOW}/{DEPLOYMENT}", "--param", f"config_path={tiny}")
    run_id = UUID_RE.search(out.split("UUID", 1)[-1]).group(0)
    # the worker picks up the due run, runs the flow in a subprocess from the checkout, and exits
    _prefect(env, "worker", "start", "--pool", "ragbench-process", "--run-once", timeout=300)

    run = _get(f"{api}/flow_runs/{run_id}")
    assert run["deployment_id"] == dep["id"] and run["parameters"]["config_path"] == str(tiny)
    assert run["state"]["type"] == "COMPLETED", run["state"]

    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        sweeps = con.execute("SELECT name, status FROM sweeps").fetchall()
        configs = con.execute("SELECT name, status, n_queries FROM configs").fetchall()
        ndcg = con.execute("SELECT mean FROM config_metrics WHERE measure = 'ndcg_at_10'").fetchall()
    finally:
        con.close()
    assert sweeps == [("tiny-nightly", "finished")]
    assert configs == [("whole | bm25(k1=1.2,b=0.75)", "finished", 34)]
    assert 0 < ndcg[0][0] <= 1
