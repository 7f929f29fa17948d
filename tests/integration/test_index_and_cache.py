"""Qdrant index (embedded Edge engine and qdrant-client) and the content-addressed cache."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from ragbench.config import EmbedderSpec
from ragbench.core.cache import VectorCache, atomic_write_parquet
from ragbench.core.errors import IndexMismatchError
from ragbench.embedding.embed import embed_texts
from ragbench.index.qdrant import ClientIndex, CollectionMeta, EdgeIndex, HybridQuery


def _data(n=300, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(8, dim))  # clustered, low-rank data (HNSW's realistic case, not uniform noise)
    x = base[rng.integers(0, 8, n)] + 0.3 * rng.normal(size=(n, dim))
    return x.astype(np.float32)


def _meta(name, n, dim, model="m@1"):
    return CollectionMeta(name=name, model_key=model, dim=dim, distance="cosine", count=n, hnsw_m=16,
                          ef_construct=100, full_scan_threshold_kb=1)


def _brute_force(x, q, k):
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    qn = q / np.linalg.norm(q, axis=1, keepdims=True)
    return np.argsort(-(qn @ xn.T), axis=1)[:, :k]


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_exact_search_matches_numpy_and_refuses_other_models(tmp_path, engine):
    x, q = _data(), _data(20, seed=1)
    index = EdgeIndex(tmp_path) if engine == "edge" else ClientIndex(":memory:")
    payloads = [{"chunk_id": f"c{i}", "doc_id": f"d{i // 3}"} for i in range(len(x))]
    assert index.ensure(_meta("col", len(x), 16), x, payloads) is True
    assert index.ensure(_meta("col", len(x), 16), x, payloads) is False  # complete: reused, not rebuilt
    hits = index.search("col", q, "m@1", 10, exact=True)
    np.testing.assert_array_equal(np.stack(hits.ids), _brute_force(x, q, 10))
    assert all(np.all(np.diff(s) <= 1e-6) for s in hits.scores)
    with pytest.raises(IndexMismatchError, match="holds vectors of m@1; refusing to search it with vectors of m@2"):
        index.search("col", q, "m@2", 10)
    with pytest.raises(IndexMismatchError, match="dimension"):
        index.search("col", q[:, :8], "m@1", 10)


def test_edge_hnsw_is_real_and_an_incomplete_collection_is_rebuilt(tmp_path):
    x, q = _data(2000, 32), _data(50, 32, seed=3)
    index = EdgeIndex(tmp_path)
    index.ensure(_meta("col", len(x), 32), x, [{} for _ in x])
    exact = np.stack(index.search("col", q, "m@1", 10, exact=True).ids)
    approx = index.search("col", q, "m@1", 10, hnsw_ef=64).ids
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])
    assert recall > 0.8
    index.close()
    (tmp_path / "qdrant-edge" / "col" / "ragbench.json").unlink()  # as if killed before the completion marker
    fresh = EdgeIndex(tmp_path)
    with pytest.raises(IndexMismatchError, match="does not exist or is incomplete"):
        fresh.search("col", q, "m@1", 10)
    assert fresh.ensure(_meta("col", len(x), 32), x, [{} for _ in x]) is True


def test_atomic_writes_leave_no_partial_file(tmp_path):
    import pyarrow as pa

    path = tmp_path / "t.parquet"
    atomic_write_parquet(pa.table({"a": [1, 2]}), path)
    assert pq.read_table(path).num_rows == 2 and not list(tmp_path.glob("*.tmp"))


def test_vector_cache_embeds_each_text_once_across_calls_and_roles(tmp_path):
    cache = VectorCache(tmp_path, segment_rows=4)
    spec = EmbedderSpec(model="all-MiniLM-L6-v2")
    texts = [f"text number {i}" for i in range(10)] + ["text number 1"]  # one duplicate
    v1, s1 = embed_texts(texts, spec, "document", cache, segment_rows=4)
    assert (s1.requested, s1.unique, s1.cached, s1.computed) == (11, 10, 0, 10)
    assert len(list((cache.root).rglob("seg-*.parquet"))) == 3  # 4 + 4 + 2: each segment written on its own
    v2, s2 = embed_texts(texts[:5] + ["a new one"], spec, "document", cache)
    assert (s2.cached, s2.computed) == (5, 1)
    np.testing.assert_allclose(v2[:5], v1[:5])
    _, s3 = embed_texts(texts[:2], spec, "query", cache)  # another role is another key
    assert s3.computed == 2
    (cache.root / "junk.parquet.tmp").write_bytes(b"half written")  # a killed writer's leftover is never read
    _, s4 = embed_texts(texts, spec, "document", cache)
    assert s4.computed == 0


def test_a_polars_column_embeds_into_the_same_segments_as_a_list(tmp_path, monkeypatch):
    """A chunk table's column is read a batch at a time, never whole: the cache gets the same segments (same
    texts, same order: longest first, first occurrence wins) and the same vectors as from a Python list."""
    import polars as pl

    from ragbench.embedding import embed

    monkeypatch.setattr(embed, "HASH_BATCH", 3)  # hashing crosses batch boundaries
    spec = EmbedderSpec(model="static-retrieval-m2v")
    texts = [f"text {'x' * (i % 4)} number {i} ü" for i in range(11)] + ["text  number 1 ü", "text x number 1 ü"]
    as_list, as_column = VectorCache(tmp_path / "a", segment_rows=4), VectorCache(tmp_path / "b", segment_rows=4)
    v1, s1 = embed_texts(texts, spec, "document", as_list, segment_rows=4)
    v2, s2 = embed_texts(pl.Series(texts), spec, "document", as_column, segment_rows=4)
    assert (s2.requested, s2.unique, s2.computed) == (s1.requested, s1.unique, s1.computed) == (13, 12, 12)
    np.testing.assert_array_equal(v2, v1)

    def segments(cache):
        return [pq.read_table(p).column(0).to_pylist() for p in sorted(cache.root.rglob("seg-*.parquet"))]

    assert segments(as_column) == segments(as_list) and len(segments(as_list)) == 3


def test_native_hybrid_agrees_across_engines_and_with_library_rrf(tmp_path):
    """Dense + Qdrant-BM25 sparse prefetches fused by Qdrant's RRF: the embedded engine and qdrant-client give the
    same ranking, and it equals ragbench's own RRF of the two prefetch lists (1-based ranks, k = 60)."""
    import polars as pl
    from conftest import DEMO

    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset
    from ragbench.index.qdrant import bm25_sparse
    from ragbench.retrieval import RUN_SCHEMA
    from ragbench.retrieval.fusion import rrf

    demo = load_dataset(DatasetSpec(path=DEMO, queries="all"))  # real text: BM25 ties are rare
    texts = [f"{t} {x}" for t, x in demo.corpus.select("title", "text").iter_rows()]
    queries = demo.queries["text"].to_list()[:12]
    n = len(texts)
    x, q = _data(n, 16), _data(len(queries), 16, seed=9)
    sparse = bm25_sparse(texts)
    meta = CollectionMeta(name="hy", model_key="m@1", dim=16, distance="cosine", count=n, hnsw_m=16,
                          ef_construct=100, full_scan_threshold_kb=1, sparse=True)
    runs = {}
    for engine, index in [("edge", EdgeIndex(tmp_path)), ("client", ClientIndex(":memory:"))]:
        index.ensure(meta, [(np.arange(n), x, [{} for _ in x], sparse)])
        runs[engine] = index.hybrid_search("hy", q, queries, "m@1",
                                           HybridQuery(20, dense_depth=20, sparse_depth=20, k=60, exact=True))
    overlap = [len(set(a[:10]) & set(b[:10])) / 10 for a, b in zip(runs["edge"].ids, runs["client"].ids)]
    assert np.mean(overlap) >= 0.95  # float32 vs float64 scoring may swap a near-tie in one prefetch list
    for sa, sb in zip(runs["edge"].scores, runs["client"].scores):
        np.testing.assert_allclose(sa, sb, atol=5e-4)

    # the library's RRF over the two prefetch lists gives the same scores
    edge = EdgeIndex(tmp_path)
    dense = edge.search("hy", q, "m@1", 20, exact=True)
    from qdrant_edge import Query, QueryRequest

    (shard,) = edge._shards("hy")  # sparse collections stay one shard
    qs = bm25_sparse(queries, query=True)
    for i in range(len(queries)):
        sparse_hits = shard.query(QueryRequest(limit=20, query=Query.Nearest(qs[i], using="bm25")))
        lists = [pl.DataFrame([("q", r + 1, str(d), "d", float(s)) for r, (d, s) in
                               enumerate(zip(dense.ids[i], dense.scores[i]))], schema=RUN_SCHEMA, orient="row"),
                 pl.DataFrame([("q", r + 1, str(p.id), "d", float(p.score)) for r, p in enumerate(sparse_hits)],
                              schema=RUN_SCHEMA, orient="row")]
        ours = rrf(lists, k=60, depth=20)
        theirs = dict(zip(map(str, runs["edge"].ids[i]), runs["edge"].scores[i]))
        for c, s in ours.select("chunk_id", "score").iter_rows():
            if c in theirs:
                assert theirs[c] == pytest.approx(s, rel=1e-6)


def test_a_chunk_table_written_a_row_group_at_a_time_reads_back_equal(tmp_path, monkeypatch):
    """Polars tables go to Parquet a row group at a time (bounded memory): every row comes back, in order, with
    its types, NaN and null and non-ASCII intact; the file is named by its checksum and verifies."""
    import polars as pl

    import ragbench.core.cache as cache_mod
    from ragbench.core.cache import ChunkCache, atomic_write_verified

    monkeypatch.setattr(cache_mod, "PARQUET_ROW_GROUP", 2)
    table = pl.DataFrame({"chunk_id": [f"c{i}" for i in range(7)], "doc_id": ["d"] * 6 + [None],
                          "start": list(range(7)), "end": [10 * i for i in range(7)],
                          "text": ["ü €", "", "x" * 3000, "a", "b", "c", "d"], "score": [0.5, float("nan")] + [1.0] * 5})
    path = atomic_write_verified(table, tmp_path / "chunks", "k.")
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    back = pl.read_parquet(path)
    assert back.equals(table, null_equal=True) and back.schema == table.schema
    assert ChunkCache(tmp_path).entries("k") == [path]


def test_a_cached_chunk_table_with_whole_index_texts_is_read_as_prefixes_and_rewritten(tmp_path):
    """Chunk tables cached before the ``prefix`` column held each chunk's whole ``index_text`` (= prefix + text):
    they are read with the prefix recovered exactly (titles, heading trails with their newline, no prefix) and
    rewritten once in today's form, not rebuilt."""
    from conftest import DEMO

    from ragbench.chunking import chunk_corpus
    from ragbench.config import DatasetSpec, MarkdownChunker, WholeDocChunker
    from ragbench.core.cache import ChunkCache, atomic_write_verified
    from ragbench.core.schemas import index_texts
    from ragbench.data import load_dataset

    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    cache = ChunkCache(tmp_path / "cache")
    for key, spec in (("title", WholeDocChunker()), ("trail", MarkdownChunker(prefix="breadcrumb", max_tokens=64)),
                      ("none", WholeDocChunker(prefix="none"))):
        chunks = chunk_corpus(ds, spec)
        assert key == "none" or (chunks["prefix"] != "").any()
        legacy = chunks.with_columns(index_text=pl.Series(index_texts(chunks).to_list())).drop("prefix")
        atomic_write_verified(legacy, cache.root, f"{key}.")
        read, cached = cache.get_or_build(key, lambda: pytest.fail("a readable legacy entry was rebuilt"))
        assert cached and read.equals(chunks)
        (entry,) = cache.entries(key)
        assert pq.read_schema(entry).names == list(chunks.columns)
        assert cache.peek(key).equals(chunks)


def test_an_edge_collection_split_into_shards_searches_as_one(tmp_path):
    """A dense collection over several Edge shards (point id // shard_points) answers exact search with the same
    points and scores as numpy over all of them, HNSW search with recall as high, and reads every stored vector;
    a new process reopens all its shards from the stored metadata."""
    from dataclasses import replace

    x, q = _data(2000, 32), _data(50, 32, seed=3)
    payloads = [{"chunk_id": f"c{i}"} for i in range(len(x))]
    meta = replace(_meta("sharded", len(x), 32), shard_points=600)  # 4 shards: 600, 600, 600, 200 points
    index = EdgeIndex(tmp_path)
    assert meta.shards == 4 and index.ensure(meta, x, payloads) is True
    assert sorted(p.name for p in (tmp_path / "qdrant-edge" / "sharded").iterdir()) == [
        "ragbench.json", "shard", "shard-1", "shard-2", "shard-3"]
    index.close()
    reopened = EdgeIndex(tmp_path)
    assert reopened.ensure(meta, x, payloads) is False  # every shard counted: complete, reused
    hits = reopened.search("sharded", q, "m@1", 10, exact=True)
    np.testing.assert_array_equal(np.stack(hits.ids), _brute_force(x, q, 10))
    xn, qn = x / np.linalg.norm(x, axis=1, keepdims=True), q / np.linalg.norm(q, axis=1, keepdims=True)
    np.testing.assert_allclose(np.stack(hits.scores), np.sort(qn @ xn.T, axis=1)[:, ::-1][:, :10], atol=1e-5)
    approx = reopened.search("sharded", q, "m@1", 10, hnsw_ef=64).ids
    assert np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, np.stack(hits.ids))]) > 0.8
    ids = [0, 599, 600, 1999, 1234]
    np.testing.assert_allclose(reopened.vectors("sharded", ids), xn[ids], atol=1e-5)
