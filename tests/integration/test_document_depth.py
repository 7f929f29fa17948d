"""Comparable document depth across chunkers.

A run of N chunks names fewer than N documents when documents have several chunks in it, so a document measure at
cutoff k is only comparable between configs whose runs named at least k documents per query. ``documents: k`` on a
retriever fetches deeper until they do; without it, the deepest cutoff a config reached is stored
(``document_depth_reached``) and a measure deeper than that is refused: shown as –, left out of comparisons and
of the promotion gate.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from conftest import DEMO, SCIFACT, requires_scifact, write_config

from ragbench.config import load_config
from ragbench.evaluation.metrics import document_cutoff, document_depth, unreached_depth
from ragbench.promotion.production import PromotionRequest, promote
from ragbench.promotion.promotion_gate import PromotionRefused
from ragbench.reporting.columns import shallow_notes
from ragbench.reporting.report import build_report, report_rows
from ragbench.reporting.terminal import leaderboard_rows
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep


def test_document_depth_counts_distinct_documents_and_only_truncated_queries_limit_it():
    run = pl.DataFrame({"query_id": ["a"] * 3 + ["b"] + ["c"] * 5,
                        "doc_id": ["d1", "d2", "d3", "d1", "d1", "d2", "d3", "d4", "d5"]})
    # b returned everything its engine had (1 document): it does not limit the depth; a (3) and c (5) were cut
    got = document_depth(run, ["a", "b", "c", "unretrieved"], frozenset({"a", "c"}), max_cutoff=10)
    assert got == {"document_depth_mean": (3 + 1 + 5 + 0) / 4, "document_depth_reached": 3.0}
    # nothing truncated: every cutoff up to the deepest computed is reached
    assert document_depth(run, ["a", "b"], frozenset(), max_cutoff=20)["document_depth_reached"] == 20.0


@pytest.mark.parametrize("measure, k", [("recall@100", 100), ("ndcg_at_10", 10), ("heldout_mrr_at_5", 5),
                                        ("heldout/precision@3", 3), ("span_recall@5", None),
                                        ("evidence_recall_at_512tok", None), ("reach_hit_at_10_of_50", None),
                                        ("document_depth_reached", None)])
def test_only_document_rank_measures_have_a_document_cutoff(measure, k):
    assert document_cutoff(measure) == k


def test_a_measure_deeper_than_the_depth_reached_is_unreached_and_heldout_reads_its_own_depth():
    metrics = {"document_depth_reached": 63.0, "heldout_document_depth_reached": 100.0}
    assert unreached_depth(metrics, "recall@100") == 63
    assert unreached_depth(metrics, "recall@63") is None
    assert unreached_depth(metrics, "heldout_recall_at_100") is None
    assert unreached_depth(metrics, "span_recall@100") is None
    assert unreached_depth({}, "recall@100") is None  # results stored before the depth was measured


SWEEP = f"""name: depth
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: fixed, size: 64, overlap: 16}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers:
  - {{kind: bm25, depth: 20, name: shallow}}
  - {{kind: bm25, depth: 20, documents: 20, name: until-20}}
  - {{kind: bm25, depth: 100000, name: every-chunk}}
  - {{kind: dense, exact: true, depth: 20, documents: 20, name: dense-until-20}}
  - {{kind: dense, exact: true, depth: 100000, name: dense-every-chunk}}
  - {{kind: hybrid, depth: 20, documents: 20, dense: {{depth: 20, exact: true}}, bm25: {{depth: 20}},
     name: hybrid-until-20}}
metrics: {{cutoffs: [5, 20], primary: recall@20, show: [recall@5]}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""


@pytest.fixture(scope="module")
def depth_sweep(tmp_path_factory):
    from ragbench.core.settings import Settings

    tmp = tmp_path_factory.mktemp("depth")
    settings = Settings.from_env(home=tmp / "home").replace(mlflow_tracking_uri=None, qdrant_url=None)
    result = run_sweep(load_config(write_config(tmp / "depth.yaml", SWEEP)), settings)
    assert result.n_failed == 0
    return result, ResultStore(settings.home / "results.duckdb")


def _by_name(result):
    return {o.name.split(" | ")[-1]: o for o in result.outcomes}


def _top_documents(store, sweep_id, config_id, k):
    from ragbench.evaluation.judging import document_run

    docs = document_run(store.rankings(sweep_id, config_id))
    return {q: tuple(g.sort("rank")["doc_id"].head(k)) for (q,), g in docs.group_by("query_id")}


def test_fetching_until_n_documents_ranks_the_same_documents_as_searching_every_chunk(depth_sweep):
    result, store = depth_sweep
    by = _by_name(result)
    for until, every in (("until-20", "every-chunk"), ("dense-until-20", "dense-every-chunk")):
        got = _top_documents(store, result.sweep_id, by[until].config_id, 20)
        want = _top_documents(store, result.sweep_id, by[every].config_id, 20)
        assert got == want, until  # the top 20 documents of an exhaustive search (BM25, exact dense)
        assert by[until].metrics["recall@20"] == by[every].metrics["recall@20"]
        assert by[until].metrics["document_depth_reached"] == 20
    # hybrid: both lists fetched deeper; every query that could name 20 documents did
    hybrid = store.rankings(result.sweep_id, by["hybrid-until-20"].config_id)
    assert hybrid.group_by("query_id").agg(pl.col("doc_id").n_unique())["doc_id"].min() >= 20
    # the shallow run named fewer: 20 chunks of 64 tokens are not 20 documents
    shallow = by["shallow"].metrics
    assert shallow["document_depth_reached"] < 20
    assert shallow["recall@20"] < by["every-chunk"].metrics["recall@20"]


def test_a_cutoff_a_config_did_not_reach_is_refused_everywhere(depth_sweep):
    result, store = depth_sweep
    by = _by_name(result)
    shallow = by["shallow"]
    depth = int(shallow.metrics["document_depth_reached"])
    # the sweep's leaderboard shows – and ranks it last
    rows = {r["config_id"]: r for r in leaderboard_rows(result)}
    assert rows[shallow.config_id]["recall_at_20"] is None and rows[shallow.config_id]["rank"] == len(rows)
    assert rows[shallow.config_id]["recall_at_5"] == shallow.metrics["recall@5"]  # reached: shown
    # the report leaves it out of the comparison on recall@20 and says why
    rep = build_report(store, result.sweep_id)
    assert rep.shallow["recall_at_20"] == {shallow.config_id: depth}
    assert shallow.config_id not in {c.config_id for c in rep.comparisons["recall_at_20"].configs}
    row = next(r for r in report_rows(rep) if r["config_id"] == shallow.config_id)
    assert row["rank"] is None and row["status"] == "not compared"
    assert f"fewest {depth}" in " ".join(shallow_notes(rep.shallow))
    # and the promotion gate refuses it
    with pytest.raises(PromotionRefused, match=rf"only {depth} distinct documents"):
        promote(store, PromotionRequest(result.sweep_id, shallow.config_id))
    assert not math.isnan(by["until-20"].metrics["recall@20"])


@requires_scifact()
@pytest.mark.slow
def test_scifact_fixed_128_bm25_recall_at_100_is_on_100_documents(tmp_path, settings):
    """SciFact, fixed 128-token chunks with BM25 at depth 100 name ~63 documents per query; with
    ``documents: 100`` every query is judged on 100 distinct documents."""
    cfg = write_config(tmp_path / "scifact.yaml", f"""name: scifact-depth
dataset: {{path: {SCIFACT}, max_queries: 60}}
chunkers: [{{kind: fixed, size: 128, overlap: 0}}]
retrievers: [{{kind: bm25, name: chunks-100}}, {{kind: bm25, documents: 100, name: documents-100}},
             {{kind: bm25, depth: 1000000, name: every-chunk}}]
metrics: {{cutoffs: [10, 100], primary: ndcg@10}}
output: {{mlflow: false}}
""")
    result = run_sweep(load_config(cfg), settings)
    by = _by_name(result)
    assert by["chunks-100"].metrics["document_depth_reached"] < 100
    assert by["documents-100"].metrics["document_depth_reached"] == 100
    store = ResultStore(settings.home / "results.duckdb")

    def depth(name):
        return dict(store.rankings(result.sweep_id, by[name].config_id).group_by("query_id")
                    .agg(pl.col("doc_id").n_unique()).iter_rows())

    # 100 documents for every query, except where BM25 matches fewer documents at all (every chunk that scores)
    every, got = depth("every-chunk"), depth("documents-100")
    assert got.keys() == every.keys()
    assert all(got[q] >= 100 or got[q] == every[q] for q in every), {q: (got[q], every[q]) for q in every}
    assert sum(n >= 100 for n in got.values()) >= 50
    assert min(depth("chunks-100").values()) < 60
