"""The nightly schedule, for real: a local Prefect server, the repository's prefect.yaml deployed to a process work
pool, a triggered run of the deployment picked up by a worker, and its results in DuckDB. And the demo sweep run
through that server, as the morning shows it in Prefect: the run named after the sweep, tasks named after what they
do, ragbench's log lines and the leaderboard artifacts, all read back through the Prefect API.

Started here (and stopped by PID in a finalizer): `prefect server start` on 127.0.0.1 with a throwaway
PREFECT_HOME, once for the module. The deployment uses a tiny BM25-only sweep of the bundled demo set with MLflow
off, so that test is dominated by the server start (~25 s) and the flow process start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from conftest import DEMO, ROOT, clean_env, write_config

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


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("prefect-server")
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


def _post(url: str, body: dict) -> list | dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def test_the_demo_through_a_prefect_server_shows_the_sweep(prefect_server, demo_sweep, tmp_path):
    """configs/demo.yaml through `ragbench sweep` against the server (vectors from the demo sweep's cache)."""
    env, api = prefect_server
    home = tmp_path / "home"
    shutil.copytree(demo_sweep.home / "cache", home / "cache")  # the same vectors: nothing to embed again
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(ROOT / "configs" / "demo.yaml"),
                           "--home", str(home), "--json"], cwd=ROOT, env=clean_env(**{
                               **{k: v for k, v in env.items() if k.startswith("PREFECT_")},
                               "PREFECT_HOME": str(tmp_path / "prefect-client"),
                               "RAGBENCH_MLFLOW_UI_URL": "http://mlflow.example:5000"}),
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    sweep_id = rows[0]["sweep_id"]
    assert len(rows) == 20
    assert f"Prefect flow run {sweep_id}: http://127.0.0.1" in proc.stderr  # the CLI says where to look

    runs = _post(f"{api}/flow_runs/filter", {"flow_runs": {"name": {"any_": [sweep_id]}}})
    assert len(runs) == 1 and runs[0]["state"]["type"] == "COMPLETED"
    run_id = runs[0]["id"]

    tasks = _post(f"{api}/task_runs/filter", {"flow_runs": {"id": {"any_": [run_id]}}, "limit": 200})
    names = [t["name"] for t in tasks]
    assert "evaluate recursive 128 tok, overlap 0 | all-MiniLM-L6-v2 | hybrid RRF" in names
    assert "evaluate fixed 128 tok, overlap 32 | BM25" in names
    assert "embed recursive 128 tok, overlap 0 × all-MiniLM-L6-v2" in names
    assert "index markdown ≤256 tok, breadcrumb × static-retrieval-m2v" in names
    staged = [n for n in names if n.split(" ", 1)[0] in ("chunk", "embed", "index", "evaluate")]
    assert len(staged) == len(set(staged)) >= 20 + 4 + 8 + 8  # every task says what it did: no two alike
    assert not any(re.search(r"evaluate-[0-9a-f]{16}", n) for n in names)

    artifacts = {a["key"]: a for a in _post(f"{api}/artifacts/filter",
                                             {"artifacts": {"flow_run_id": {"any_": [run_id]}}})}
    board = artifacts["ragbench-leaderboard-demo"]
    assert board["type"] == "markdown" and "Tied with the best" in board["data"] and "[95 % CI]" in board["data"]
    assert sweep_id in board["data"] and "| # | chunker | model | retriever |" in board["data"]
    tables = [a for a in artifacts.values() if a["type"] == "table"]
    assert len(tables) == 4  # one per chunker
    # links (Prefect stores them as markdown); the MLflow one under the UI's configured address
    assert "http://mlflow.example:5000/#/experiments/" in artifacts["ragbench-mlflow-demo"]["data"]
    assert "file://" in artifacts["ragbench-report-demo"]["data"]

    logs = _post(f"{api}/logs/filter", {"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": 200})
    messages = [entry["message"] for entry in logs]
    assert any(m.startswith(f"sweep {sweep_id}: 20 configs") for m in messages), messages[:20]
    assert any(m.startswith("config ") and "ndcg_at_10 = " in m for m in messages)
    assert not any("Building index" in m for m in messages)  # bm25s' DEBUG lines stay out
