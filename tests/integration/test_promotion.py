"""The overnight loop end to end on the demo set, through the real stack and the CLI: a sweep, then `report` (HTML
opens, plots present, logged to MLflow), `explain`, then `promote` (refused without evidence, accepted with it),
`production`, the loadable MLflow model, the Qdrant alias and `rollback`.

Plus a fast gate test on a hand-filled store: production evaluated in another sweep on the same data is paired by
query id; production never evaluated on the data means no evidence.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from html import escape as html_escape

import polars as pl
import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.core.settings import Settings
from ragbench.promotion.collection_alias import collection_alias
from ragbench.promotion.promotion_gate import check_promotion_gate
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore
from ragbench.results.store_promotions import Promotion

SWEEP = f"""name: e2e
dataset:
  path: {DEMO}
  queries: all
chunkers:
  - kind: whole
embedders:
  - model: all-MiniLM-L6-v2
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 5, 10, 20]
"""
MINILM, M2V, BM25 = "all-MiniLM-L6-v2 | dense", "static-retrieval-m2v | dense", "bm25"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """One real sweep (BM25, MiniLM dense, Model2Vec dense on whole docs) in a fresh home, shared by the module."""
    from ragbench.config import load_config
    from ragbench.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("e2e")
    home = tmp / "home"
    from ragbench.core.settings import Settings

    result = run_sweep(load_config(write_config(tmp / "e2e.yaml", SWEEP)), Settings(home=home))
    assert result.n_failed == 0 and len(result.outcomes) == 3
    yield home, result, tmp


def _cli(*args: str, home) -> object:
    return CliRunner().invoke(app, [*args, "--home", str(home)])


def _live(home) -> dict | None:
    res = _cli("production", "--json", home=home)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_sweep_report_explain_promote_production_rollback(swept):
    home, result, tmp = swept
    store = ResultStore(home / "results.duckdb")
    cid = {name: next(o.config_id for o in result.outcomes if name in o.name) for name in (MINILM, M2V, BM25)}

    # ---- report: leaderboard on the terminal, one self-contained HTML file with plots, logged to MLflow
    res = _cli("report", "latest", "--out", str(tmp / "report"), home=home)
    assert res.exit_code == 0, res.output
    assert "wins on ndcg_at_10" in res.output and "[" in res.output  # headline with its CI
    html = (tmp / "report" / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    assert "<h2>Leaderboard</h2>" in html and all(html_escape(o.label) in html for o in result.outcomes)
    assert html.count("data:image/png;base64,") >= 2
    for png in ("leaderboard.png", "recall_curves.png"):
        assert (tmp / "report" / png).read_bytes().startswith(PNG_MAGIC)
    from mlflow.tracking import MlflowClient

    from ragbench.results.tracking import default_tracking_uri

    client = MlflowClient(tracking_uri=default_tracking_uri(Settings(home=home)))
    parent = store.sweep(result.sweep_id)["mlflow_run_id"]
    logged = {a.path for a in client.list_artifacts(parent, "report")}
    assert {"report/report.html", "report/leaderboard.png", "report/recall_curves.png"} <= logged

    # ---- explain: BM25 on q02 ("How do I fix error NMB-5021?") puts a release note above the troubleshooting guide
    res = _cli("explain", result.sweep_id, "bm25", "q02", "--show", "5", home=home)
    assert res.exit_code == 0, res.output
    assert "★" in res.output and "near misses" in res.output
    ranking = store.query("SELECT rank, doc_id FROM rankings WHERE sweep_id = ? AND config_id = ? AND query_id = 'q02' "
                          "ORDER BY rank", [result.sweep_id, cid[BM25]])
    first_rel = next(r for r, d in ranking.iter_rows() if d in ("nimbus-errors-5xxx", "nimbus-troubleshoot-storage"))
    assert f"First relevant chunk at rank {first_rel} " in res.output

    # ---- the gate. Nothing live yet: Model2Vec is significantly worse than the sweep's best -> refused
    assert _live(home) is None
    res = _cli("promote", "latest", cid[M2V], home=home)
    assert res.exit_code == 1 and "first promotion needs the best config" in res.output
    assert "p-value" in res.output
    # MiniLM is tied with the best (not distinguishable on 32 queries) -> allowed as first promotion
    res = _cli("promote", "latest", cid[MINILM], "--who", "tester", home=home)
    assert res.exit_code == 0, res.output
    live = _live(home)
    assert live["config_id"] == cid[MINILM] and live["who"] == "tester" and not live["forced"]
    assert live["dataset_fingerprint"] == result.dataset_fingerprint and live["mlflow_model_version"] == "1"
    minilm_collection = live["collection"]
    assert minilm_collection.startswith("rb_") and collection_alias(Settings(home=home)) == minilm_collection

    # Model2Vec is worse than production: refused, with the evidence (p-value) in the message, nothing changes
    res = _cli("promote", "latest", cid[M2V], home=home)
    assert res.exit_code == 1
    assert "paired randomization p-value" in res.output and "not significantly better" in res.output
    assert _live(home)["config_id"] == cid[MINILM]
    res = _cli("promote", "latest", cid[M2V], "--force", home=home)
    assert res.exit_code == 2 and "--reason" in res.output

    # forced, with a reason: recorded as such; MLflow alias, Qdrant alias and DuckDB all move
    res = _cli("promote", "latest", cid[M2V], "--force", "--reason", "smaller model for the edge box", home=home)
    assert res.exit_code == 0, res.output
    live = _live(home)
    assert live["config_id"] == cid[M2V] and live["forced"] and live["reason"] == "smaller model for the edge box"
    assert live["collection"] != minilm_collection and collection_alias(Settings(home=home)) == live["collection"]
    assert str(client.get_model_version_by_alias("ragbench-retriever", "production").version) == "2"
    res = _cli("production", home=home)
    assert res.exit_code == 0 and "static-retrieval-m2v" in res.output and "live" in res.output

    # production is a loadable retriever: same top documents as the sweep stored for the same query
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(default_tracking_uri(Settings(home=home)))
    mlflow.set_registry_uri(default_tracking_uri(Settings(home=home)))  # an earlier test may have left another
    model = mlflow.pyfunc.load_model("models:/ragbench-retriever@production")
    out = model.predict(pd.DataFrame({"query": ["How do I fix error NMB-5021?", "What is the default value of "
                                                "queue.max_inflight_bytes?"]}))
    assert set(out["query_index"]) == {0, 1} and (out.groupby("query_index").size() == 10).all()
    assert out.groupby("query_index")["score"].apply(lambda s: s.is_monotonic_decreasing).all()
    stored = store.query("SELECT doc_id FROM rankings WHERE sweep_id = ? AND config_id = ? AND query_id = 'q02' "
                         "ORDER BY rank LIMIT 10", [result.sweep_id, cid[M2V]])["doc_id"].to_list()
    assert out[out["query_index"] == 0]["doc_id"].tolist() == stored  # whole docs: one chunk per doc

    # ---- rollback: MiniLM is live again everywhere; a second rollback has nothing to go back to
    res = _cli("rollback", home=home)
    assert res.exit_code == 0, res.output
    live = _live(home)
    assert live["config_id"] == cid[MINILM] and live["mlflow_model_version"] == "1"
    assert collection_alias(Settings(home=home)) == minilm_collection
    assert str(client.get_model_version_by_alias("ragbench-retriever", "production").version) == "1"
    history = store.query("SELECT config_id, active, rolled_back_at IS NOT NULL AS rolled FROM promotions "
                          "ORDER BY promoted_at")
    assert history.rows() == [(cid[MINILM], True, False), (cid[M2V], False, True)]
    res = _cli("rollback", home=home)
    assert res.exit_code == 1 and "no previous promotion" in res.output
    aliases = json.loads((home / "qdrant-edge" / "aliases.json").read_text())
    assert aliases == {"production": minilm_collection}


# ---------------------------------------------------------------- the gate alone, on hand-made numbers
def _write(store: ResultStore, sweep_id: str, fp: str, cid: str, values: list[float]) -> None:
    pq = pl.DataFrame({"query_id": [f"q{i:02d}" for i in range(len(values))], "query_class": [None] * len(values),
                       "measure": ["ndcg@10"] * len(values), "value": values},
                      schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                              "value": pl.Float64})
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c"], "doc_id": ["d"], "score": [1.0]})
    store.write_config(sweep_id, ConfigResult(cid, f"cfg-{cid}", {"chunker": {"kind": "whole"}}, fp, measures=pq,
                                              rankings=run, n_queries=len(values), n_unlabelled=0, ms_per_query=1.0))


def test_gate_pairs_production_from_another_sweep_on_the_same_data(tmp_path):
    store = ResultStore(tmp_path / "results.duckdb")
    store.begin_sweep("old", "s", "h1", {}, "d", "fpA")
    _write(store, "old", "fpA", "prod", [0.2] * 10 + [0.4] * 10)  # mean 0.3
    store.begin_sweep("new", "s", "h2", {}, "d", "fpA")
    _write(store, "new", "fpA", "cand", [0.6] * 10 + [0.9] * 10)  # better on all 20 queries
    _write(store, "new", "fpA", "meh", [0.2] * 10 + [0.5] * 10)  # better on 10 by 0.1, tied on the rest
    store.begin_sweep("other", "s", "h3", {}, "d", "fpB")
    _write(store, "other", "fpB", "cand2", [1.0] * 20)
    with store.connect() as con:  # the store's schema has the promotions table
        con.execute("INSERT INTO promotions (promoted_at, sweep_id, config_id, name, spec_json, dataset_fingerprint, "
                    "primary_measure, active) VALUES (?, 'old', 'prod', 'cfg-prod', '{}', 'fpA', 'ndcg@10', true)",
                    [datetime.now(timezone.utc)])

    ok = check_promotion_gate(store, "new", "cand")
    # all 20 paired differences are positive: 2^20 sign vectors are few enough to enumerate, so the p-value is
    # the exact 2 / 2^20 (the observed signs and their mirror image), not a Monte Carlo floor
    assert ok.allowed and ok.n == 20 and ok.mean_diff == pytest.approx(0.45)
    assert ok.p_value == 2 / 2**20 and "from sweep old" in ok.evidence
    meh = check_promotion_gate(store, "new", "meh")
    # 10 equal positive diffs and 10 zeros: zeros are dropped (their sign changes nothing) and only 2 of the 2^10
    # sign patterns of the non-zero ones reach |sum|: exact p = 2 / 1024
    assert meh.allowed and meh.mean_diff == pytest.approx(0.05)
    assert meh.p_value == 2 / 2**10
    strict = check_promotion_gate(store, "new", "meh", alpha=0.001)  # the same evidence is not enough at a stricter level
    assert not strict.allowed and "not significantly better" in strict.evidence
    worse = check_promotion_gate(store, "old", "prod")  # production itself: already live
    assert not worse.allowed and "already in production" in worse.evidence
    none = check_promotion_gate(store, "other", "cand2")  # production never evaluated on fpB: no evidence, refused
    assert not none.allowed and "never evaluated on dataset fpB" in none.evidence and none.p_value is None


# ---------------------------------------------------------------- the promotions table alone
def _record(config_id: str, at: datetime, **changes) -> Promotion:
    fields = dict(promoted_at=at, sweep_id="s1", config_id=config_id, name=f"cfg-{config_id}",
                  spec={"chunker": {"kind": "whole"}}, dataset_fingerprint="fpA", primary_measure="ndcg_at_10",
                  primary_value=0.5, p_value=0.01, forced=False, reason=None, who="ana",
                  mlflow_model_version="1", collection=f"rb_{config_id}", active=False, evidence="e")
    return Promotion(**{**fields, **changes})


def test_promotions_are_recorded_one_live_and_restored(tmp_path):
    """record_promotion stores the record as the only live one (its active/rolled_back_at are not read);
    restore_promotion rolls the live one back and revives the earlier one; records read back field for field."""
    store = ResultStore(tmp_path / "results.duckdb")
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    first = _record("a", t0, reason="first", forced=True, p_value=None)
    second = _record("b", t0.replace(hour=1), model_name="other-model", mlflow_model_version="7", collection=None,
                     rolled_back_at=t0)
    store.record_promotion(first)
    store.record_promotion(second)
    live = store.promotion_records(active=True)
    assert live == [replace(second, active=True, rolled_back_at=None)]
    assert store.promotion_records(active=False) == [replace(first, active=False)]
    assert [p.config_id for p in store.promotion_records()] == ["b", "a"]  # newest first
    back = t0.replace(hour=2)
    store.restore_promotion(first.promoted_at, "a", rolled_back_at=back)
    assert store.promotion_records(active=True) == [replace(first, active=True)]
    assert store.promotion_records(rolled_back=True) == [replace(second, active=False, rolled_back_at=back)]
    assert store.promotion_records(before=second.promoted_at) == [replace(first, active=True)]
