"""Damaged stores: a ``results.duckdb`` or ``mlflow.db`` whose header is overwritten makes every command that reads
it print one line naming the file and ``ragbench doctor --repair`` (never a traceback); ``doctor --repair`` sets
the file aside (renamed, its bytes kept), starts a new one refilled from what survives, says what it could not
recover, and the commands work again with the same results. The journal a writer killed mid-transaction leaves
is no damage."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.settings import Settings
from ragbench.sweep import run_sweep

TWO = f"""name: two
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
retrievers: [{{kind: bm25}}]
"""
BROKEN = b"\xde\xad\xbe\xef" * 64  # over the first 256 bytes: the magic and header of either file
#: a writer of the SQLite file argv[1] killed mid-transaction, its changed pages already in the file: it leaves a hot
#: journal, as a sweep killed while MLflow logs a run does
KILLED_MID_TRANSACTION = """
import os, signal, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size = 1")
con.execute("BEGIN")
con.execute("UPDATE tags SET value = 'never committed'")
con.execute("CREATE TABLE never_committed (x BLOB)")
for _ in range(200):
    con.execute("INSERT INTO never_committed VALUES (randomblob(10000))")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def _rows(res) -> list[dict]:
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """``(home, config file, report rows)``: a finished 2-config BM25 sweep with MLflow on, and its JSON report."""
    root = tmp_path_factory.mktemp("damaged")
    home, cfg = root / "home", write_config(root / "two.yaml", TWO)
    run_sweep(load_config(cfg), Settings(home=home).replace(mlflow_tracking_uri=None))
    res = _cli("report", "latest", "--format", "json", "--no-mlflow", "--home", str(home))
    assert res.exit_code == 0, res.output
    return home, cfg, _rows(res)


def _damaged_copy(base, tmp_path, name: str):
    home, cfg, rows = base
    copy = tmp_path / "home"
    shutil.copytree(home, copy)
    with open(copy / name, "r+b") as f:
        f.write(BROKEN)
    return copy, cfg, rows


def _one_line_naming(res, path) -> None:
    """The command failed with one ``error:`` line naming ``path`` and the repair, and no traceback."""
    assert res.exit_code != 0, res.output
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    errors = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.output
    assert str(path) in errors[0] and "ragbench doctor --repair" in errors[0], errors[0]
    assert "Traceback" not in res.output


def _same_values(rows: list[dict], before: list[dict]) -> None:
    key = lambda r: r["config_id"]  # noqa: E731
    assert [(r["config_id"], r["ndcg_at_10"], r["rank"]) for r in sorted(rows, key=key)] == \
           [(r["config_id"], r["ndcg_at_10"], r["rank"]) for r in sorted(before, key=key)]


def test_damaged_results_file_one_line_each_then_repaired(base, tmp_path):
    home, cfg, before = _damaged_copy(base, tmp_path, "results.duckdb")
    db, h = home / "results.duckdb", ("--home", str(home))
    for args in (("report", "latest", "--no-mlflow"), ("compare", "latest"), ("explain", "latest", "1", "q07"),
                 ("promote", "latest", "1"), ("production",), ("gate", str(cfg), "--config", "1"),
                 ("sync-mlflow",), ("sweep", str(cfg), "--orchestrator", "local")):
        _one_line_naming(_cli(*args, *h), db)
    res = _cli("doctor", *h)
    assert res.exit_code == 1 and "damaged" in res.output and "doctor --repair" in res.output

    res = _cli("doctor", "--repair", *h)
    assert res.exit_code == 0, res.output
    (aside,) = home.glob("results.duckdb.damaged-*")
    assert aside.read_bytes().startswith(BROKEN)  # set aside, bytes kept: never deleted
    assert "set aside" in res.output and "repaired" in res.output
    assert "not recovered: evaluation keys" in res.output  # says what it could not recover
    res = _cli("report", "latest", "--format", "json", "--no-mlflow", *h)
    assert res.exit_code == 0, res.output
    _same_values(_rows(res), before)
    assert all(r["finished"] for r in _rows(res))
    assert _cli("doctor", *h).exit_code == 0


def test_damaged_mlflow_store_one_line_each_then_repaired(base, tmp_path, ragbench_log):
    from mlflow.tracking import MlflowClient

    home, cfg, before = _damaged_copy(base, tmp_path, "mlflow.db")
    store, h = home / "mlflow.db", ("--home", str(home))
    for args in (("promote", "latest", "1"), ("sync-mlflow",)):
        _one_line_naming(_cli(*args, *h), store)
    res = _cli("doctor", *h)
    assert res.exit_code == 1 and "damaged" in res.output and "doctor --repair" in res.output
    # the report and a sweep need MLflow for browsing only: they go on, with one warning naming file and repair
    ragbench_log.clear()
    res = _cli("report", "latest", *h)
    assert res.exit_code == 0 and "Traceback" not in res.output
    assert any(str(store) in m and "ragbench doctor --repair" in m for m in ragbench_log), ragbench_log
    ragbench_log.clear()
    res = _cli("sweep", str(cfg), "--orchestrator", "local", "--no-report", *h)
    assert res.exit_code == 0 and "Traceback" not in res.output
    assert any(str(store) in m and "ragbench doctor --repair" in m for m in ragbench_log), ragbench_log

    res = _cli("doctor", "--repair", *h)
    assert res.exit_code == 0, res.output
    (aside,) = home.glob("mlflow.db.damaged-*")
    assert aside.read_bytes().startswith(BROKEN)
    assert "not recovered: the MLflow model registry" in " ".join(res.output.split())
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("ragbench/two")
    children = client.search_runs([exp.experiment_id], filter_string="tags.`ragbench.kind` = 'config'")
    assert sorted({r.data.tags["ragbench.config_id"] for r in children}) == sorted(r["config_id"] for r in before)
    assert _cli("doctor", *h).exit_code == 0
    res = _cli("report", "latest", "--format", "json", *h)
    assert res.exit_code == 0, res.output
    _same_values(_rows(res), before)


def test_an_mlflow_store_left_mid_transaction_by_a_killed_writer_is_not_damaged(base, tmp_path, ragbench_log):
    """The journal a killed writer leaves is rolled back by the next connection, as SQLite means it to be: the sweep
    logs to MLflow (no warning, no fallback to DuckDB only), the interrupted change is gone, and the doctor is
    content."""
    from mlflow.tracking import MlflowClient

    home, cfg, before = base
    home = shutil.copytree(home, tmp_path / "home")
    store, h = home / "mlflow.db", ("--home", str(home))
    killed = subprocess.run([sys.executable, "-c", KILLED_MID_TRANSACTION, str(store)])
    assert killed.returncode == -9 and (home / "mlflow.db-journal").stat().st_size > 0

    ragbench_log.clear()
    res = _cli("sweep", str(cfg), "--orchestrator", "local", "--no-report", "--fresh", "--json", *h)
    assert res.exit_code == 0, res.output
    assert not [m for m in ragbench_log if "mlflow" in m.lower() and "unavailable" in m], ragbench_log
    assert not [m for m in ragbench_log if "doctor --repair" in m], ragbench_log
    (sweep_id,) = {r["sweep_id"] for r in _rows(res)}
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("ragbench/two")
    children = client.search_runs([exp.experiment_id], filter_string=f"tags.`ragbench.sweep_id` = '{sweep_id}'"
                                                                      " and tags.`ragbench.kind` = 'config'")
    assert sorted(r.data.tags["ragbench.config_id"] for r in children) == sorted(r["config_id"] for r in before)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 2 * (len(before) + 1)  # the earlier sweep's runs are all there, untouched
    assert "never committed" not in {v for r in runs for v in r.data.tags.values()}
    assert _cli("doctor", *h).exit_code == 0
