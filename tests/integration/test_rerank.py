"""Reranking the top-N of a BM25 run on the demo set: a bi-encoder rescorer (real second model) and the
cross-encoder plumbing."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from ragbench.chunking import chunk_corpus
from ragbench.config import BM25Retriever, DatasetSpec, EmbedderSpec, SentenceChunker
from ragbench.core.cache import VectorCache
from ragbench.core.models import load_sentence_transformer
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.retrieval import RUN_SCHEMA, BM25Index, run_from_hits
from ragbench.retrieval.rerank import BiEncoderRescorer, CrossEncoderReranker, rerank
from conftest import DEMO


@pytest.fixture(scope="module")
def first_stage():
    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    chunks = chunk_corpus(ds, SentenceChunker(window=2))
    bm = BM25Index(BM25Retriever(), index_texts(chunks).to_list())
    qids = ds.queries["query_id"].to_list()
    hits = bm.search(ds.queries["text"].to_list(), 50)
    run = run_from_hits(qids, chunks, hits.ids, hits.scores)
    return ds, chunks, run, dict(zip(qids, ds.queries["text"])), dict(zip(chunks["chunk_id"], index_texts(chunks)))


def _check_permutation_of_top_n(run, reranked, top_n, keep):
    for qid, group in reranked.group_by("query_id"):
        top = set(run.filter((pl.col("query_id") == qid[0]) & (pl.col("rank") <= top_n))["chunk_id"])
        got = group.sort("rank")
        assert set(got["chunk_id"]) <= top and got.height == min(keep, len(top))
        assert got["rank"].to_list() == list(range(1, got.height + 1))
        assert (np.diff(got["score"].to_numpy()) <= 0).all()


def test_biencoder_rescorer_reranks_bm25_top20_with_true_cosines(first_stage, tmp_path):
    ds, chunks, run, qtexts, ctexts = first_stage
    # six queries (identifier and paraphrase ones) keep the test fast on 2 shared cores
    run = run.filter(pl.col("query_id").is_in(["q01", "q03", "q05", "q13", "q15", "q17"]))
    spec = EmbedderSpec(model="all-MiniLM-L6-v2")
    cache = VectorCache(tmp_path)
    reranked, latency = rerank(run, qtexts, ctexts, BiEncoderRescorer(spec, cache), top_n=20, keep=10)
    _check_permutation_of_top_n(run, reranked, 20, 10)
    assert reranked.schema == pl.Schema(RUN_SCHEMA)
    assert set(latency["query_id"]) == set(run["query_id"]) and (latency["ms"] > 0).all()
    assert latency["candidates"].max() == 20
    # the second stage really reorders BM25 (it is not the identity)
    first = run.filter(pl.col("rank") <= 10).select("query_id", "chunk_id")
    assert not reranked.select("query_id", "chunk_id").equals(first)
    # scores equal cosines computed directly with the model, and they are the top 10 of the 20 candidates
    model = load_sentence_transformer("all-MiniLM-L6-v2")
    for qid in ["q01", "q13"]:
        cand = run.filter((pl.col("query_id") == qid) & (pl.col("rank") <= 20))["chunk_id"].to_list()
        q = model.encode([qtexts[qid]], normalize_embeddings=True)[0]
        c = model.encode([ctexts[x] for x in cand], normalize_embeddings=True)
        direct = dict(zip(cand, (c @ q).astype(np.float64)))
        got = reranked.filter(pl.col("query_id") == qid)
        for cid, s in zip(got["chunk_id"], got["score"]):
            assert s == pytest.approx(direct[cid], abs=1e-5)
        assert got["chunk_id"].to_list() == sorted(direct, key=lambda x: -direct[x])[:10]
    # the rescorer's vectors went to the cache: a second run embeds nothing
    from ragbench.embedding.embed import embed_texts

    _, stats = embed_texts(list(dict.fromkeys(ctexts[c] for c in run.filter(pl.col("rank") <= 20)["chunk_id"])),
                           spec, "document", cache)
    assert stats.computed == 0


def test_cross_encoder_plumbing_with_an_untrained_head(first_stage):
    """Plumbing only: no cross-encoder weights can be installed offline, so this builds a ``CrossEncoder`` from the
    packaged all-MiniLM-L6-v2 encoder with ``num_labels=1``, which puts a randomly initialised (untrained)
    classification head on the real encoder. Its scores mean nothing; the test checks shapes, that the reranked run
    is ordered by the model's own ``predict`` scores, and the run invariants, not quality."""
    import torch

    _, _, run, qtexts, ctexts = first_stage
    torch.manual_seed(0)
    ce = CrossEncoderReranker("all-MiniLM-L6-v2", num_labels=1, batch_size=8)
    small = run.filter(pl.col("query_id").is_in(["q01", "q05", "q20"]))
    reranked, latency = rerank(small, qtexts, ctexts, ce, top_n=6, keep=4)
    _check_permutation_of_top_n(small, reranked, 6, 4)
    assert latency.height == 3
    for qid in ["q01", "q20"]:
        cand = small.filter((pl.col("query_id") == qid) & (pl.col("rank") <= 6))["chunk_id"].to_list()
        own = ce.model.predict([(qtexts[qid], ctexts[c]) for c in cand], show_progress_bar=False)
        assert own.shape == (len(cand),)
        expected = [cand[i] for i in np.argsort(-own, kind="stable")[:4]]
        got = reranked.filter(pl.col("query_id") == qid)
        assert got["chunk_id"].to_list() == expected
        np.testing.assert_allclose(got["score"].to_numpy(), np.sort(own)[::-1][:4], rtol=1e-5)


class _Constant:
    name = "constant"

    def prepare(self, q, c):
        pass

    def score(self, query, texts):
        return np.zeros(len(texts))


def test_ties_keep_first_stage_order_and_bad_arguments_are_named(first_stage):
    _, _, run, qtexts, ctexts = first_stage
    reranked, _ = rerank(run, qtexts, ctexts, _Constant(), top_n=5, keep=3)
    first = run.filter(pl.col("rank") <= 3).sort("query_id", "rank")
    assert reranked.sort("query_id", "rank").select("query_id", "rank", "chunk_id").equals(
        first.select("query_id", "rank", "chunk_id"))
    with pytest.raises(ValueError, match="need 1 <= keep <= top_n"):
        rerank(run, qtexts, ctexts, _Constant(), top_n=5, keep=10)
    with pytest.raises(ValueError, match="no text for 1 queries"):
        rerank(run, {k: v for k, v in qtexts.items() if k != "q01"}, ctexts, _Constant(), top_n=5, keep=3)
