"""The judgment pool round trip on the demo folder: sweep, `judge pool`, fill some relevance, `judge merge`, rerun.

The rerun re-judges every config from its stored rankings (no chunk, vector or search), and every per-query
document measure then equals trec_eval's (pytrec_eval) on the merged labels; the re-judged results equal those of
a fresh evaluation on the same labels; the "before" means equal the first sweep's. Bad rows are one-line errors
naming file and line, and a pool survives a JSON Lines round trip."""

from __future__ import annotations

import csv
import json
import math
import shutil

import polars as pl
import pytest
from conftest import ROOT, write_config
from typer.testing import CliRunner

from ragbench.cli.main import app
from ragbench.config import load_config
from ragbench.data import load_dataset
from ragbench.data.judged import read_judgments
from ragbench.evaluation.judging import document_run
from ragbench.judgments.pool import PoolRow
from ragbench.judgments.pool_file import pool_rows, write_pool
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = """name: pool-test
dataset:
  format: folder
  path: {path}
  holdout: 0.3
chunkers:
  - kind: recursive
    size: 128
    overlap: 0
embedders:
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 3, 5, 10]
  gain: linear
  primary: ndcg@10
output:
  mlflow: false
"""
#: ragbench measure -> trec_eval measure (linear gain: trec_eval's nDCG)
TREC = {"ndcg": "ndcg_cut", "recall": "recall", "precision": "P"}


def _cli(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def _fill(pool_csv, out_csv) -> int:
    """Fill relevance: 2 where the passage holds the answer, 0 for each query's other first row, 1 for every
    third row left; returns how many rows were filled."""
    with open(pool_csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    seen, filled = set(), 0
    for i, row in enumerate(rows):
        if row["answer_in_passage"]:
            row["relevance"] = "2"
        elif row["query_id"] not in seen:
            row["relevance"] = "0"
        elif i % 3 == 0:
            row["relevance"] = "1"
        seen.add(row["query_id"])
        filled += row["relevance"] != ""
    with open(out_csv, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return filled


@pytest.fixture(scope="module")
def round_trip(tmp_path_factory):
    from ragbench.core.settings import Settings

    tmp = tmp_path_factory.mktemp("pool")
    folder = tmp / "docs"
    shutil.copytree(ROOT / "datasets" / "demo-folder", folder)
    home = tmp / "home"
    settings = Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    cfg = load_config(write_config(tmp / "sweep.yaml", SWEEP.format(path=folder)))
    first = run_sweep(cfg, settings)
    assert first.n_failed == 0
    code, out = _cli("judge", "pool", first.sweep_id, "--home", str(home), "--out", str(tmp / "pool.csv"))
    assert code == 0, out
    filled = _fill(tmp / "pool.csv", tmp / "filled.csv")
    code, out = _cli("judge", "merge", str(tmp / "filled.csv"), "--sweep", first.sweep_id, "--home", str(home),
                     "--judge", "ana")
    assert code == 0, out
    import logging
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    logger = logging.getLogger("ragbench")
    handler = Keep()
    logger.addHandler(handler)
    try:
        second = run_sweep(cfg, settings)
    finally:
        logger.removeHandler(handler)
    return {"tmp": tmp, "folder": folder, "home": home, "cfg": cfg, "settings": settings, "first": first,
            "second": second, "filled": filled, "log": records}


def test_pool_lists_unjudged_top_documents_of_every_config(round_trip):
    r = round_trip
    store = ResultStore(r["home"] / "results.duckdb")
    ds = load_dataset(r["cfg"].dataset)
    assert ds.primary_qrels is not None  # the judgments are merged now: the original labels are kept apart
    with open(r["tmp"] / "pool.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["query_id", "question", "doc", "passage", "votes", "best_rank", "answer_in_passage",
                             "relevance", "source", "judge", "judged_at"]
    own = set(zip(ds.primary_qrels["query_id"], ds.primary_qrels["doc_id"]))
    labelled = set(ds.primary_qrels.filter(pl.col("relevance") > 0)["query_id"])
    # the expected pool, from the stored rankings: the top-10 documents of each config
    tops = {}
    for cid in store.finished_configs(r["first"].sweep_id):
        docs = document_run(store.rankings(r["first"].sweep_id, cid)).filter(pl.col("rank") <= 10)
        tops[cid] = {(q, d): k for q, k, d in docs.select("query_id", "rank", "doc_id").iter_rows()}
    expected = {p for top in tops.values() for p in top if p not in own and p[0] in labelled}
    got = {(row["query_id"], row["doc"]) for row in rows}
    assert got == expected and len(got) == len(rows)
    texts = dict(ds.corpus.select("doc_id", "text").iter_rows())
    questions = dict(ds.queries.select("query_id", "text").iter_rows())
    for row in rows:
        pair = (row["query_id"], row["doc"])
        assert int(row["votes"]) == sum(pair in top for top in tops.values())
        assert int(row["best_rank"]) == min(top[pair] for top in tops.values() if pair in top)
        assert row["passage"] and row["passage"] in texts[row["doc"]]
        assert row["question"] == questions[row["query_id"]] and row["relevance"] == ""
    order = [(row["query_id"], -int(row["votes"])) for row in rows]
    assert order == sorted(order)
    assert any(row["answer_in_passage"] for row in rows)  # label holes the answer strings point at


def test_merge_stores_judgments_beside_the_questions_and_updates_on_remerge(round_trip):
    r = round_trip
    stored = read_judgments(r["folder"] / "judgments.csv")
    assert len(stored) == r["filled"] > 0
    assert {(j.source, j.judge) for _, j in stored} == {("person", "ana")} and all(j.judged_at for _, j in stored)
    # merging the same file again changes nothing and adds no row
    code, out = _cli("judge", "merge", str(r["tmp"] / "filled.csv"), "--sweep", r["first"].sweep_id, "--home",
                     str(r["home"]))
    assert code == 0 and "0 judgment(s) added, 0 updated" in out, out
    assert len(read_judgments(r["folder"] / "judgments.csv")) == r["filled"]


def test_rerun_rejudges_stored_rankings_without_computing_anything(round_trip):
    r = round_trip
    second = r["second"]
    assert second.sweep_id != r["first"].sweep_id and second.n_failed == 0
    assert all(o.reused_from for o in second.outcomes)  # nothing evaluated again ...
    assert sum(s.computed for s in second.embed_stats) == 0  # ... no vector computed ...
    log = "\n".join(r["log"])
    assert "re-judged from its stored rankings" in log and "chunk recursive" not in log  # ... nothing chunked


def _trec(qrels: pl.DataFrame, run: pl.DataFrame, measures: set[str]) -> dict:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    trec_qrels: dict[str, dict[str, int]] = {}
    for q, d, rel in qrels.select("query_id", "doc_id", "relevance").iter_rows():
        trec_qrels.setdefault(q, {})[d] = rel
    trec_run: dict[str, dict[str, float]] = {}
    for q, d, s in document_run(run).select("query_id", "doc_id", "score").iter_rows():
        trec_run.setdefault(q, {})[d] = s
    trec_run = {q: docs for q, docs in trec_run.items() if q in trec_qrels}
    return pytrec_eval.RelevanceEvaluator(trec_qrels, measures).evaluate(trec_run)


def test_every_per_query_measure_equals_trec_eval_on_the_merged_labels(round_trip):
    r = round_trip
    store = ResultStore(r["home"] / "results.duckdb")
    ds = load_dataset(r["cfg"].dataset)
    merged = pl.concat([ds.primary_qrels, pl.DataFrame(
        [(j.query_id, j.doc, j.relevance) for _, j in read_judgments(r["folder"] / "judgments.csv")],
        schema=ds.qrels.schema, orient="row")])
    assert merged.sort(["query_id", "doc_id"]).equals(ds.qrels.sort(["query_id", "doc_id"]))
    trec_names = {f"{name}.1,3,5,10" for name in TREC.values()}
    labelled = set(merged.filter(pl.col("relevance") > 0)["query_id"])
    changed = 0
    for cid in store.finished_configs(r["second"].sweep_id):
        run = store.rankings(r["second"].sweep_id, cid)
        theirs = _trec(merged, run, trec_names)
        ours = store.query_metrics(r["second"].sweep_id, cid)
        before = store.query_metrics(r["first"].sweep_id, cid)
        compared = 0
        for q, measure, value in ours.select("query_id", "measure", "value").iter_rows():
            name = measure.removeprefix("heldout_")
            base, _, k = name.partition("_at_")
            if base not in TREC or q is None:
                continue
            if q not in labelled:  # no relevant label: NaN here (trec_eval scores it 0 or skips it)
                assert math.isnan(value)
                continue
            trec_value = theirs[q][f"{TREC[base]}_{k}"]
            assert value == pytest.approx(trec_value, abs=1e-12), (cid, q, measure)
            compared += 1
        assert compared >= 3 * 4 * 20
        old = dict(((q, m), v) for q, m, v in before.select("query_id", "measure", "value").iter_rows())
        changed += sum(old.get((q, m)) != v for q, m, v in ours.select("query_id", "measure", "value").iter_rows()
                       if m.startswith(("ndcg", "recall")))
        # the "before" means are the first sweep's means: the same rankings on the original labels
        means, first = store.config_means(r["second"].sweep_id, cid), store.config_means(r["first"].sweep_id, cid)
        for m in ("ndcg_at_10", "recall_at_10", "judged_at_10", "heldout_ndcg_at_10"):
            assert means[f"unpooled_{m}" if not m.startswith("heldout_") else f"heldout_unpooled_{m[8:]}"] == \
                pytest.approx(first[m], abs=1e-12), m
        assert means["judged_at_10"] > first["judged_at_10"]  # more of the top 10 is judged now
    assert changed > 0  # the judgments moved some per-query values


def test_rejudged_results_equal_a_fresh_evaluation(round_trip):
    r = round_trip
    fresh = run_sweep(r["cfg"], r["settings"], fresh=True)
    store = ResultStore(r["home"] / "results.duckdb")
    for cid in store.finished_configs(fresh.sweep_id):
        a = store.query_metrics(r["second"].sweep_id, cid).sort(["query_id", "measure"])
        b = store.query_metrics(fresh.sweep_id, cid).sort(["query_id", "measure"])
        assert a.equals(b), cid
        ma, mb = store.config_means(r["second"].sweep_id, cid), store.config_means(fresh.sweep_id, cid)
        for m in [m for m in mb if m.startswith(("reach_", "unpooled_", "heldout_unpooled_", "document_depth"))]:
            assert ma[m] == pytest.approx(mb[m], abs=1e-12, nan_ok=True), m
        da = store.query("SELECT query_id, first_relevant_rank, category FROM query_diagnostics WHERE sweep_id = ? "
                         "AND config_id = ? ORDER BY query_id", [r["second"].sweep_id, cid])
        db = store.query("SELECT query_id, first_relevant_rank, category FROM query_diagnostics WHERE sweep_id = ? "
                         "AND config_id = ? ORDER BY query_id", [fresh.sweep_id, cid])
        assert da.equals(db), cid


@pytest.mark.parametrize("edit, message", [
    ({"relevance": "5"}, "relevance '5' must be blank (not judged) or an integer 0-3"),
    ({"relevance": "yes"}, "relevance 'yes' must be blank"),
    ({"relevance": "1", "doc": "guide/nowhere.md"}, "document 'guide/nowhere.md' is not in dataset"),
    ({"relevance": "1", "query_id": "q999"}, "query 'q999' is not in dataset"),
    ({"relevance": "1", "source": "robot"}, "source 'robot' must be 'person' or 'assessor:<model>'"),
])
def test_a_bad_row_is_one_line_naming_file_and_line(round_trip, tmp_path, edit, message):
    r = round_trip
    with open(r["tmp"] / "pool.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    rows[2].update(edit)
    line = 2 + sum(row["passage"].count("\n") + 1 for row in rows[:2])  # the header, then two (multi-line) rows
    bad = tmp_path / "bad.csv"
    with open(bad, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    before = (r["folder"] / "judgments.csv").read_bytes()
    code, out = _cli("judge", "merge", str(bad), "--sweep", r["first"].sweep_id, "--home", str(r["home"]))
    errors = [text for text in out.splitlines() if text.startswith("error:")]  # (info lines of loading apart)
    assert code == 2 and len(errors) == 1 and out.strip().endswith(errors[0]), out
    assert errors[0].startswith(f"error: {bad}:{line}: ") and message in errors[0], out
    assert (r["folder"] / "judgments.csv").read_bytes() == before  # nothing stored


def test_a_row_the_dataset_already_labels_is_refused(round_trip, tmp_path):
    r = round_trip
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"query_id": "q01", "doc": "reference/nimbus-config-queue.md", "relevance": 0}) + "\n")
    code, out = _cli("judge", "merge", str(bad), "--sweep", r["first"].sweep_id, "--home", str(r["home"]))
    assert code == 2 and f"{bad}:1: (q01, reference/nimbus-config-queue.md) is already labelled" in out, out


def test_jsonl_round_trip(round_trip, tmp_path):
    r = round_trip
    code, out = _cli("judge", "pool", r["first"].sweep_id, "--home", str(r["home"]), "--format", "jsonl", "--out",
                     str(tmp_path / "pool.jsonl"))
    assert code == 0, out
    rows = pool_rows(tmp_path / "pool.jsonl")
    assert rows and all(isinstance(row, PoolRow) for row in rows)
    first = json.loads((tmp_path / "pool.jsonl").read_text().splitlines()[0])
    assert first["relevance"] is None and isinstance(first["answer_in_passage"], list)
    filled = [PoolRow(**{**row.__dict__, "relevance": i % 4}) for i, row in enumerate(rows)]
    for name in ("again.jsonl", "again.csv"):
        write_pool(filled, tmp_path / name)
        assert pool_rows(tmp_path / name) == filled, name


def test_report_shows_each_config_before_and_after_the_pooled_judgments(round_trip):
    from ragbench.reporting.model import build_report
    from ragbench.reporting.render_html import render_html
    from ragbench.reporting.render_json import report_json
    from ragbench.reporting.render_markdown import leaderboard_markdown

    r = round_trip
    store = ResultStore(r["home"] / "results.duckdb")
    assert build_report(store, r["first"].sweep_id).pooled is None  # no judgment added yet: no section
    report = build_report(store, r["second"].sweep_id)
    rows = {p.config_id: p for p in report.pooled.rows}
    assert set(rows) == store.finished_configs(r["second"].sweep_id)
    for cid, p in rows.items():
        before = store.config_means(r["first"].sweep_id, cid)
        after = store.config_means(r["second"].sweep_id, cid)
        assert (p.before, p.after) == (pytest.approx(before["ndcg_at_10"]), pytest.approx(after["ndcg_at_10"]))
        assert (p.judged_before, p.judged_after) == (pytest.approx(before["judged_at_10"]),
                                                     pytest.approx(after["judged_at_10"]))
    assert [p.after for p in report.pooled.rows] == sorted((p.after for p in report.pooled.rows), reverse=True)
    pooled = json.loads(report_json(report).splitlines()[0])["pooled"]
    assert pooled["primary"] == "ndcg_at_10" and len(pooled["configs"]) == len(rows)
    some = report.pooled.rows[0]
    assert f"{some.label}: {some.before:.3f} -> {some.after:.3f}" in leaderboard_markdown(report)
    assert "<table id='pooled'>" in render_html(report, {})
