"""Open seams: a chunker, a first-stage retriever and a rank measure are each added by one class or function that
registers itself — here, from this test file, with no edit to ragbench — and a real sweep runs with them."""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import polars as pl
import pytest
from conftest import DEMO, write_config

from ragbench.chunking import CHUNKERS, ChunkerSpec
from ragbench.config import load_config
from ragbench.core.cache import ChunkCache
from ragbench.core.errors import ConfigError
from ragbench.core.schemas import index_texts
from ragbench.evaluation.measures import RANK_MEASURES, rank_measure
from ragbench.retrieval import RETRIEVERS, RetrieverSpec, run_from_hits
from ragbench.sweep import run_sweep


class Paragraphs(ChunkerSpec):
    """One chunk per paragraph (blank-line separated)."""

    kind: Literal["paragraphs"] = "paragraphs"

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)]


class WordOverlap(RetrieverSpec):
    """Scores a chunk by how many distinct query words it contains (ties: chunk order)."""

    kind: Literal["word-overlap"] = "word-overlap"

    def first_stage(self, ds, res, embedder, filters) -> pl.DataFrame:
        words = [set(t.lower().split()) for t in index_texts(res.chunks)]
        ids, scores = [], []
        for q in ds.queries["text"]:
            s = np.array([len(set(q.lower().split()) & w) for w in words], dtype=np.float64)
            top = [i for i in np.argsort(-s, kind="stable")[:self.depth] if s[i] > 0]
            ids.append(np.array(top, dtype=np.int64))
            scores.append(s[top])
        return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, ids, scores)


def first_relevant_within(top, ideal, n_relevant, k, gain) -> float:
    """1 / (number of documents read until the first relevant one), 0 when none within k: MRR by another name,
    which lets the test check the value against the built-in ``mrr``."""
    hits = np.flatnonzero(top > 0)
    return 1.0 / (hits[0] + 1) if len(hits) else 0.0


@pytest.fixture
def toys():
    CHUNKERS.register(Paragraphs)
    RETRIEVERS.register(WordOverlap)
    rank_measure("toy_rr")(first_relevant_within)
    yield
    CHUNKERS.unregister("paragraphs")
    RETRIEVERS.unregister("word-overlap")
    RANK_MEASURES.pop("toy_rr", None)


SWEEP = f"""name: toys
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: paragraphs}}, {{kind: whole}}]
retrievers: [{{kind: word-overlap, depth: 20}}, {{kind: bm25}}]
metrics: {{measures: [toy_rr, mrr, ndcg], cutoffs: [10], primary: ndcg@10}}
output: {{mlflow: false}}
"""


def test_a_sweep_runs_with_a_chunker_retriever_and_measure_registered_outside_the_package(toys, home, settings,
                                                                                          tmp_path):
    cfg = load_config(write_config(tmp_path / "toys.yaml", SWEEP))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0
    names = sorted(o.name for o in result.outcomes)
    assert names == ["paragraphs | bm25(k1=1.2,b=0.75)", "paragraphs | word-overlap", "whole | bm25(k1=1.2,b=0.75)",
                     "whole | word-overlap"]
    by_name = {o.name: o.metrics for o in result.outcomes}
    for m in by_name.values():  # the registered measure is computed, stored and equal to its built-in twin
        assert m["toy_rr@10"] == pytest.approx(m["mrr@10"])
    assert 0 < by_name["paragraphs | word-overlap"]["ndcg@10"] <= 1
    key = ChunkCache.key(result.dataset_fingerprint, Paragraphs().canonical())
    chunks, cached = ChunkCache(home / "cache").get_or_build(key, lambda: pytest.fail("paragraphs not chunked"))
    assert cached and chunks.height > 20 and not chunks["text"].str.contains("\n\n").any()


def test_the_toy_chunker_cuts_paragraphs_and_keeps_offsets(toys):
    text = "# Title\n\nFirst para\nstill first.\n\n\nSecond para."
    spans = Paragraphs().spans(text)
    assert [text[s:e] for s, e in spans] == ["# Title", "First para\nstill first.", "Second para."]


def test_unknown_kinds_name_what_is_registered(tmp_path):
    bad = write_config(tmp_path / "bad.yaml", SWEEP)  # the toys are not registered in this test
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    msg = str(e.value)
    assert "bad.yaml:3: chunkers.0: Value error, unknown chunker kind 'paragraphs'; expected one of:" in msg
    assert "retrievers.0: Value error, unknown retriever kind 'word-overlap'" in msg
    assert "metrics.measures: Value error, unknown measure(s) toy_rr" in msg
