"""A sweep that would record nothing new is up to date: `ragbench sweep` prints the newest sweep's leaderboard and
records nothing (no sweep in DuckDB, no MLflow run, no report drawn again), and anything a run would record
differently makes it record again: `--again`, a promotion, an edited report, other labels, another MLflow store,
another sweep under the same name in between, another MLflow experiment, a new measure or evaluation version, a
deleted MLflow run, a result waiting in the spool, a config MLflow missed; a sweep run without its report stands for
a rerun without one."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import ROOT, write_config
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.evaluation.measures import MEASURE_VERSIONS
from ragbench.results.store import ResultStore
from ragbench.sweep import evaluate

SWEEP = """name: fresh-check
dataset: {{path: {path}, split: test, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
embedders: []
retrievers: [{{kind: bm25}}]
"""


def _sweep(cfg, home, *extra, env=None):
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(home), *extra],
                             env=env, terminal_width=200)
    assert res.exit_code == 0, res.output
    return res.output


def _sweeps(home) -> list[str]:
    return ResultStore(home / "results.duckdb").sweep_ids()


def _mlflow_runs(home) -> int:
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    return sum(len(client.search_runs([e.experiment_id])) for e in client.search_experiments())


@pytest.fixture
def swept(tmp_path):
    data = tmp_path / "demo"
    shutil.copytree(ROOT / "datasets" / "demo", data)
    cfg = write_config(tmp_path / "sweep.yaml", SWEEP.format(path=data))
    home = tmp_path / "home"
    out = _sweep(cfg, home)
    assert "up to date" not in out and len(_sweeps(home)) == 1
    return cfg, home, data


def test_an_unchanged_rerun_records_nothing_and_prints_the_newest_sweep(swept):
    cfg, home, _ = swept
    first, runs = _sweeps(home)[0], _mlflow_runs(home)
    report = home / "reports" / first / "report.html"
    written = report.stat().st_mtime_ns
    out = _sweep(cfg, home)
    assert f"up to date: nothing changed since sweep {first}" in out
    assert f"report: {report}" in out and "MLflow: parent run" in out and "BM25" in out  # the leaderboard
    assert _sweeps(home) == [first] and _mlflow_runs(home) == runs and report.stat().st_mtime_ns == written
    plan = CliRunner().invoke(app, ["plan", str(cfg), "--home", str(home), "--json"])
    assert json.loads(plan.stdout)["up_to_date"] == first                    # the plan says so before the run
    before = report.read_bytes()
    assert CliRunner().invoke(app, ["report", "latest", "--home", str(home), "--measure", "mrr@10"]).exit_code == 0
    assert report.read_bytes() != before                                      # written again by ragbench, other
    assert f"nothing changed since sweep {first}" in _sweep(cfg, home)       # still up to date
    out = _sweep(cfg, home, "--again")                       # asked for: a new sweep, reusing every config
    assert "up to date" not in out and len(_sweeps(home)) == 2 and _mlflow_runs(home) == runs + 3
    newest = _sweeps(home)[0]
    assert f"nothing changed since sweep {newest}" in _sweep(cfg, home)  # the newest is the one that stands
    assert len(_sweeps(home)) == 2
    CliRunner().invoke(app, ["promote", "latest", "1", "--home", str(home), "--force", "--reason", "test"])
    plan = CliRunner().invoke(app, ["plan", str(cfg), "--home", str(home), "--json"])
    assert json.loads(plan.stdout)["up_to_date"] is None


def test_a_promotion_an_edited_report_or_other_labels_make_it_record_again(swept):
    cfg, home, data = swept
    CliRunner().invoke(app, ["promote", "latest", "1", "--home", str(home), "--force", "--reason", "test"])
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 2      # against production reads anew
    report = home / "reports" / _sweeps(home)[0] / "report.html"
    report.write_text(report.read_text() + "<!-- edited -->")
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 3      # a damaged report is not trusted
    assert "up to date" in _sweep(cfg, home)
    qrels = data / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text().replace("q01\tnimbus-errors-4xxx\t2", "q01\tnimbus-errors-4xxx\t1"))  # a grade
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 4


def test_another_sweep_in_between_or_another_mlflow_store_make_it_record_again(swept, tmp_path):
    cfg, home, data = swept
    wider = write_config(tmp_path / "wider.yaml", SWEEP.format(path=data).replace("overlap: 0}]",
                                                                                  "overlap: 0}, {kind: sentences}]"))
    _sweep(wider, home)                                                             # same name, other spec
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 3
    elsewhere = write_config(tmp_path / "elsewhere.yaml", SWEEP.format(path=data) + "output: {experiment: elsewhere}\n")
    assert "up to date" not in _sweep(elsewhere, home) and len(_sweeps(home)) == 4  # another MLflow experiment
    assert "up to date" in _sweep(elsewhere, home)
    other = f"sqlite:///{tmp_path / 'other-mlflow.db'}"
    assert "up to date" not in _sweep(elsewhere, home, env={"MLFLOW_TRACKING_URI": other})
    assert len(_sweeps(home)) == 5
    assert "up to date" in _sweep(elsewhere, home, env={"MLFLOW_TRACKING_URI": other})


def test_new_evaluation_code_makes_it_record_again(swept, monkeypatch):
    cfg, home, _ = swept
    monkeypatch.setitem(MEASURE_VERSIONS, "mrr", 2)          # a measure's code changed: recomputed, recorded
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 2
    assert "up to date" in _sweep(cfg, home)
    monkeypatch.setattr(evaluate, "EVALUATION_VERSION", evaluate.EVALUATION_VERSION + 1)  # every key changes
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 3


def test_the_nightly_flow_records_nothing_when_up_to_date(swept):
    """What a deployment's run does on a night with nothing new: the flow's own check, before any task."""
    from flows.sweep import PUBLISHED, sweep_flow

    cfg, home, _ = swept
    first = _sweeps(home)[0]
    result = sweep_flow.fn(str(cfg), home=str(home))
    assert result.up_to_date and result.sweep_id == first and len(result.outcomes) == 2
    assert PUBLISHED.pop(first).html == home / "reports" / first / "report.html" and _sweeps(home) == [first]


def test_a_deleted_mlflow_run_a_waiting_spool_or_an_unlogged_config_make_it_record_again(swept):
    """What the check reads besides the sweep: the SQLite tracking store's runs, the spool, the configs' MLflow runs."""
    import duckdb

    from ragbench.results.spool import Spool

    cfg, home, _ = swept
    client = MlflowClient(f"sqlite:///{home / 'mlflow.db'}")
    store = ResultStore(home / "results.duckdb")
    client.delete_run(store.sweep(_sweeps(home)[0])["mlflow_run_id"])       # the parent run, deleted in the UI
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 2
    assert "up to date" in _sweep(cfg, home)
    newest = _sweeps(home)[0]
    parent = store.sweep(newest)["mlflow_run_id"]
    experiment = client.get_run(parent).info.experiment_id
    child = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parent}'")[0]
    client.delete_run(child.info.run_id)                                      # one config's run
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 3
    newest = _sweeps(home)[0]
    with duckdb.connect(str(home / "results.duckdb")) as con:                 # MLflow was down for one config
        con.execute("UPDATE configs SET mlflow_run_id = NULL WHERE sweep_id = ? AND config_id = "
                    "(SELECT min(config_id) FROM configs WHERE sweep_id = ?)", [newest, newest])
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 4
    newest = _sweeps(home)[0]
    row = store.config(newest, sorted(store.stored_config_metrics(newest))[0])
    Spool(home).put_failure(newest, row["config_id"], row["name"], json.loads(row["spec_json"]),
                            row["dataset_fingerprint"], "written while the results file was held")
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 5  # merged first, then recorded
    assert Spool(home).count() == 0 and "up to date" in _sweep(cfg, home)


def test_a_sweep_run_without_its_report_stands_for_a_rerun_without_one(tmp_path):
    """`--no-report` leaves a stamp saying so: its rerun without a report is up to date, one that wants the report
    records a sweep that has it."""
    data = tmp_path / "demo"
    shutil.copytree(ROOT / "datasets" / "demo", data)
    cfg = write_config(tmp_path / "sweep.yaml", SWEEP.format(path=data))
    home = tmp_path / "home"
    assert "up to date" not in _sweep(cfg, home, "--no-report") and len(_sweeps(home)) == 1
    first, runs = _sweeps(home)[0], _mlflow_runs(home)
    assert not (home / "reports" / first / "report.html").exists()
    out = _sweep(cfg, home, "--no-report")
    assert f"nothing changed since sweep {first}" in out and "results and MLflow run (no report) stand" in out
    assert _sweeps(home) == [first] and _mlflow_runs(home) == runs
    for flag, standing in (("--no-report", first), ("--report", None)):               # the plan says as much
        plan = CliRunner().invoke(app, ["plan", str(cfg), "--home", str(home), "--json", flag])
        assert json.loads(plan.stdout)["up_to_date"] == standing
    from flows.sweep import PUBLISHED, sweep_flow

    assert sweep_flow.fn(str(cfg), home=str(home), publish=False).up_to_date          # a deployment without one
    assert PUBLISHED.pop(first).html is None and _sweeps(home) == [first]
    assert "up to date" not in _sweep(cfg, home) and len(_sweeps(home)) == 2          # the report is wanted now
    newest = _sweeps(home)[0]
    assert (home / "reports" / newest / "report.html").is_file()
    assert f"nothing changed since sweep {newest}" in _sweep(cfg, home, "--no-report")  # a report is no harm
    assert f"nothing changed since sweep {newest}" in _sweep(cfg, home)
