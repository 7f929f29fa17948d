"""Metrics: hand-computed cases and a cross-check against ranx to 1e-9."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from ragbench.evaluation.judging import document_run
from ragbench.evaluation.metrics import Measure, aggregate, evaluate_per_query


def _run(rows):
    return pl.DataFrame(rows, schema={"query_id": pl.String, "rank": pl.Int32, "doc_id": pl.String}, orient="row")


def _qrels(rows):
    return pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32},
                        orient="row")


def _values(pq):
    return {(q, m): v for q, m, v in pq.iter_rows()}


def test_hand_computed_values():
    # q1 ranking: a(rel 2) x b(rel 1) y ; judged pool also has c (rel 1) never retrieved
    run = _run([("q1", 1, "a"), ("q1", 2, "x"), ("q1", 3, "b"), ("q1", 4, "y")])
    qrels = _qrels([("q1", "a", 2), ("q1", "b", 1), ("q1", "c", 1), ("q1", "x", 0)])
    ms = [Measure("recall", 3), Measure("precision", 10), Measure("mrr", 10), Measure("hit", 1),
          Measure("ndcg", 3, "exponential"), Measure("ndcg", 3, "linear")]
    v = _values(evaluate_per_query(run, qrels, ["q1"], ms))
    assert v[("q1", "recall@3")] == pytest.approx(2 / 3)
    assert v[("q1", "precision@10")] == pytest.approx(2 / 10)  # divides by k, not by the 4 retrieved
    assert v[("q1", "mrr@10")] == 1.0
    assert v[("q1", "hit@1")] == 1.0
    # exponential: DCG = 3/1 + 0 + 1/2 ; ideal from the full judged pool (2, 1, 1): 3 + 1/log2(3) + 1/2
    pq = evaluate_per_query(run, qrels, ["q1"], [Measure("ndcg", 3, "exponential")])
    assert pq["value"][0] == pytest.approx(3.5 / (3 + 1 / math.log2(3) + 0.5))
    pq = evaluate_per_query(run, qrels, ["q1"], [Measure("ndcg", 3, "linear")])
    assert pq["value"][0] == pytest.approx((2 + 0.5) / (2 + 1 / math.log2(3) + 0.5))


def test_unlabelled_query_is_nan_excluded_and_counted():
    run = _run([("q1", 1, "a"), ("q2", 1, "a")])
    qrels = _qrels([("q1", "a", 1), ("q2", "a", 0)])  # q2 judged but nothing relevant; q3 not judged at all
    pq = evaluate_per_query(run, qrels, ["q1", "q2", "q3"], [Measure("recall", 10), Measure("ndcg", 10)])
    v = _values(pq)
    assert v[("q1", "recall@10")] == 1.0
    assert math.isnan(v[("q2", "recall@10")]) and math.isnan(v[("q3", "ndcg@10")])
    agg = {m: (mean, n, u) for m, mean, n, u in aggregate(pq).iter_rows()}
    assert agg["recall@10"] == (1.0, 1, 2)  # never scored 1.0 for the unlabelled ones, and counted


def test_query_that_retrieved_nothing_scores_zero():
    pq = evaluate_per_query(_run([]), _qrels([("q1", "a", 1)]), ["q1"], [Measure("recall", 5), Measure("mrr", 5)])
    assert pq["value"].to_list() == [0.0, 0.0]


def test_document_run_keeps_first_occurrence():
    chunk_run = pl.DataFrame({"query_id": ["q"] * 5, "rank": [1, 2, 3, 4, 5], "chunk_id": list("vwxyz"),
                              "doc_id": ["d1", "d1", "d2", "d1", "d3"], "score": [.9, .8, .7, .6, .5]})
    dr = document_run(chunk_run)
    assert dr["doc_id"].to_list() == ["d1", "d2", "d3"]
    assert dr["rank"].to_list() == [1, 2, 3]
    assert dr["score"].to_list() == [.9, .7, .5]


def test_matches_ranx_to_1e9():
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(60)]
    qrels_rows, run_rows, q_ids = [], [], []
    ranx_qrels, ranx_run = {}, {}
    for qi in range(40):
        q = f"q{qi}"
        q_ids.append(q)
        judged = rng.choice(docs, size=int(rng.integers(1, 8)), replace=False)
        labels = {d: int(rng.integers(1, 4)) for d in judged}  # graded, all relevant (ranx: rel > 0)
        ranx_qrels[q] = labels
        qrels_rows += [(q, d, r) for d, r in labels.items()]
        ranking = rng.choice(docs, size=int(rng.integers(0, 30)), replace=False)
        ranx_run[q] = {d: float(len(ranking) - i) for i, d in enumerate(ranking)}  # no ties
        run_rows += [(q, i + 1, d) for i, d in enumerate(ranking)]
    ranx_run = {q: (r if r else {"__none__": 0.0}) for q, r in ranx_run.items()}
    Q, R = ranx.Qrels(ranx_qrels), ranx.Run(ranx_run)
    run, qrels = _run(run_rows), _qrels(qrels_rows)
    cutoffs = (1, 5, 10, 20)
    binary = _values(evaluate_per_query(run, qrels, q_ids, [
        Measure(n, k) for n in ("recall", "precision", "mrr", "hit") for k in cutoffs]))
    ndcg = {g: _values(evaluate_per_query(run, qrels, q_ids, [Measure("ndcg", k, g) for k in cutoffs]))
            for g in ("exponential", "linear")}
    pairs = [(binary, n, r) for n, r in [("recall", "recall"), ("precision", "precision"), ("mrr", "mrr"),
                                         ("hit", "hit_rate")]]
    pairs += [(ndcg["linear"], "ndcg", "ndcg"), (ndcg["exponential"], "ndcg", "ndcg_burges")]
    for k in cutoffs:
        for ours, name, ranx_name in pairs:
            theirs = dict(zip(Q.keys(), ranx.evaluate(Q, R, f"{ranx_name}@{k}", return_mean=False)))
            for q in q_ids:
                assert ours[(q, f"{name}@{k}")] == pytest.approx(theirs[q], abs=1e-9), (q, ranx_name, k)
