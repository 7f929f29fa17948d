"""`sync-mlflow` uploads into the experiment the sweep used (``output.experiment``), not a name of its own; old
result files without the recorded experiment still open and sync into ``ragbench/<sweep name>``."""

from __future__ import annotations

import duckdb
import polars as pl
from conftest import DEMO, write_config
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore
from ragbench.results.sync import sync_mlflow
from ragbench.sweep import run_sweep

CUSTOM = f"""name: custom-exp
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
output: {{experiment: custom/exp}}
"""


def _runs(home, experiment: str) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id]) if exp else []


def test_sync_uses_the_sweeps_experiment(home, settings, tmp_path, monkeypatch):
    down = settings.replace(mlflow_tracking_uri="http://127.0.0.1:9")  # nothing listens there
    result = run_sweep(load_config(write_config(tmp_path / "c.yaml", CUSTOM)), down)
    assert result.n_failed == 0
    store = ResultStore(home / "results.duckdb")
    assert store.sweep(result.sweep_id)["experiment"] == "custom/exp"
    assert store.pending_mlflow_configs(result.sweep_id).height == 1  # MLflow was down: DuckDB only

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    res = CliRunner().invoke(app, ["sync-mlflow", "--home", str(home)])
    assert res.exit_code == 0 and "uploaded 1 config run" in res.output, res.output
    runs = _runs(home, "custom/exp")
    assert len(runs) == 2  # the sweep's parent run and its config's child run
    assert {r.data.tags.get("ragbench.sweep_id") for r in runs} == {result.sweep_id}
    assert any("ndcg_at_10" in r.data.metrics for r in runs)
    assert _runs(home, "ragbench/custom-exp") == []  # nothing landed under the default name


def test_old_store_without_experiment_opens_and_syncs_to_the_default(home, settings):
    db = home / "results.duckdb"
    home.mkdir(parents=True)
    con = duckdb.connect(str(db))  # the sweeps table as files written before the experiment column have it
    con.execute("CREATE TABLE sweeps (sweep_id VARCHAR PRIMARY KEY, name VARCHAR, spec_hash VARCHAR, "
                "spec_json VARCHAR, dataset_name VARCHAR, dataset_fingerprint VARCHAR, status VARCHAR, "
                "started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ, mlflow_run_id VARCHAR)")
    con.execute("INSERT INTO sweeps VALUES ('old-1', 'old', 'h', '{}', 'd', 'fp', 'finished', now(), now(), NULL)")
    con.close()

    store = ResultStore(db)  # adds the column; the old row keeps its values, experiment NULL
    assert store.sweep("old-1")["experiment"] is None and store.sweep("old-1")["status"] == "finished"
    store.begin_sweep("new-1", "new", "h2", {}, "d", "fp", experiment="team/new")
    assert store.sweep("new-1")["experiment"] == "team/new"
    pq = pl.DataFrame({"query_id": ["q0", "q1"], "query_class": [None, None], "measure": ["ndcg@10"] * 2,
                       "value": [1.0, 0.5]}, schema={"query_id": pl.String, "query_class": pl.String,
                                                     "measure": pl.String, "value": pl.Float64})
    run = pl.DataFrame({"query_id": ["q0"], "rank": [1], "chunk_id": ["c"], "doc_id": ["d"], "score": [1.0]})
    store.write_config("old-1", ConfigResult("cfg", "a config", {}, "fp", measures=pq, rankings=run, n_queries=2,
                                             n_unlabelled=0, ms_per_query=1.0))

    assert sync_mlflow(settings, "old-1") == 1
    assert len(_runs(home, "ragbench/old")) == 2


TWO_CONFIGS = f"""name: killed-between
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
retrievers: [{{kind: bm25}}]
"""


def test_a_resumed_sweep_logs_the_configs_a_killed_process_stored_but_never_logged(home, settings, tmp_path):
    """The window a SIGKILL can hit: a config's DuckDB write is done, its MLflow child not yet made. The resumed
    sweep evaluates nothing again, and still ends with every config a child of its parent run."""
    cfg = load_config(write_config(tmp_path / "k.yaml", TWO_CONFIGS))
    first = run_sweep(cfg, settings)
    lost = first.outcomes[0].config_id
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    child, = [r for r in _runs(home, "ragbench/killed-between") if r.data.tags.get("ragbench.config_id") == lost]
    client.delete_run(child.info.run_id)  # as if the process died before MLflow saw it
    con = duckdb.connect(str(home / "results.duckdb"))
    con.execute("UPDATE configs SET mlflow_run_id = NULL WHERE config_id = ?", [lost])
    con.execute("UPDATE sweeps SET status = 'running'")  # unfinished: the next run resumes it
    con.close()

    resumed = run_sweep(cfg, settings)
    assert resumed.sweep_id == first.sweep_id  # resumed, both configs already done
    children = [r for r in _runs(home, "ragbench/killed-between") if r.data.tags.get("ragbench.kind") == "config"]
    assert sorted(r.data.tags["ragbench.config_id"] for r in children) == sorted(o.config_id for o in first.outcomes)
    relogged, = [r for r in children if r.data.tags["ragbench.config_id"] == lost]
    assert relogged.data.metrics["ndcg_at_10"] == first.outcomes[0].metrics["ndcg@10"]
    assert ResultStore(home / "results.duckdb").pending_mlflow_configs(first.sweep_id).is_empty()
