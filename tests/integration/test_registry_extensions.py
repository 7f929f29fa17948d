"""Open seams: a chunker, a first-stage retriever and a rank measure are each added by one class or function that
registers itself — here, from this test file, with no edit to ragbench — and a real sweep runs with them. What a
kind means to MLflow's params and to the cost model comes from its own spec class: no module switches on kinds."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import numpy as np
import polars as pl
import pytest
from conftest import DEMO, ROOT, write_config

from ragbench.chunking import CHUNKERS, ChunkerSpec
from ragbench.config import load_config
from ragbench.core.cache import ChunkCache
from ragbench.core.errors import ConfigError
from ragbench.core.schemas import index_texts
from ragbench.evaluation.cost import bm25_params_of
from ragbench.evaluation.measures import RANK_MEASURES, rank_measure
from ragbench.results.tracking import uniform_params
from ragbench.retrieval import RETRIEVERS, RetrieverSpec, run_from_hits
from ragbench.retrieval.bm25 import BM25Params
from ragbench.retrieval.rerank import RERANKERS, RerankSpec
from ragbench.sweep import run_sweep


class Paragraphs(ChunkerSpec):
    """One chunk per paragraph (blank-line separated)."""

    kind: Literal["paragraphs"] = "paragraphs"

    def spans(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text)]

    def tracking_params(self) -> dict[str, Any]:
        return {"chunk_size": 1, "chunk_unit": "paragraphs", "chunk_overlap": 0}


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
    assert "bad.yaml:3: chunkers.0: unknown chunker kind 'paragraphs'; expected one of:" in msg
    assert "retrievers.0: unknown retriever kind 'word-overlap'" in msg
    assert "metrics.measures: unknown measure(s) toy_rr" in msg


class LexicalTwice(RetrieverSpec, BM25Params):
    """A toy first stage over the bm25s index (BM25 by another name): the cost model and MLflow learn that from
    this class alone."""

    kind: Literal["lexical-twice"] = "lexical-twice"

    def bm25_params(self) -> BM25Params:
        return self

    def tracking_params(self) -> dict[str, Any]:
        return {**super().tracking_params(), "fusion": "none-needed", "bm25_k1": self.k1, "bm25_b": self.b}


def test_mlflow_params_and_cost_inputs_of_a_new_kind_come_from_its_own_class(toys):
    RETRIEVERS.register(LexicalTwice)
    try:
        spec = {"chunker": Paragraphs().canonical(), "retriever": LexicalTwice(k1=0.9, b=0.4, depth=7).canonical(),
                "embedder": None, "index": None}
        params = uniform_params(spec, "paragraphs | lexical-twice")
        assert {k: params[k] for k in ("chunker", "chunk_size", "chunk_unit", "chunk_overlap", "retriever")} == {
            "chunker": "paragraphs", "chunk_size": "1", "chunk_unit": "paragraphs", "chunk_overlap": "0",
            "retriever": "lexical-twice"}
        assert (params["fusion"], params["bm25_k1"], params["bm25_b"], params["depth"]) == ("none-needed", "0.9",
                                                                                            "0.4", "7")
        assert params["dense_search"] == params["hnsw_ef"] == "none"  # no embedder: no dense search to name
        assert bm25_params_of(LexicalTwice(k1=0.9)).k1 == 0.9
        assert bm25_params_of(WordOverlap()) is None
    finally:
        RETRIEVERS.unregister("lexical-twice")


def test_built_in_kinds_name_their_params_as_before():
    """The kinds' own methods give what MLflow runs have always carried (one config of each shape)."""
    rows = {
        "sentences": ({"kind": "sentences", "window": 4, "stride": 1}, ("4", "sentences", "3")),
        "markdown": ({"kind": "markdown", "max_tokens": 64}, ("64", "tokens", "0")),
        "markdown-sections": ({"kind": "markdown"}, ("none", "none", "0")),
        "whole": ({"kind": "whole"}, ("none", "none", "0")),
        "fixed": ({"kind": "fixed", "size": 32, "unit": "chars", "overlap": 8}, ("32", "chars", "8")),
    }
    for name, (chunker, want) in rows.items():
        p = uniform_params({"chunker": CHUNKERS.parse(chunker).canonical(),
                            "retriever": RETRIEVERS.parse({"kind": "bm25", "k1": 1.5}).canonical()})
        assert (p["chunk_size"], p["chunk_unit"], p["chunk_overlap"]) == want, name
        assert (p["bm25_k1"], p["bm25_b"], p["fusion"], p["dense_search"]) == ("1.5", "0.75", "none", "none")
    emb = {"model": "all-MiniLM-L6-v2"}
    hybrid = uniform_params({"chunker": {"kind": "whole"}, "embedder": emb, "retriever": RETRIEVERS.parse(
        {"kind": "hybrid", "fusion": "convex", "dense": {"hnsw_ef": 40}, "bm25": {"b": 0.5}}).canonical()})
    assert (hybrid["fusion"], hybrid["bm25_k1"], hybrid["bm25_b"], hybrid["dense_search"], hybrid["hnsw_ef"]) == (
        "convex", "1.2", "0.5", "hnsw", "40")
    exact = uniform_params({"chunker": {"kind": "whole"}, "embedder": emb,
                            "retriever": RETRIEVERS.parse({"kind": "dense", "exact": True}).canonical()})
    assert (exact["dense_search"], exact["hnsw_ef"], exact["bm25_k1"]) == ("exact", "none", "none")
    qdrant = RETRIEVERS.parse({"kind": "hybrid", "engine": "qdrant"})
    assert bm25_params_of(qdrant) is None and bm25_params_of(RETRIEVERS.parse({"kind": "hybrid"})).k1 == 1.2


#: modules that once switched on chunker or retriever kinds; what a kind means now lives on its spec class
KIND_NEUTRAL = ("ragbench/results/tracking.py", "ragbench/evaluation/cost.py", "ragbench/config/labels.py")
_KIND_SWITCH = re.compile(r"""kind["')\]]*\s*(==|!=|\bin\b\s*[(\[{])|isinstance\([^)]*(Retriever|Chunker|Rerank)""")


def test_no_module_switches_on_chunker_or_retriever_kinds():
    for rel in KIND_NEUTRAL:
        for lineno, line in enumerate((ROOT / rel).read_text(encoding="utf-8").splitlines(), 1):
            assert not _KIND_SWITCH.search(line), f"{rel}:{lineno}: switches on a kind: {line.strip()}"


class NoDefaultRerank(RerankSpec):
    """A toy reranker kind that names no default model: ``model`` is required for it."""

    kind: Literal["no-default"] = "no-default"


class ToyRerank(NoDefaultRerank):
    kind: Literal["toy-rerank"] = "toy-rerank"
    default_model: ClassVar[str] = "static-retrieval-m2v"


def test_each_reranker_kind_supplies_its_default_model(tmp_path):
    RERANKERS.register(ToyRerank)
    RERANKERS.register(NoDefaultRerank)
    try:
        assert RETRIEVERS.parse({"kind": "bm25", "rerank": {"kind": "toy-rerank"}}).rerank.model == \
            "static-retrieval-m2v"
        with pytest.raises(ValueError, match="a no-default reranker needs a model"):
            RERANKERS.parse({"kind": "no-default"})
    finally:
        RERANKERS.unregister("toy-rerank")
        RERANKERS.unregister("no-default")
    assert RERANKERS.parse({"kind": "crossencoder"}).model == "cross-encoder/ms-marco-MiniLM-L-6-v2"
    # a model left out is the default written out: one spec, one config id, one stored history
    ids = []
    for rerank in ("{top_n: 20}", "{kind: biencoder, model: all-MiniLM-L6-v2, top_n: 20}"):
        cfg = load_config(write_config(tmp_path / "r.yaml", f"""name: r
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25, rerank: {rerank}}}]
"""))
        ids.append([(c.config_id, c.name) for c in cfg.expand()])
    assert ids[0] == ids[1] and "rerank[all-MiniLM-L6-v2@20]" in ids[0][0][1]
