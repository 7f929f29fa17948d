"""End to end on the demo set through the real stack: packaged model, Qdrant Edge, DuckDB file, MLflow store."""

from __future__ import annotations

import json
import math

import duckdb
import pytest
from conftest import DEMO, SCIFACT, requires_scifact, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.sweep import run_sweep

DEMO_SWEEP = f"""name: demo-test
dataset:
  path: {DEMO}
  queries: all
chunkers:
  - kind: whole
  - kind: markdown
    prefix: breadcrumb
    max_tokens: 200
embedders:
  - model: all-MiniLM-L6-v2
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 5, 10]
"""


@pytest.fixture
def demo_cfg(tmp_path):
    return write_config(tmp_path / "demo.yaml", DEMO_SWEEP)


def test_demo_sweep_lands_in_duckdb_and_mlflow_and_reruns_from_cache(home, settings, demo_cfg):
    cfg = load_config(demo_cfg)
    first = run_sweep(cfg, settings)
    assert first.n_failed == 0 and len(first.outcomes) == 4
    assert first.vectors_computed > 0
    for o in first.outcomes:
        assert 0 < o.metrics["ndcg@10"] <= 1 and o.n_unlabelled == 2  # the two unanswerable demo queries

    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    n_q = con.execute("SELECT count(DISTINCT query_id) FROM query_metrics WHERE sweep_id = ?",
                      [first.sweep_id]).fetchall()[0][0]
    assert n_q == 34
    dup = con.execute("SELECT count(*) FROM (SELECT config_id, query_id, rank, count(*) c FROM rankings "
                      "GROUP BY ALL HAVING c > 1)").fetchall()[0][0]
    assert dup == 0
    nan_rows = con.execute("SELECT count(*) FROM query_metrics WHERE isnan(value) AND measure = 'recall_at_10'")\
        .fetchall()[0][0]
    assert nan_rows == 4 * 2  # NaN stored per unlabelled query, per config; never 1.0
    span_means = dict(con.execute(
        "SELECT measure, min(mean) FROM config_metrics WHERE measure IN ('span_recall_at_5', "
        "'evidence_recall_at_512tok', 'chunk_ndcg_at_10') GROUP BY measure").fetchall())
    assert set(span_means) == {"span_recall_at_5", "evidence_recall_at_512tok", "chunk_ndcg_at_10"}
    assert all(0 < v <= 1 for v in span_means.values())
    stats = dict(con.execute("SELECT stat, value FROM chunk_stats WHERE config_id = ?",
                             [first.outcomes[0].config_id]).fetchall())
    assert stats["chunk_count"] >= 36 and 0 <= stats["spans_split"] <= 1
    fp = con.execute("SELECT DISTINCT dataset_fingerprint FROM configs").fetchall()
    assert fp == [(first.dataset_fingerprint,)]
    con.close()

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragbench/demo-test")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("ragbench.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("ragbench.kind") == "config"]
    assert len(parents) == 1 and len(children) == 4
    child = children[0]
    assert child.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
    assert "ndcg_at_10" in child.data.metrics and child.data.params["chunker"] in ("whole", "markdown")
    assert parents[0].info.run_name == first.sweep_id
    assert {a.path for a in client.list_artifacts(child.info.run_id)} >= {"per_query.parquet", "rankings.parquet"}
    assert "chunkstat_spans_split" in child.data.metrics
    dense = [r for r in children if r.data.params.get("retriever") == "dense"]
    assert dense and all(0 <= r.data.metrics["chunkstat_tokens_never_embedded"] <= 1 for r in dense)
    plots = {a.path for a in client.list_artifacts(parents[0].info.run_id, "plots")}
    assert plots == {"plots/recall_at_k.png", "plots/evidence_recall_vs_budget.png"}

    second = run_sweep(cfg, settings)  # unchanged sweep: a new sweep record, but nothing is re-embedded
    assert second.sweep_id != first.sweep_id
    assert second.vectors_computed == 0
    assert {o.config_id: o.metrics["ndcg@10"] for o in second.outcomes} == \
        {o.config_id: o.metrics["ndcg@10"] for o in first.outcomes}


def test_changing_only_retrieval_settings_reembeds_nothing(home, settings, demo_cfg, tmp_path):
    run_sweep(load_config(demo_cfg), settings)
    changed = write_config(tmp_path / "k.yaml", DEMO_SWEEP.replace("exact: true", "exact: false\n    hnsw_ef: 32")
                           .replace("cutoffs: [1, 5, 10]", "cutoffs: [3, 10, 20]"))
    result = run_sweep(load_config(changed), settings)
    assert result.vectors_computed == 0 and result.n_failed == 0


def test_cli_json_output_for_scripts(home, demo_cfg):
    res = CliRunner().invoke(app, ["sweep", str(demo_cfg), "--orchestrator", "local", "--json", "--home", str(home)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 4
    for r in rows:
        assert set(r) >= {"config_id", "name", "spec", "metrics", "n_queries", "n_unlabelled"}
        assert r["n_queries"] == 34 and r["n_unlabelled"] == 2 and not math.isnan(r["metrics"]["ndcg_at_10"])


def test_cli_bad_config_exits_2_with_file_and_line(home, tmp_path):
    bad = write_config(tmp_path / "bad.yaml", DEMO_SWEEP.replace("max_tokens: 200", "max_tokens: -3"))
    res = CliRunner().invoke(app, ["sweep", str(bad), "--orchestrator", "local", "--home", str(home)])
    assert res.exit_code == 2
    assert "bad.yaml:9: chunkers.1.max_tokens: Input should be greater than 0" in res.output
    assert not (home / "results.duckdb").exists()  # rejected before any work


@requires_scifact()
def test_scifact_slice_bm25_and_dense(home, settings, tmp_path):
    cfg = write_config(tmp_path / "sf.yaml", f"""name: sf-slice
dataset: {{path: {SCIFACT}, max_queries: 40, max_docs: 300, seed: 3}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
output: {{mlflow: false}}
""")
    result = run_sweep(load_config(cfg), settings)
    scores = {o.spec["retriever"]["kind"]: o.metrics["ndcg@10"] for o in result.outcomes}
    # a 300-doc slice is far easier than the full corpus: both retrievers must do well above the full-corpus score
    assert scores["bm25"] > 0.7 and scores["dense"] > 0.65


@pytest.mark.parametrize("with_hybrid", [False, True], ids=["bm25+dense", "bm25+hybrid+dense"])
def test_bm25_index_is_built_once_and_dropped_when_no_config_left_searches_it(home, settings, tmp_path, monkeypatch,
                                                                              with_hybrid):
    """A chunker's BM25 index is built once for every config that searches it (BM25, library hybrid) and dropped
    after the last of them, so the dense configs' HNSW build does not sit on top of it (a gigabyte at 1M chunks)."""
    import gc
    import weakref

    from ragbench.retrieval import bm25 as bm25_module
    from ragbench.sweep.runner import LocalRunner

    built: list[weakref.ref] = []
    init = bm25_module.BM25Index.__init__

    def tracked(self, *args, **kwargs):
        init(self, *args, **kwargs)
        built.append(weakref.ref(self))

    monkeypatch.setattr(bm25_module.BM25Index, "__init__", tracked)
    alive_at_index: list[int] = []

    class Watching(LocalRunner):
        def run(self, name, fn, /, *args, **kwargs):
            if name.startswith("index"):
                gc.collect()
                alive_at_index.append(sum(r() is not None for r in built))
            return super().run(name, fn, *args, **kwargs)

    hybrid = ", {kind: hybrid}" if with_hybrid else ""
    cfg = load_config(write_config(tmp_path / "s.yaml", f"""name: release
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}{hybrid}]
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""))
    result = run_sweep(cfg, settings, runner=Watching())
    assert result.n_failed == 0 and len(built) == 1
    assert alive_at_index == [1 if with_hybrid else 0]
    gc.collect()
    assert built[0]() is None
