"""Finished or not: a sweep killed (SIGKILL) with configs left reads as unfinished everywhere — ``promote`` refuses
it without ``--force --reason``, ``report`` says "unfinished: N of 6 configs" in every format, the MLflow parent
run is tagged ``ragbench.finished = false`` — and once resumed to its end it reads as finished."""

from __future__ import annotations

import json

import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.settings import Settings
from ragbench.results.completion import sweep_completion
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

try:
    from test_faults import _finished_configs, _kill_when, _start
except ImportError:  # the same helpers after the tier move
    from test_resume_and_fault_isolation import _finished_configs, _kill_when, _start

SIX = f"""name: six
dataset: {{path: {DEMO}, queries: all}}
chunkers:
  - {{kind: whole}}
  - {{kind: markdown}}
  - {{kind: fixed, size: 64, overlap: 0}}
  - {{kind: fixed, size: 128, overlap: 0}}
  - {{kind: recursive, size: 128, overlap: 0}}
  - {{kind: sentences, window: 2}}
retrievers: [{{kind: bm25}}]
"""


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """``(home, config file, sweep id, configs done)`` of a 6-config BM25 sweep (MLflow on) killed by SIGKILL as
    soon as its first config landed in DuckDB."""
    root = tmp_path_factory.mktemp("unfinished")
    home, cfg = root / "home", write_config(root / "six.yaml", SIX)
    assert _kill_when(_start(cfg, home), lambda: _finished_configs(home) >= 1), "the sweep finished first"
    store = ResultStore(home / "results.duckdb")
    sid = store.latest_sweep_id()
    done = len(store.config_names(sid))
    assert 1 <= done < 6
    return home, cfg, sid, done


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_a_killed_sweep_reads_as_unfinished(killed):
    home, _, sid, done = killed
    c = sweep_completion(ResultStore(home / "results.duckdb"), sid)
    assert (c.status, c.finished, c.configs_done, c.configs_total, c.live_pid) == ("running", False, done, 6, None)
    assert c.text == f"unfinished: {done} of 6 configs"
    assert "interrupted" in c.why


def test_report_says_unfinished_in_every_format(killed):
    home, _, sid, done = killed
    res = _cli("report", "latest", "--format", "json", "--no-mlflow", "--home", str(home))
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == done
    assert all((r["finished"], r["configs_done"], r["configs_total"]) == (False, done, 6) for r in rows)
    note = f"unfinished: {done} of 6 configs"
    res = _cli("report", "latest", "--format", "markdown", "--no-mlflow", "--home", str(home))
    assert res.exit_code == 0 and f"> **Warning:** {note}" in res.stdout
    res = _cli("report", "latest", "--no-mlflow", "--home", str(home))
    assert res.exit_code == 0 and f"warning: {note}" in " ".join(res.stdout.split())
    html = (home / "reports" / sid / "report.html").read_text()
    assert f"<p class='warning unfinished'><b>Warning:</b> {note}" in html


def test_mlflow_parent_run_is_tagged_unfinished(killed):
    from mlflow.tracking import MlflowClient

    home, _, sid, _ = killed
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragbench/six")
    (parent,) = client.search_runs([exp.experiment_id], filter_string="tags.`ragbench.kind` = 'sweep'")
    assert parent.data.tags["ragbench.sweep_id"] == sid
    assert parent.data.tags["ragbench.finished"] == "false" and parent.data.tags["ragbench.configs_total"] == "6"


def test_promote_refuses_an_unfinished_sweep_unless_forced_with_a_reason(killed):
    home, cfg, sid, done = killed
    res = _cli("promote", "latest", "1", "--home", str(home))
    assert res.exit_code == 1, res.output
    line = " ".join(res.output.split())
    assert f"sweep {sid} is unfinished: {done} of 6 configs" in line and "--force --reason" in line
    assert len(res.output.strip().splitlines()) == 1, res.output  # one line, no traceback
    assert _cli("production", "--json", "--home", str(home)).stdout.strip() == "null"  # nothing went live
    res = _cli("promote", "latest", "1", "--force", "--home", str(home))
    assert res.exit_code == 2 and "--force needs --reason" in res.output
    res = _cli("promote", "latest", "1", "--force", "--reason", "hotfix before the rerun", "--home", str(home))
    assert res.exit_code == 0, res.output
    live = json.loads(_cli("production", "--json", "--home", str(home)).stdout)
    assert live["sweep_id"] == sid and live["reason"] == "hotfix before the rerun"
    # the gate says where production came from
    res = _cli("gate", str(cfg), "--config", "2", "--n", "8", "--home", str(home))
    assert res.exit_code in (0, 1), res.output
    assert f"comes from sweep {sid}, unfinished: {done} of 6 configs" in " ".join(res.output.split())


def test_resumed_to_its_end_it_reads_as_finished(killed):
    from mlflow.tracking import MlflowClient

    home, cfg, sid, _ = killed
    result = run_sweep(load_config(cfg), Settings(home=home))
    assert result.sweep_id == sid  # resumed, not a new sweep
    c = sweep_completion(ResultStore(home / "results.duckdb"), sid)
    assert (c.finished, c.configs_done, c.configs_total) == (True, 6, 6) and c.text == "finished: 6 of 6 configs"
    res = _cli("report", "latest", "--format", "json", "--no-mlflow", "--home", str(home))
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 6 and all(r["finished"] is True for r in rows)
    assert "unfinished" not in _cli("report", "latest", "--format", "markdown", "--no-mlflow", "--home",
                                    str(home)).stdout
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragbench/six")
    (parent,) = client.search_runs([exp.experiment_id], filter_string="tags.`ragbench.kind` = 'sweep'")
    assert parent.data.tags["ragbench.finished"] == "true"
