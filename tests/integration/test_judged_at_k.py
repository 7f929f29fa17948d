"""judged@k (label coverage) equals ir_measures' ``Judged@k``: a constructed case with judged non-relevant and
unjudged documents and short runs, BM25 on the demo dataset and on a SciFact slice; and it is kept out of the
primary measure and of the chunk-level measures."""

from __future__ import annotations

import math

import bm25s
import polars as pl
import pytest
from conftest import DEMO, SCIFACT, requires_scifact

from ragbench.config import DatasetSpec
from ragbench.data import load_dataset
from ragbench.evaluation.metrics import Measure, MetricsSpec, evaluate_per_query

ir_measures = pytest.importorskip("ir_measures")
CUTOFFS = (1, 3, 5, 10, 20)


def _ours(run: pl.DataFrame, qrels: pl.DataFrame, qids: list[str]) -> dict[tuple[str, int], float]:
    out = evaluate_per_query(run, qrels, qids, [Measure("judged", k) for k in CUTOFFS])
    return {(q, int(m.split("@")[1])): v for q, m, v in out.iter_rows()}


def _reference(run: pl.DataFrame, qrels: pl.DataFrame) -> dict[tuple[str, int], float]:
    """ir_measures on the same ranked lists: scores made strictly decreasing in our rank order, so that its own
    tie rule (doc id ascending) cannot reorder what ours (trec_eval's, doc id descending) ranked."""
    ranked = run.sort(["query_id", "score", "doc_id"], descending=[False, True, True])
    ranked = ranked.with_columns(pl.int_range(pl.len()).over("query_id").alias("r"))
    ir_run = [ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in ranked.select("query_id", "doc_id", "r")
              .iter_rows()]
    ir_qrels = [ir_measures.Qrel(q, d, int(r)) for q, d, r in qrels.iter_rows()]
    return {(m.query_id, m.measure.params["cutoff"]): m.value
            for m in ir_measures.iter_calc([ir_measures.Judged @ k for k in CUTOFFS], ir_qrels, ir_run)}


def _compare(run: pl.DataFrame, qrels: pl.DataFrame, qids: list[str]) -> int:
    ours, ref = _ours(run, qrels, qids), _reference(run, qrels)
    labelled = set(qrels.filter(pl.col("relevance") > 0)["query_id"])
    checked = 0
    for (q, k), v in ours.items():
        if q not in labelled:
            assert math.isnan(v)  # unlabelled: NaN like every rank measure
        elif (q, k) in ref:
            assert v == pytest.approx(ref[(q, k)], abs=1e-12), (q, k)
            checked += 1
        else:  # ir_measures skips a query that retrieved nothing; ours judges no document of it
            assert v == 0.0 and not run.filter(pl.col("query_id") == q).height
    return checked


def _bm25_run(ds, depth: int = 20) -> pl.DataFrame:
    ids, texts = ds.corpus["doc_id"].to_list(), (ds.corpus["title"] + " " + ds.corpus["text"]).to_list()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    qids, queries = ds.queries["query_id"].to_list(), ds.queries["text"].to_list()
    docs, scores = retriever.retrieve(bm25s.tokenize(queries, stopwords="en", show_progress=False),
                                      k=min(depth, len(ids)), show_progress=False)
    rows = [(q, r + 1, ids[d], float(s)) for q, row, srow in zip(qids, docs, scores)
            for r, (d, s) in enumerate(zip(row, srow)) if s > 0]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "rank": pl.Int32, "doc_id": pl.String,
                                      "score": pl.Float64}, orient="row")


def test_judged_counts_judged_non_relevant_and_not_unjudged_documents():
    qrels = pl.DataFrame({"query_id": ["a", "a", "a", "b", "c"], "doc_id": ["d1", "d2", "d3", "d1", "d9"],
                          "relevance": [2, 0, 0, 1, 0]}, schema={"query_id": pl.String, "doc_id": pl.String,
                                                                 "relevance": pl.Int32})
    # a: d2 (judged 0), x (unjudged), d1 (relevant), y, z; b: two documents only; c: judged 0 only (unlabelled)
    run = pl.DataFrame({"query_id": ["a"] * 5 + ["b"] * 2 + ["c"], "rank": [1, 2, 3, 4, 5, 1, 2, 1],
                        "doc_id": ["d2", "x", "d1", "y", "z", "x", "d1", "d9"],
                        "score": [5.0, 4.0, 3.0, 2.0, 1.0, 2.0, 1.0, 1.0]})
    ours = _ours(run, qrels, ["a", "b", "c", "d"])
    assert ours[("a", 1)] == 1.0 and ours[("a", 3)] == pytest.approx(2 / 3) and ours[("a", 5)] == pytest.approx(0.4)
    assert ours[("b", 10)] == 0.5  # divided by the documents retrieved when fewer than k, as ir_measures
    assert math.isnan(ours[("c", 1)]) and math.isnan(ours[("d", 1)])
    assert _compare(run, qrels, ["a", "b", "c"]) == 2 * len(CUTOFFS)


def test_judged_equals_ir_measures_on_bm25_over_the_demo():
    ds = load_dataset(DatasetSpec(format="beir", path=DEMO))
    run = _bm25_run(ds)
    assert _compare(run, ds.qrels, ds.queries["query_id"].to_list()) >= 5 * ds.qrels["query_id"].n_unique() - 5
    values = _ours(run, ds.qrels, ds.queries["query_id"].to_list())
    assert any(0 < v < 1 for (q, k), v in values.items() if k == 10)  # neither trivially 0 nor 1


@requires_scifact()
def test_judged_equals_ir_measures_on_bm25_over_a_scifact_slice():
    ds = load_dataset(DatasetSpec(format="beir", path=SCIFACT, max_queries=80, max_docs=300, seed=3))
    run = _bm25_run(ds)
    assert _compare(run, ds.qrels, ds.queries["query_id"].to_list()) >= 200


def test_judged_is_never_the_primary_and_never_a_chunk_measure():
    from ragbench.evaluation.spans import chunk_level_run_metrics

    with pytest.raises(ValueError, match="label coverage"):
        MetricsSpec(primary="judged@10")
    spec = MetricsSpec(measures=("ndcg",))
    assert spec.measures == ("ndcg",) and spec.rank_measures == ("ndcg", "judged")  # always stored, key unchanged
    chunks = pl.DataFrame({"chunk_id": ["c1"], "doc_id": ["d1"], "start": [0], "end": [5]})
    spans = pl.DataFrame({"query_id": ["a"], "doc_id": ["d1"], "start": [0], "end": [3], "relevance": [1]})
    run = pl.DataFrame({"query_id": ["a"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    out = chunk_level_run_metrics(run, chunks, spans, [Measure("judged", 1), Measure("recall", 1)])
    assert set(out["measure"]) == {"chunk_recall@1"}


def test_results_stored_before_judged_get_it_from_their_rankings_on_a_warm_rerun(home, settings, tmp_path,
                                                                                 ragbench_log):
    import duckdb
    from conftest import write_config

    from ragbench.config import load_config
    from ragbench.results.store import ResultStore
    from ragbench.sweep import run_sweep

    cfg = load_config(write_config(tmp_path / "s.yaml", f"""name: judged-old
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
retrievers: [{{kind: bm25}}, {{kind: bm25, filter: {{tenant: public}}}}]
metrics: {{measures: [ndcg, recall], cutoffs: [1, 10], primary: ndcg@10}}
output: {{mlflow: false}}
"""))
    first = run_sweep(cfg, settings)
    db = home / "results.duckdb"
    stored = ResultStore(db).query_metrics(first.sweep_id, first.outcomes[0].config_id)
    judged = stored.filter(pl.col("measure").str.contains("judged")).sort("query_id", "measure")
    assert set(judged["measure"]) == {"judged_at_1", "judged_at_10"}  # documents only: no chunk_judged
    con = duckdb.connect(str(db))  # as a results file written before judged@k existed
    for table in ("query_metrics", "config_metrics"):
        con.execute(f"DELETE FROM {table} WHERE measure LIKE '%judged%'")
    con.execute("""UPDATE configs SET measure_versions = '{"ndcg": 1, "recall": 1}'""")
    con.close()
    ragbench_log.clear()
    second = run_sweep(cfg, settings)
    assert {o.reused_from for o in second.outcomes} == {first.sweep_id}  # nothing evaluated again
    assert not any("(built)" in m or ": ndcg_at_10 = " in m for m in ragbench_log)
    assert sum("judged recomputed from its stored rankings" in m for m in ragbench_log) == len(first.outcomes)
    again = ResultStore(db).query_metrics(second.sweep_id, first.outcomes[0].config_id)
    assert again.filter(pl.col("measure").str.contains("judged")).sort("query_id", "measure").equals(judged)
