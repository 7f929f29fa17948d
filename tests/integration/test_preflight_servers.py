"""Every server a command needs is checked before heavy work: nothing listening at an LLM endpoint, a Dask scheduler,
a Qdrant server, an MLflow server or its PostgreSQL database fails in seconds with one line naming what and where,
and a sweep has chunked and embedded nothing by then (its cache folder stays empty)."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from conftest import DEMO, free_port, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.core.retry import SERVER_CHECK_TIMEOUT_S, ServerUnreachable, check_server

QUICK = 15.0  # seconds: a check, the imports and the config load on a busy shared machine; far below any retry

SWEEP = """name: servers
dataset: {{path: {demo}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25{rewrite}}}]
{extra}output: {{mlflow: false}}
"""


def _sweep(tmp_path, home, *args, rewrite: str = "", extra: str = "", env: dict | None = None):
    cfg = write_config(tmp_path / "s.yaml", SWEEP.format(demo=DEMO, rewrite=rewrite, extra=extra))
    base = {"RAGBENCH_PROGRESS": "0", "RAGBENCH_QDRANT_URL": "", "MLFLOW_TRACKING_URI": "",
            "RAGBENCH_DASK_ADDRESS": ""}
    t0 = time.monotonic()
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--home", str(home), "--orchestrator", "local", *args],
                             env={**base, **(env or {})})
    return res, time.monotonic() - t0


def _error_line(res) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output[-3000:]
    return lines[0]


def _nothing_built(home) -> None:
    cache = home / "cache"
    built = [p for p in cache.rglob("*") if p.is_file()] if cache.exists() else []
    assert not built, built[:5]
    assert not (home / "results.duckdb").exists()


def test_llm_endpoint_for_hyde_rewrites_down_fails_before_chunking(tmp_path, home):
    url = f"http://127.0.0.1:{free_port()}/v1"
    res, seconds = _sweep(tmp_path, home, rewrite=", rewrite: {kind: hyde}",
                          extra=f"generation: {{endpoint: {url!r}, model: m, enabled: false}}\n")
    assert res.exit_code == 2, res.output[-3000:]
    line = _error_line(res)
    assert f"the LLM endpoint {url} for query rewrites (HyDE) does not answer: connection refused" in line, line
    assert seconds < QUICK
    _nothing_built(home)


def test_llm_endpoint_for_answers_down_names_answers_and_hides_its_key(tmp_path, home):
    port = free_port()
    url = f"http://alice:sk-abcdefghijklmnop1234@127.0.0.1:{port}/v1"
    res, seconds = _sweep(tmp_path, home, extra=f"generation: {{endpoint: {url!r}, model: m, k_sweep: null}}\n")
    assert res.exit_code == 2, res.output[-3000:]
    line = _error_line(res)
    assert f"the LLM endpoint http://***@127.0.0.1:{port}/v1 for end-to-end answers does not answer" in line, line
    assert "sk-abcdefghijklmnop1234" not in res.output
    assert seconds < QUICK
    _nothing_built(home)


def test_local_llm_server_that_cannot_start_fails_before_chunking(tmp_path, home):
    missing = tmp_path / "no-llama-server"
    res, seconds = _sweep(tmp_path, home, extra="generation: {endpoint: local, k_sweep: null}\n",
                          env={"RAGBENCH_LLAMA_SERVER": str(missing)})
    assert res.exit_code == 2, res.output[-3000:]
    assert f"llama-server not found: RAGBENCH_LLAMA_SERVER points to {missing}" in _error_line(res)
    assert seconds < QUICK
    _nothing_built(home)


def test_unreachable_dask_scheduler_fails_in_seconds_naming_it(tmp_path, home):
    address = f"tcp://127.0.0.1:{free_port()}"
    res, seconds = _sweep(tmp_path, home, "--task-runner", "dask", "--address", address)
    assert res.exit_code == 2, res.output[-3000:]
    assert f"the Dask scheduler {address} does not answer: connection refused" in _error_line(res)
    assert seconds < QUICK
    _nothing_built(home)


def test_dask_workers_give_up_on_a_dead_scheduler_in_bounded_time():
    from ragbench.core.workers import DASK_CONNECT_TIMEOUT_S, DaskWorkers

    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(ServerUnreachable, match=f"the Dask scheduler {address} does not answer within"):
        DaskWorkers(address=address)
    assert time.monotonic() - t0 < DASK_CONNECT_TIMEOUT_S + QUICK


def test_unreachable_qdrant_server_fails_before_chunking(tmp_path, home):
    url = f"http://127.0.0.1:{free_port()}"
    res, seconds = _sweep(tmp_path, home, env={"RAGBENCH_QDRANT_URL": url})
    assert res.exit_code == 2, res.output[-3000:]
    assert f"the Qdrant server {url} does not answer: connection refused" in _error_line(res)
    assert seconds < QUICK
    _nothing_built(home)


@pytest.fixture(scope="module")
def stored_home(tmp_path_factory):
    """A home with one config stored in DuckDB and never sent to MLflow (the sweep ran with MLflow off)."""
    tmp = tmp_path_factory.mktemp("stored")
    res, _ = _sweep(tmp, tmp / "home")
    assert res.exit_code == 0, res.output[-3000:]
    return tmp / "home"


@pytest.mark.parametrize("kind", ["http", "postgresql"])
def test_sync_mlflow_against_nothing_fails_in_seconds_with_one_line(stored_home, kind):
    port = free_port()
    uri = f"http://127.0.0.1:{port}" if kind == "http" else f"postgresql://mlflow:pw@127.0.0.1:{port}/mlflow"
    t0 = time.monotonic()
    res = CliRunner().invoke(app, ["sync-mlflow", "--home", str(stored_home), "--tracking-uri", uri],
                             env={"RAGBENCH_PROGRESS": "0"})
    seconds = time.monotonic() - t0
    assert res.exit_code == 2, res.output[-3000:]
    what = "MLflow tracking server" if kind == "http" else "MLflow database (PostgreSQL)"
    shown = uri if kind == "http" else f"postgresql://***@127.0.0.1:{port}/mlflow"
    assert f"the {what} {shown} does not answer: connection refused" in _error_line(res)
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert seconds < QUICK


def test_a_server_that_accepts_but_never_answers_is_given_up_after_the_timeout():
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never says a word
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        t0 = time.monotonic()
        with pytest.raises(ServerUnreachable, match=f"the LLM endpoint {url} does not answer: no answer within"):
            check_server(url, "LLM endpoint", http_path="/models", timeout=1.0)
        assert time.monotonic() - t0 < 1.0 + 2.0
    assert SERVER_CHECK_TIMEOUT_S <= 5


class _NotFound(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the stdlib's spelling
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_any_http_answer_counts_as_the_server_being_there():
    server = HTTPServer(("127.0.0.1", 0), _NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check_server(f"http://127.0.0.1:{server.server_port}/v1", "LLM endpoint", http_path="/models")
    finally:
        server.shutdown()
        server.server_close()


def test_mlflow_http_retries_are_bounded_through_the_settings(monkeypatch):
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT

    from ragbench.core.settings import Settings

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")  # restored after the test, whatever apply() wrote
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
    Settings.from_env({}).apply()  # nothing set by the user: a few retries, not MLflow's minutes of backoff
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 2 and MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 60
    Settings.from_env({"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}).apply()
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 0 and MLFLOW_HTTP_REQUEST_TIMEOUT.get() == 5


@pytest.mark.parametrize("kind", ["http", "postgresql"])
def test_unreachable_mlflow_only_warns_in_the_preflight(tmp_path, home, kind, ragbench_log):
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.sweep import preflight

    port = free_port()
    uri = f"http://127.0.0.1:{port}" if kind == "http" else f"postgresql://mlflow@127.0.0.1:{port}/mlflow"
    cfg = load_config(write_config(tmp_path / "m.yaml", SWEEP.format(demo=DEMO, rewrite="", extra="")
                                   .replace("output: {mlflow: false}\n", "")))
    t0 = time.monotonic()
    preflight(cfg, Settings(home=home, mlflow_tracking_uri=uri))  # results still go to DuckDB: no error
    assert time.monotonic() - t0 < QUICK
    what = "MLflow tracking server" if kind == "http" else "MLflow database (PostgreSQL)"
    shown = uri if kind == "http" else f"postgresql://***@127.0.0.1:{port}/mlflow"  # a user name is masked too
    said = [m for m in ragbench_log if f"the {what} {shown} does not answer: connection refused" in m]
    assert len(said) == 1 and "sync-mlflow" in said[0], ragbench_log


def test_an_address_without_a_scheme_is_checked_as_host_and_port():
    with socket.socket() as listener:  # as Dask and Qdrant clients accept it: host:port
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        check_server(f"127.0.0.1:{listener.getsockname()[1]}", "Dask scheduler")
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(ServerUnreachable, match=f"the Dask scheduler {dead} does not answer: connection refused"):
        check_server(dead, "Dask scheduler")
