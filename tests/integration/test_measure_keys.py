"""One spelling of every measure: the MLflow-safe key (``ndcg_at_10``) is what DuckDB stores and every tool prints;
the ``@`` spelling is accepted wherever a measure is named, and a results file written before keys is migrated
when it is opened."""

from __future__ import annotations

import math

import duckdb
import polars as pl

from ragbench.core.measure_keys import MeasureMap, measure_key
from ragbench.reporting.report import build_report
from ragbench.results.outcomes import ConfigOutcome, ConfigResult
from ragbench.results.store import ResultStore


def test_measure_key_is_mlflow_safe_and_idempotent():
    from mlflow.utils.validation import validate_param_and_metric_name

    for written, key in (("ndcg@10", "ndcg_at_10"), ("evidence_recall@512tok", "evidence_recall_at_512tok"),
                         ("reach_hit@10/50", "reach_hit_at_10_of_50"), ("n_queries", "n_queries")):
        assert measure_key(written) == key == measure_key(key)
        assert validate_param_and_metric_name(key)  # MLflow would reject "ndcg@10"
    m = MeasureMap({"ndcg@10": 0.5})
    assert list(m) == ["ndcg_at_10"] and m["ndcg@10"] == m["ndcg_at_10"] == m.get("ndcg@10") == 0.5
    assert "ndcg@10" in m and "mrr@10" not in m and m.get("mrr@10", 1.0) == 1.0
    assert ConfigOutcome("c", "n", {}, "finished", {"recall@5": 0.1}).metrics["recall_at_5"] == 0.1


def _result(cid: str, values: list[float]) -> ConfigResult:
    pq = pl.DataFrame({"query_id": [f"q{i}" for i in range(len(values))], "query_class": [None] * len(values),
                       "measure": ["ndcg@10"] * len(values), "value": values})
    run = pl.DataFrame({"query_id": ["q0"], "rank": [1], "chunk_id": ["c"], "doc_id": ["d"], "score": [1.0]})
    return ConfigResult(cid, f"cfg {cid}", {"chunker": {"kind": "whole"}}, "fp", measures=pq, rankings=run,
                        n_queries=len(values), n_unlabelled=0, ms_per_query=1.0)


def test_results_are_stored_under_keys_and_read_in_either_spelling(tmp_path):
    store = ResultStore(tmp_path / "results.duckdb")
    store.begin_sweep("s1", "s", "h", {"metrics": {"primary": "ndcg@10"}}, "d", "fp")
    r = _result("a" * 16, [1.0, 0.5, 0.0])
    assert r.means() == {"ndcg_at_10": 0.5} and r.value("ndcg@10") == r.value("ndcg_at_10") == 0.5
    store.write_config("s1", r)
    store.write_config("s1", _result("b" * 16, [0.0, 0.5, 0.0]))
    assert store.query("SELECT DISTINCT measure FROM query_metrics")["measure"].to_list() == ["ndcg_at_10"]
    assert store.measure_values("s1", "a" * 16, "ndcg@10")["value"].to_list() == [1.0, 0.5, 0.0]
    assert store.per_query_values("s1", ["ndcg@10"]).height == 6
    rep = build_report(store, "s1", primary="ndcg@10", n_resamples=200)
    assert rep.primary == "ndcg_at_10" and rep.best == "a" * 16


def test_a_results_file_written_with_at_names_is_migrated_when_opened(tmp_path):
    path = tmp_path / "results.duckdb"
    ResultStore(path)  # today's schema
    con = duckdb.connect(str(path))
    con.execute("INSERT INTO sweeps (sweep_id, name, spec_json, dataset_fingerprint, status) VALUES "
                "('old', 'old', '{\"metrics\": {\"primary\": \"ndcg@10\"}}', 'fp', 'finished')")
    con.execute("INSERT INTO configs (sweep_id, config_id, name, spec_json, status) VALUES "
                "('old', 'c1', 'c1', '{}', 'finished'), ('old', 'c2', 'c2', '{}', 'finished')")
    for cid, v in (("c1", 0.9), ("c2", 0.1)):
        con.execute("INSERT INTO config_metrics VALUES ('old', ?, 'ndcg@10', ?, 2, 0), "
                    "('old', ?, 'reach_hit@10/50', 1.0, 2, 0)", [cid, v, cid])
        con.execute("INSERT INTO query_metrics VALUES ('old', ?, 'q1', NULL, 'ndcg@10', ?), "
                    "('old', ?, 'q2', NULL, 'ndcg@10', ?)", [cid, v, cid, v])
    con.close()

    store = ResultStore(path)  # an older ragbench wrote this file: opening it rewrites the names to keys
    assert sorted(store.query("SELECT DISTINCT measure FROM config_metrics")["measure"].to_list()) == [
        "ndcg_at_10", "reach_hit_at_10_of_50"]
    assert store.query("SELECT DISTINCT measure FROM query_metrics")["measure"].to_list() == ["ndcg_at_10"]
    rep = build_report(store, "old", n_resamples=200)
    assert rep.primary == "ndcg_at_10" and rep.best == "c1"
    board = store.leaderboard("old")
    assert not math.isnan(board.filter(pl.col("config_id") == "c1")["ndcg_at_10"][0])
    assert "ndcg@10" not in board.columns  # nothing stays in the old spelling
