"""Rank fusion: RRF arithmetic against the formula, convex combination, and agreement with Qdrant's own RRF."""

from __future__ import annotations

import polars as pl
import pytest

from ragbench.core.schemas import index_texts
from ragbench.retrieval import RUN_SCHEMA
from ragbench.retrieval.fusion import check_run, convex, qdrant_rrf_k, rrf


def _run(rows):
    """rows: (query_id, chunk_id, score) best first; rank = position, doc_id = 'd' + chunk number."""
    out, ranks = [], {}
    for q, c, s in rows:
        ranks[q] = ranks.get(q, 0) + 1
        out.append((q, ranks[q], c, "d" + c[1:], float(s)))
    return pl.DataFrame(out, schema=RUN_SCHEMA, orient="row")


DENSE = _run([("q1", "c1", 0.9), ("q1", "c2", 0.8), ("q1", "c3", 0.7),
              ("q2", "c5", 0.5)])
BM25 = _run([("q1", "c3", 5.0), ("q1", "c4", 3.0), ("q1", "c1", 1.0),
             ("q3", "c9", 2.0)])


def _scores(run, q):
    return {c: s for qq, c, s in run.select("query_id", "chunk_id", "score").iter_rows() if qq == q}


def _order(run, q):
    return run.filter(pl.col("query_id") == q).sort("rank")["chunk_id"].to_list()


def test_rrf_matches_the_formula_exactly_with_missing_docs_and_ties():
    fused = rrf([DENSE, BM25], k=60)
    # c1: dense rank 1, bm25 rank 3; c3: dense 3, bm25 1; c2 only dense rank 2; c4 only bm25 rank 2
    assert _scores(fused, "q1") == {"c1": 1 / 61 + 1 / 63, "c3": 1 / 63 + 1 / 61, "c2": 1 / 62, "c4": 1 / 62}
    # c1 and c3 tie exactly (both best rank 1) -> chunk_id; c2 and c4 tie (both best rank 2) -> chunk_id
    assert _order(fused, "q1") == ["c1", "c3", "c2", "c4"]
    # a query present in one list only gets that list's contribution alone
    assert _scores(fused, "q2") == {"c5": 1 / 61} and _scores(fused, "q3") == {"c9": 1 / 61}
    assert fused.filter(pl.col("query_id") == "q1")["rank"].to_list() == [1, 2, 3, 4]
    assert fused.schema == pl.Schema(RUN_SCHEMA)
    assert set(zip(fused["chunk_id"], fused["doc_id"])) >= {("c1", "d1"), ("c4", "d4"), ("c9", "d9")}


def test_rrf_weights_k_and_depth():
    fused = rrf([DENSE, BM25], weights=[2.0, 1.0], k=10, depth=3)
    s = _scores(fused, "q1")
    assert s == {"c1": 2 / 11 + 1 / 13, "c3": 2 / 13 + 1 / 11, "c2": 2 / 12}  # c4 (1/12) cut by depth 3
    assert _order(fused, "q1") == ["c1", "c3", "c2"]
    # zero weight: the list is ignored for scoring, but its chunks still appear (with score 0) below the others
    only_dense = rrf([DENSE, BM25], weights=[1.0, 0.0], k=60, depth=None)
    assert _order(only_dense, "q1")[:3] == ["c1", "c2", "c3"]
    assert _scores(only_dense, "q1")["c4"] == 0.0


def test_tie_break_prefers_best_individual_rank_then_chunk_id():
    # distinct scores within each list: a list's ranks follow its scores (tied scores: the next test)
    a = _run([("q", "cB", 2), ("q", "cA", 1)])       # cB rank 1, cA rank 2
    b = _run([("q", "cA", 2), ("q", "cB", 1)])       # cA rank 1, cB rank 2 -> both 1/61 + 1/62
    c = _run([("q", "cZ", 3), ("q", "cA", 2), ("q", "cB", 1)])
    assert _order(rrf([a, b]), "q") == ["cA", "cB"]                  # same best rank 1 -> chunk_id
    d = _run([("q", "cY", 3), ("q", "cX", 2), ("q", "cZ", 1)])
    e = _run([("q", "cZ", 3), ("q", "cY", 2), ("q", "cX", 1)])
    # cX: 1/62 + 1/63, cY: 1/61 + 1/62, cZ: 1/63 + 1/61 -> cY first; cX vs cZ by score
    assert _order(rrf([d, e]), "q") == ["cY", "cZ", "cX"]
    assert _order(rrf([c]), "q") == ["cZ", "cA", "cB"]


def test_drop_nonpositive_removes_zero_score_rows_of_flagged_lists_only():
    bm = _run([("q", "c1", 2.0), ("q", "c2", 0.0), ("q", "c3", -1.0)])
    dense = _run([("q", "c4", 0.0)])
    fused = rrf([dense, bm], drop_nonpositive=[False, True])
    assert _scores(fused, "q") == {"c4": 1 / 61, "c1": 1 / 61}
    assert set(_scores(rrf([dense, bm]), "q")) == {"c1", "c2", "c3", "c4"}


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="2 weights for 1 runs"):
        rrf([DENSE], weights=[1, 2])
    with pytest.raises(ValueError, match="missing column"):
        rrf([DENSE.drop("doc_id")])
    with pytest.raises(ValueError, match="listed more than once"):
        check_run(pl.concat([DENSE, DENSE.with_columns(pl.col("rank") + 10)]))
    with pytest.raises(ValueError, match="rank 1 appears twice for query 'q1'"):
        check_run(DENSE.with_columns(pl.when(pl.col("rank") == 2).then(1).otherwise(pl.col("rank")).alias("rank")))
    with pytest.raises(ValueError, match="ranks are 1-based; found rank 0"):
        check_run(DENSE.with_columns(pl.col("rank") - 1))
    assert check_run(DENSE).equals(DENSE)  # a valid run passes unchanged
    other_doc = DENSE.with_columns(pl.lit("dX").alias("doc_id"))
    with pytest.raises(ValueError, match="different doc_ids"):
        rrf([DENSE, other_doc])
    with pytest.raises(ValueError, match="normalization"):
        convex([DENSE], normalization="zscore")


def test_convex_minmax_on_hand_made_lists():
    fused = convex([DENSE, BM25], weights=[0.5, 0.5], depth=None)
    # dense q1: 0.9, 0.8, 0.7 -> 1, 0.5, 0 ; bm25 q1: 5, 3, 1 -> 1, 0.5, 0
    s = _scores(fused, "q1")
    assert s == pytest.approx({"c1": 0.5 * 1 + 0.5 * 0, "c2": 0.5 * 0.5, "c3": 0.5 * 0 + 0.5 * 1, "c4": 0.5 * 0.5},
                              abs=1e-12)
    assert _order(fused, "q1") == ["c1", "c3", "c2", "c4"]  # ties -> best rank, then chunk_id
    # a single hit (all-equal scores) normalises to 1.0
    assert _scores(fused, "q2") == {"c5": 0.5}
    raw = convex([DENSE, BM25], normalization="none", depth=None)
    assert _scores(raw, "q1")["c3"] == pytest.approx(0.7 + 5.0)


def test_library_rrf_agrees_with_qdrant_edge_rrf(tmp_path):
    """Qdrant Edge: dense named vector + sparse BM25 vector, two prefetches fused by ``Fusion.Rrf`` inside Qdrant,
    against :func:`rrf` applied to the two prefetch result lists. Qdrant ranks from 0, so ``rrf(k=60)`` must equal
    ``Fusion.Rrf(k=61)`` (see :func:`qdrant_rrf_k`); scores are compared up to Qdrant's float32."""
    from qdrant_edge import (
        Bm25,
        Distance,
        EdgeConfig,
        EdgeShard,
        EdgeSparseVectorParams,
        EdgeVectorParams,
        Fusion,
        Modifier,
        Point,
        Prefetch,
        Query,
        QueryRequest,
        UpdateOperation,
    )

    from ragbench.chunking import chunk_corpus
    from ragbench.config import DatasetSpec, EmbedderSpec, WholeDocChunker
    from ragbench.core.cache import VectorCache
    from ragbench.data import load_dataset
    from ragbench.embedding.embed import embed_texts
    from conftest import DEMO

    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    chunks = chunk_corpus(ds, WholeDocChunker())
    texts = index_texts(chunks).to_list()
    emb = EmbedderSpec(model="static-retrieval-m2v")
    cache = VectorCache(tmp_path / "cache")
    dv, _ = embed_texts(texts, emb, "document", cache)
    qv, _ = embed_texts(ds.queries["text"].to_list(), emb, "query", cache)
    bm25 = Bm25()
    shard = EdgeShard.create(str(tmp_path / "shard"), EdgeConfig(
        vectors={"dense": EdgeVectorParams(size=dv.shape[1], distance=Distance.Cosine)},
        sparse_vectors={"bm25": EdgeSparseVectorParams(modifier=Modifier.Idf)}))
    shard.update(UpdateOperation.upsert_points([
        Point(i, {"dense": dv[i].tolist(), "bm25": bm25.embed_document(t)}, {}) for i, t in enumerate(texts)]))
    ids, docs = chunks["chunk_id"].to_list(), chunks["doc_id"].to_list()

    def as_run(qid, points):
        return pl.DataFrame([(qid, r, ids[p.id], docs[p.id], float(p.score)) for r, p in enumerate(points, 1)],
                            schema=RUN_SCHEMA, orient="row")

    depth, checked = 10, 0
    for qid, qtext, q in zip(ds.queries["query_id"], ds.queries["text"], qv):
        dense_q, sparse_q = Query.Nearest(q.tolist(), using="dense"), Query.Nearest(bm25.embed_query(qtext),
                                                                                    using="bm25")
        d = shard.query(QueryRequest(limit=depth, query=dense_q))
        s = shard.query(QueryRequest(limit=depth, query=sparse_q))
        fused_q = shard.query(QueryRequest(limit=2 * depth, query=Fusion.Rrf(k=qdrant_rrf_k(60)), prefetches=[
            Prefetch(limit=depth, query=dense_q), Prefetch(limit=depth, query=sparse_q)]))
        ours = rrf([as_run(qid, d), as_run(qid, s)], k=60, depth=None)
        theirs = {ids[p.id]: p.score for p in fused_q}
        mine = _scores(ours, qid)
        assert set(theirs) == set(mine)
        for c in mine:
            assert theirs[c] == pytest.approx(mine[c], rel=1e-6)
        # same ordering wherever the fused scores are not tied (Qdrant breaks ties its own way)
        order_q = [ids[p.id] for p in fused_q]
        assert all(mine[a] >= mine[b] - 1e-7 for a, b in zip(order_q, order_q[1:]))
        assert order_q[0] == _order(ours, qid)[0] or mine[order_q[0]] == pytest.approx(mine[_order(ours, qid)[0]])
        checked += len(s) > 0
    shard.close()
    assert checked >= 20  # most demo queries have BM25 hits, so both prefetches really contributed


def test_rrf_ranks_each_list_in_the_canonical_order_not_the_producers_order_of_ties():
    """Two chunks tied in a list take their ranks in trec_eval's order (score descending, then doc_id, chunk_id
    descending), whatever order the producer listed them in: the fused scores depend on the scores only."""
    tied = _run([("q1", "c1", 2.0), ("q1", "c2", 2.0), ("q1", "c3", 1.0)])  # producer: c1 before c2
    swapped = _run([("q1", "c2", 2.0), ("q1", "c1", 2.0), ("q1", "c3", 1.0)])  # the same list, ties the other way
    other = _run([("q1", "c3", 1.0)])
    # canonical: d2/c2 before d1/c1 (ids descending), so c2 is rank 1 and c1 rank 2 in both inputs
    for run in (tied, swapped):
        assert _scores(rrf([run, other], k=60, depth=None), "q1") == {"c2": 1 / 61, "c1": 1 / 62,
                                                                      "c3": 1 / 63 + 1 / 61}
        assert _scores(convex([run, other], depth=None), "q1") == _scores(convex([tied, other], depth=None), "q1")


def test_a_stored_hybrid_run_is_rrf_k60_of_its_stored_component_runs_exactly(tmp_path):
    """On the demo: every stored hybrid ranking equals RRF (k = 60) of the stored BM25 and dense rankings of the
    same chunker and embedder, recomputed here from the formula and ordered by trec_eval's rule: same chunks, same
    ranks, the same float scores (no tolerance)."""
    import json

    import duckdb
    from conftest import DEMO, write_config
    from typer.testing import CliRunner

    from ragbench.cli import app
    from ragbench.core.schemas import canonical_order

    cfg = write_config(tmp_path / "rrf.yaml", f"""name: rrf-exact
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: fixed, size: 48, overlap: 16}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers:
  - {{kind: bm25}}
  - {{kind: dense, exact: true}}
  - {{kind: hybrid, fusion: rrf, dense: {{exact: true}}}}
metrics: {{cutoffs: [10]}}
output: {{mlflow: false}}
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(tmp_path / "home")])
    assert res.exit_code == 0, res.output
    con = duckdb.connect(str(tmp_path / "home" / "results.duckdb"), read_only=True)
    kinds = {cid: json.loads(spec)["retriever"]["kind"]
             for cid, spec in con.execute("SELECT config_id, spec_json FROM configs").fetchall()}
    runs = {kind: pl.DataFrame(con.execute("SELECT query_id, rank, chunk_id, doc_id, score FROM rankings WHERE "
                                           "config_id = ?", [cid]).fetchall(), schema=RUN_SCHEMA, orient="row")
            .sort("query_id", "rank") for cid, kind in kinds.items()}
    con.close()
    assert set(runs) == {"bm25", "dense", "hybrid"}
    scores: dict[tuple[str, str], float] = {}
    doc_of: dict[str, str] = {}
    for kind in ("dense", "bm25"):  # the fused sum in list order, as RRF is defined: dense first, then BM25
        for q, rank, c, d, _ in runs[kind].iter_rows():
            scores[(q, c)] = scores.get((q, c), 0.0) + 1.0 / (60 + rank)
            doc_of[c] = d
    fused = pl.DataFrame([(q, 0, c, doc_of[c], s) for (q, c), s in scores.items()], schema=RUN_SCHEMA, orient="row")
    expected = canonical_order(fused).filter(pl.col("rank") <= 100).sort("query_id", "rank")
    stored = runs["hybrid"].select(expected.columns).cast(dict(expected.schema))
    assert stored.height == expected.height > 0
    assert stored.rows() == expected.rows()
