"""Metadata filters on a real Qdrant Edge shard (and qdrant-client :memory:) of the demo corpus, BM25 masks, and
the shortfall count of filtered searches that return fewer than k."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ragbench.chunking import chunk_corpus
from ragbench.config import BM25Retriever, DatasetSpec, EmbedderSpec, WholeDocChunker
from ragbench.core.cache import VectorCache
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.embedding.embed import embed_texts, model_key
from ragbench.index.filters import (
    allowed_doc_ids,
    bm25_weight_mask,
    check_fields,
    chunk_payloads,
    doc_metadata,
    filtered_shortfall,
    index_filter,
    parse_filter,
    post_filter,
)
from ragbench.index.qdrant import ClientIndex, CollectionMeta, EdgeIndex
from ragbench.retrieval import RUN_SCHEMA, BM25Index, run_from_hits
from conftest import DEMO

EMB = EmbedderSpec(model="static-retrieval-m2v")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    chunks = chunk_corpus(ds, WholeDocChunker())
    cache = VectorCache(tmp_path_factory.mktemp("cache"))
    dv, _ = embed_texts(index_texts(chunks).to_list(), EMB, "document", cache)
    qv, _ = embed_texts(ds.queries["text"].to_list(), EMB, "query", cache)
    return ds, chunks, dv, qv


def _build(index, chunks, dv, corpus):
    meta = CollectionMeta(name="col", model_key=model_key(EMB), dim=dv.shape[1], distance="cosine",
                          count=chunks.height, hnsw_m=16, ef_construct=100, full_scan_threshold_kb=1)
    index.ensure(meta, dv, chunk_payloads(chunks, corpus))
    return index


def test_allowed_docs_follow_the_spec_semantics(demo):
    ds = demo[0]
    meta = doc_metadata(ds.corpus)
    assert allowed_doc_ids(ds.corpus, {"tenant": "internal"}) == {"nimbus-disaster-recovery",
                                                                   "nimbus-internal-oncall-runbook"}
    both = allowed_doc_ids(ds.corpus, {"doc_type": ["api", "release-notes"], "tenant": "public"})
    assert both == {d for d, m in meta.items() if m["doc_type"] in ("api", "release-notes")}
    assert len(both) == 9
    recent = allowed_doc_ids(ds.corpus, {"date": {"gte": "2024-05-01"}, "doc_type": "release-notes"})
    assert recent == {"nimbus-release-3-4-1", "nimbus-release-3-4-2"}


@pytest.mark.filterwarnings("ignore:Local mode performs exact")  # qdrant-client :memory: is brute force anyway
@pytest.mark.parametrize("engine", ["edge", "client"])
def test_filtered_qdrant_search_returns_only_matching_docs_and_counts_shortfalls(demo, tmp_path, engine):
    ds, chunks, dv, qv = demo
    index = _build(EdgeIndex(tmp_path) if engine == "edge" else ClientIndex(":memory:"), chunks, dv, ds.corpus)
    qids, k = ds.queries["query_id"].to_list(), 5
    for spec in [{"doc_type": "reference"}, {"doc_type": ["api", "release-notes"]}, {"tenant": "internal"},
                 {"date": {"gte": "2024-05-01"}}]:
        allowed = allowed_doc_ids(ds.corpus, spec)
        hits = index.search("col", qv, model_key(EMB), k, exact=True, query_filter=index_filter(index, spec))
        run = run_from_hits(qids, chunks, hits.ids, hits.scores)
        assert set(run["doc_id"]) <= allowed
        # exact filtered search == exact unfiltered search over every point, post-filtered
        full = index.search("col", qv, model_key(EMB), chunks.height, exact=True)
        expected = post_filter(run_from_hits(qids, chunks, full.ids, full.scores), allowed, depth=k)
        assert run.select("query_id", "rank", "chunk_id").equals(expected.select("query_id", "rank", "chunk_id"))
        short = filtered_shortfall(run, k, qids)
        n_allowed_chunks = chunks.filter(pl.col("doc_id").is_in(list(allowed))).height
        assert short["returned"].to_list() == [min(k, n_allowed_chunks)] * len(qids)
        assert short["shortfall"].all() == (n_allowed_chunks < k)
    # tenant=internal has 2 documents: every one of the 34 queries comes back 3 short of k=5
    hits = index.search("col", qv, model_key(EMB), k, query_filter=index_filter(index, {"tenant": "internal"}))
    short = filtered_shortfall(run_from_hits(qids, chunks, hits.ids, hits.scores), k, qids)
    assert short["shortfall"].sum() == 34 and set(short["returned"]) == {2}
    index.close()


def test_shortfall_counts_queries_with_no_result_at_all():
    run = pl.DataFrame([("a", 1, "c1", "d1", 1.0), ("a", 2, "c2", "d2", 0.5), ("b", 1, "c1", "d1", 1.0)],
                       schema=RUN_SCHEMA, orient="row")
    s = filtered_shortfall(run, 2, ["a", "b", "c"])
    assert s.rows() == [("a", 2, False), ("b", 1, True), ("c", 0, True)]


def test_bm25_weight_mask_equals_a_full_depth_post_filter(demo):
    import bm25s
    import Stemmer

    ds, chunks = demo[0], demo[1]
    spec = BM25Retriever()
    bm = BM25Index(spec, index_texts(chunks).to_list())
    allowed = allowed_doc_ids(ds.corpus, {"doc_type": "reference"})
    qids, texts = ds.queries["query_id"].to_list(), ds.queries["text"].to_list()
    full = bm.search(texts, chunks.height)
    post = post_filter(run_from_hits(qids, chunks, full.ids, full.scores), allowed, depth=5)
    tokens = bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
    docs, scores = bm.retriever.retrieve(tokens, k=5, show_progress=False,
                                         weight_mask=bm25_weight_mask(chunks, allowed))
    keep = [s > 0 for s in scores]
    masked = run_from_hits(qids, chunks, [np.asarray(d[m], dtype=np.int64) for d, m in zip(docs, keep)],
                           [np.asarray(s[m], dtype=np.float64) for s, m in zip(scores, keep)])
    assert set(post["doc_id"]) <= allowed
    assert masked.select("query_id", "chunk_id").equals(post.select("query_id", "chunk_id"))
    np.testing.assert_allclose(masked["score"].to_numpy(), post["score"].to_numpy(), rtol=1e-6)


def test_bad_specs_are_named(demo):
    ds = demo[0]
    with pytest.raises(ValueError, match="floats cannot be matched"):
        parse_filter({"score": 0.5})
    with pytest.raises(ValueError, match="only strings or only integers"):
        parse_filter({"tag": ["a", 1]})
    with pytest.raises(ValueError, match="empty list"):
        parse_filter({"tag": []})
    with pytest.raises(ValueError, match="not an ISO-8601 date"):
        parse_filter({"date": {"gte": "last week"}})
    with pytest.raises(ValueError, match="a range takes"):
        parse_filter({"date": {"after": "2024-01-01"}})
    with pytest.raises(ValueError, match="'doctype': no document has it.*known fields: date, doc_type"):
        check_fields(ds.corpus, {"doctype": "api"})
    check_fields(ds.corpus, {"doc_type": "api"})
