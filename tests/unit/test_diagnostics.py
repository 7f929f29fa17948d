"""Reachability split and near misses on hand-made runs."""

from __future__ import annotations

import polars as pl
import pytest

from ragbench.core.schemas import QRELS_SCHEMA
from ragbench.evaluation.diagnostics import near_misses, reachability, reachability_summary
from ragbench.evaluation.judging import document_run
from ragbench.retrieval import RUN_SCHEMA


def _chunk_run(q, docs):
    return [(q, r, f"{q}-c{r}", d, 1.0 / r) for r, d in enumerate(docs, 1)]


def _fixture():
    # qa: relevant d2 at chunk rank 2 -> doc rank 2 (hit@3)
    # qb: relevant dR at doc rank 5 (two chunks of dX collapse): k=3 < 5 <= pool=6 -> ranked_badly
    # qc: relevant dR at doc rank 8 > pool -> unreachable (but its rank is still reported)
    # qd: relevant doc never retrieved -> unreachable, rank null
    # qe: labelled only with relevance 0 -> unlabelled; qf: no qrels and no run rows -> unlabelled
    rows = (_chunk_run("qa", ["d1", "d2", "d3"])
            + _chunk_run("qb", ["dX", "dX", "d1", "d2", "d3", "dR"])
            + _chunk_run("qc", [f"n{i}" for i in range(7)] + ["dR"])
            + _chunk_run("qd", ["d1", "d2"])
            + _chunk_run("qe", ["d1"]))
    chunk_run = pl.DataFrame(rows, schema=RUN_SCHEMA, orient="row")
    qrels = pl.DataFrame([("qa", "d2", 1), ("qa", "d3", 2), ("qb", "dR", 1), ("qc", "dR", 2), ("qd", "dZ", 1),
                          ("qe", "d1", 0)], schema=QRELS_SCHEMA, orient="row")
    return chunk_run, qrels


def test_reachability_categories_from_a_document_run():
    chunk_run, qrels = _fixture()
    reach = reachability(document_run(chunk_run), qrels, ["qa", "qb", "qc", "qd", "qe", "qf"], k=3, pool=6)
    got = {q: (r, c) for q, r, c in reach.iter_rows()}
    assert got == {"qa": (2, "hit"), "qb": (5, "ranked_badly"), "qc": (8, "unreachable"),
                   "qd": (None, "unreachable"), "qe": (None, "unlabelled"), "qf": (None, "unlabelled")}
    # boundaries: rank == k is a hit, rank == pool is ranked badly
    assert dict(reachability(document_run(chunk_run), qrels, ["qa", "qb"], k=2, pool=5)
                .select("query_id", "category").iter_rows()) == {"qa": "hit", "qb": "ranked_badly"}


def test_summary_counts_and_shares():
    chunk_run, qrels = _fixture()
    reach = reachability(document_run(chunk_run), qrels, ["qa", "qb", "qc", "qd", "qe", "qf"], k=3, pool=6)
    s = {c: (n, sh, sl) for c, n, sh, sl in reachability_summary(reach).iter_rows()}
    assert s == {"hit": (1, 1 / 6, 1 / 4), "ranked_badly": (1, 1 / 6, 1 / 4), "unreachable": (2, 2 / 6, 2 / 4),
                 "unlabelled": (2, 2 / 6, None)}


def test_near_misses_are_the_chunks_above_the_first_relevant_one():
    chunk_run, _ = _fixture()
    above = near_misses(chunk_run, {"dR", "d2"}, "qb")
    assert above["chunk_id"].to_list() == ["qb-c1", "qb-c2", "qb-c3"]   # d2 is at chunk rank 4
    assert near_misses(chunk_run, {"dR"}, "qb", k=2)["doc_id"].to_list() == ["dX", "dX"]
    assert near_misses(chunk_run, {"d1"}, "qa").height == 0              # the relevant chunk is first
    assert near_misses(chunk_run, {"dZ"}, "qd")["rank"].to_list() == [1, 2]  # never retrieved: all beat it


def test_bad_arguments_are_named():
    chunk_run, qrels = _fixture()
    with pytest.raises(ValueError, match="need 1 <= k <= pool"):
        reachability(document_run(chunk_run), qrels, ["qa"], k=20, pool=10)
    with pytest.raises(ValueError, match="lacks column"):
        reachability(chunk_run.drop("doc_id"), qrels, ["qa"])
