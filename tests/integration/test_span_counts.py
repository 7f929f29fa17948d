"""Span measures count unlabelled queries one way: on the demo with gold spans for only half its queries, the count of
queries without evidence is the same in ``configs``, in ``config_metrics`` (every span-family measure), in the report
("N scored, M without evidence") and on the config's MLflow run; rank measures keep their own count (queries
without a relevant document)."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.reporting.report import build_report, report_text, write_html_report
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SPAN_FAMILY = ("span_", "evidence_recall", "chunks_in_budget", "chunk_")


@pytest.fixture(scope="module")
def half_spans(tmp_path_factory):
    """A copy of the demo keeping the gold spans of the first half of its span-labelled queries, and a sweep of
    two chunkers with BM25 on it (MLflow on, in SQLite under the home)."""
    tmp = tmp_path_factory.mktemp("half")
    ds = tmp / "ds"
    shutil.copytree(DEMO, ds)
    rows = [json.loads(line) for line in (ds / "spans" / "test.jsonl").read_text().splitlines() if line.strip()]
    labelled = sorted({r["query_id"] for r in rows if r["relevance"] > 0})
    kept = set(labelled[: len(labelled) // 2])
    (ds / "spans" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["query_id"] in kept))
    n_queries = sum(1 for line in (ds / "queries.jsonl").read_text().splitlines() if line.strip())
    cfg = write_config(tmp / "s.yaml", f"""name: half-spans
dataset: {{path: {ds}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [5, 10], budgets: [256]}}
""")
    home = tmp / "home"
    from ragbench.core.settings import Settings

    settings = Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    result = run_sweep(load_config(cfg), settings)
    assert result.n_failed == 0
    return home, result.sweep_id, n_queries, n_queries - len(kept)


def test_configs_and_config_metrics_agree_per_measure_family(half_spans):
    home, sweep_id, n_queries, without = half_spans
    store = ResultStore(home / "results.duckdb")
    configs = store.query("SELECT config_id, n_queries, n_unlabelled, n_without_evidence FROM configs "
                          "WHERE sweep_id = ?", [sweep_id])
    assert configs.height == 2
    assert configs["n_without_evidence"].to_list() == [without, without]
    assert set(configs["n_queries"]) == {n_queries}
    rank_unlabelled = configs["n_unlabelled"][0]
    assert rank_unlabelled < without  # the two unanswerable demo queries: a family of its own
    metrics = store.query("SELECT config_id, measure, n, n_unlabelled FROM config_metrics WHERE sweep_id = ?",
                          [sweep_id])
    per_query = set(store.query("SELECT DISTINCT measure FROM query_metrics WHERE sweep_id = ?",
                                [sweep_id])["measure"])
    span_rows = metrics.filter(metrics["measure"].is_in([m for m in per_query if m.startswith(SPAN_FAMILY)]))
    assert span_rows.height >= 2 * 8  # span_recall@5/10, precision, iou, contained, max, evidence, chunk_ndcg ...
    assert set(span_rows["n_unlabelled"]) == {without} and set(span_rows["n"]) == {n_queries - without}
    rank_rows = metrics.filter(metrics["measure"].is_in(["ndcg_at_10", "recall_at_5"]))
    assert rank_rows.height == 4 and set(rank_rows["n_unlabelled"]) == {rank_unlabelled}
    # and the scored count is what the per-query values hold: no span-family value NaN for a query with evidence
    nan = store.query("SELECT measure, count(*) FILTER (WHERE isnan(value)) AS nan FROM query_metrics "
                      "WHERE sweep_id = ? GROUP BY config_id, measure", [sweep_id])
    assert set(nan.filter(nan["measure"].is_in(span_rows["measure"]))["nan"]) == {without}


def test_report_and_mlflow_say_the_same_count(half_spans):
    home, sweep_id, n_queries, without = half_spans
    store = ResultStore(home / "results.duckdb")
    report = build_report(store, sweep_id, n_resamples=200)
    said = f"Span measures: {n_queries - without} scored, {without} without evidence."
    html = write_html_report(store, sweep_id, home / "report", log_to_mlflow=False, report=report)
    for text in (report_text(report, "markdown"), html.read_text(encoding="utf-8")):
        assert said in text and text.count("without evidence") == 1
    from mlflow.tracking import MlflowClient

    runs = store.query("SELECT mlflow_run_id FROM configs WHERE sweep_id = ?", [sweep_id])["mlflow_run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    assert [client.get_run(r).data.metrics["n_without_evidence"] for r in runs] == [without, without]


def test_evidence_no_chunk_touches_scores_zero_and_stays_labelled():
    """A query whose gold span lies in characters no chunk holds retrieved nothing relevant (0), like span recall;
    only a query without evidence is unlabelled, in every span-family measure alike."""
    import polars as pl

    from ragbench.chunking import CHUNK_SCHEMA
    from ragbench.core.schemas import SPANS_SCHEMA
    from ragbench.evaluation.metrics import Measure
    from ragbench.evaluation.spans import chunk_level_run_metrics, span_metrics, without_evidence
    from ragbench.retrieval import RUN_SCHEMA

    text = "a" * 10 + "\n" * 20 + "b" * 10
    chunks = pl.DataFrame([("c1", "A", 0, 0, 10, text[:10], ""), ("c2", "A", 1, 30, 40, text[30:], "")],
                          schema=CHUNK_SCHEMA, orient="row")
    spans = pl.DataFrame([("q1", "A", 12, 20, 1)], schema=SPANS_SCHEMA, orient="row")  # inside the gap
    run = pl.DataFrame([("q1", 1, "c1", "A", 1.0), ("q2", 1, "c2", "A", 1.0)], schema=RUN_SCHEMA, orient="row")
    qids = ["q1", "q2"]
    chunk = chunk_level_run_metrics(run, chunks, spans, [Measure("ndcg", 10)], query_ids=qids)
    values = dict(zip(chunk["query_id"], chunk["value"]))
    assert values["q1"] == 0.0 and values["q2"] != values["q2"]  # q2 has no evidence: NaN
    per_query = pl.concat([span_metrics(run, chunks, spans, [10], query_ids=qids).select(chunk.columns), chunk])
    assert without_evidence(per_query) == 1
    assert without_evidence(chunk) is None  # no span measure: no count


def test_sync_mlflow_uploads_the_same_count(half_spans):
    """A config that reached only DuckDB (MLflow down during the sweep) gets the count on its run from sync-mlflow."""
    import duckdb
    from mlflow.tracking import MlflowClient

    from ragbench.core.settings import Settings
    from ragbench.results.sync import sync_mlflow

    home, sweep_id, _, without = half_spans
    con = duckdb.connect(str(home / "results.duckdb"))
    con.execute("UPDATE configs SET mlflow_run_id = NULL WHERE sweep_id = ?", [sweep_id])
    con.close()
    uri = f"sqlite:///{home / 'later.db'}"
    assert sync_mlflow(Settings.from_env(home=home).replace(mlflow_tracking_uri=uri, qdrant_url=None)) == 2
    runs = ResultStore(home / "results.duckdb").query("SELECT mlflow_run_id FROM configs WHERE sweep_id = ?",
                                                      [sweep_id])["mlflow_run_id"]
    client = MlflowClient(tracking_uri=uri)
    assert [client.get_run(r).data.metrics["n_without_evidence"] for r in runs] == [without, without]
