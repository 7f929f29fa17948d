"""A real BM25 sweep on a 3-query set built to sit on the edges:

* q1 has a relevant document, q2 is judged only non-relevant (relevance 0), q3 is not judged at all: one meaning of
  "unlabelled" (no judged document with relevance > 0) everywhere -- per-query NaNs, ``Dataset.n_unlabelled``,
  ``configs.n_unlabelled``, ``config_metrics`` (rank measures and config-level rows), the leaderboard's counts;
* ``dup-a`` and ``dup-b`` have the same text, so BM25 ties them exactly: the stored ranking, the stored metric,
  trec_eval and the served answer all put ``dup-b`` first (ties by document id descending).
"""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
from conftest import write_config

from ragbench.core.settings import Settings

CORPUS = [("dup-a", "solar panels convert sunlight"), ("dup-b", "solar panels convert sunlight"),
          ("other", "wind turbines convert wind"), ("far", "the history of pottery")]
QUERIES = [("q1", "solar panels"), ("q2", "wind turbines"), ("q3", "pottery history")]
QRELS = [("q1", "dup-a", 2), ("q1", "other", 0), ("q2", "other", 0)]  # q2: judged only 0; q3: not judged


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from ragbench.config import load_config
    from ragbench.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("tiny")
    root = tmp / "ds"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": t}) + "\n"
                                               for d, t in CORPUS))
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS))
    cfg = load_config(write_config(tmp / "tiny.yaml", f"""name: tiny
dataset: {{path: {root}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{measures: [ndcg, recall, mrr], cutoffs: [1, 10]}}
output: {{mlflow: false}}
"""))
    settings = Settings(home=tmp / "home").replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 1
    from ragbench.results.store import ResultStore

    return cfg, settings, result, ResultStore(settings.home / "results.duckdb")


def test_one_meaning_of_unlabelled_everywhere(tiny):
    from ragbench.data import load_dataset
    from ragbench.evaluation.metrics import Measure, aggregate, evaluate_per_query

    cfg, _, result, store = tiny
    ds = load_dataset(cfg.dataset)
    assert ds.queries.height == 3 and ds.n_unlabelled == 2 and ds.summary()["unlabelled_queries"] == 2
    # the per-query NaNs are exactly those two queries
    empty = pl.DataFrame(schema={"query_id": pl.String, "rank": pl.Int32, "doc_id": pl.String})
    pq = evaluate_per_query(empty, ds.qrels, ["q1", "q2", "q3"], [Measure("recall", 10)])
    assert [q for q, _, v in pq.iter_rows() if math.isnan(v)] == ["q2", "q3"]
    assert aggregate(pq).row(0)[2:] == (1, 2)

    sid, o = result.sweep_id, result.outcomes[0]
    assert (o.n_queries, o.n_unlabelled) == (3, 2)  # the leaderboard prints n_queries - n_unlabelled = 1 and 2
    stored = store.query("SELECT n_queries, n_unlabelled FROM configs WHERE sweep_id = ?", [sid])
    assert stored.rows() == [(3, 2)]
    per_query = store.query("SELECT query_id, measure, value FROM query_metrics WHERE sweep_id = ? AND measure IN "
                            "('ndcg_at_10', 'recall_at_1', 'mrr_at_10')", [sid])
    assert sorted({q for q, _, v in per_query.iter_rows() if math.isnan(v)}) == ["q2", "q3"]
    counts = store.query("SELECT measure, n, n_unlabelled FROM config_metrics WHERE sweep_id = ?", [sid])
    rank_rows = counts.filter(pl.col("measure").str.contains(r"^(ndcg|recall|mrr)_at_\d+$"))
    level_rows = counts.filter(pl.col("measure").str.starts_with("reach_"))
    assert rank_rows.height == 6 and level_rows.height >= 3
    for measure, n, n_unlabelled in pl.concat([rank_rows, level_rows]).iter_rows():
        assert (n, n_unlabelled) == (1, 2), measure
    reach = store.query("SELECT mean FROM config_metrics WHERE sweep_id = ? AND measure LIKE 'reach_hit_at_%'", [sid])
    assert reach["mean"].to_list() == [1.0]  # a share of the one labelled query, not of three


def test_exact_bm25_tie_is_stored_judged_and_served_in_trec_order(tiny):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from ragbench.promotion.serving import ProductionRetriever

    cfg, settings, result, store = tiny
    sid, cid = result.sweep_id, result.outcomes[0].config_id
    ranking = store.query("SELECT rank, doc_id, score FROM rankings WHERE sweep_id = ? AND config_id = ? AND "
                          "query_id = 'q1' ORDER BY rank", [sid, cid])
    (s_b, s_a) = ranking["score"].to_list()[:2]
    assert s_a == s_b > 0  # an exact tie
    assert ranking["doc_id"].to_list()[:2] == ["dup-b", "dup-a"]  # by doc id descending
    stored = dict(store.query("SELECT measure, value FROM query_metrics WHERE sweep_id = ? AND config_id = ? AND "
                              "query_id = 'q1'", [sid, cid]).iter_rows())
    run = {"q1": {d: float(s) for _, d, s in ranking.iter_rows()}}
    trec = pytrec_eval.RelevanceEvaluator({"q1": {"dup-a": 2, "other": 0}},
                                          {"ndcg_cut.1,10", "recip_rank", "recall.1"}).evaluate(run)["q1"]
    # gain is exponential by default: label 2 -> 3 for trec_eval; one relevant document, so it cancels in nDCG
    assert stored["ndcg_at_10"] == pytest.approx(trec["ndcg_cut_10"], abs=1e-12, rel=0)
    assert stored["ndcg_at_10"] == pytest.approx(1 / math.log2(3), abs=1e-12, rel=0)
    assert stored["mrr_at_10"] == trec["recip_rank"] == 0.5
    assert stored["recall_at_1"] == trec["recall_1"] == 0.0

    spec = json.loads(store.query("SELECT spec_json FROM configs WHERE sweep_id = ?", [sid])["spec_json"][0])
    served = ProductionRetriever.from_config(spec, result.dataset_fingerprint, settings)
    try:
        docs = served.search_documents(["solar panels"], k=3)
        chunks = served.search(["solar panels"], k=2)
    finally:
        served.close()
    assert docs["doc_id"].to_list()[:2] == ["dup-b", "dup-a"] and docs["rank"].to_list()[:2] == [1, 2]
    assert chunks["doc_id"].to_list() == ["dup-b", "dup-a"]
