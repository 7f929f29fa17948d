"""ANN fidelity on a real Qdrant Edge HNSW index of real embeddings (static Model2Vec vectors of the demo set's
sentence chunks; uniform random vectors would be HNSW's worst case and say nothing)."""

from __future__ import annotations

import numpy as np
import pytest

from ragbench.chunking import chunk_corpus
from ragbench.config import DatasetSpec, EmbedderSpec, SentenceChunker
from ragbench.core.cache import VectorCache
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.embedding.embed import embed_texts, model_key
from ragbench.evaluation.ann import EfSweep, ann_fidelity, format_table, recall_vs_exact
from ragbench.index.qdrant import CollectionMeta, EdgeIndex
from conftest import DEMO

EMB = EmbedderSpec(model="static-retrieval-m2v")


def test_recall_vs_exact_arithmetic():
    ann = [np.array([1, 2, 3]), np.array([4, 9, 8]), np.array([7])]
    exact = [np.array([3, 2, 1]), np.array([4, 5, 6]), np.array([], dtype=np.int64)]
    np.testing.assert_allclose(recall_vs_exact(ann, exact, 3), [1.0, 1 / 3, 1.0])
    np.testing.assert_allclose(recall_vs_exact([np.array([1, 9])], [np.array([1])], 2), [1.0])  # only 1 exists


def test_hnsw_ef_sweep_on_real_embeddings(tmp_path):
    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    chunks = chunk_corpus(ds, SentenceChunker(window=1))
    cache = VectorCache(tmp_path / "cache")
    dv, _ = embed_texts(index_texts(chunks).to_list(), EMB, "document", cache)
    # the 34 demo queries plus every 10th chunk text as a query: ~150 queries
    qv, _ = embed_texts(ds.queries["text"].to_list() + chunks["text"].to_list()[::10], EMB, "query", cache)
    index = EdgeIndex(tmp_path)
    meta = CollectionMeta(name="col", model_key=model_key(EMB), dim=dv.shape[1], distance="cosine",
                          count=len(dv), hnsw_m=16, ef_construct=100, full_scan_threshold_kb=1)  # 1 KB: HNSW used
    index.ensure(meta, dv, [{} for _ in range(len(dv))])
    table = ann_fidelity(index, "col", qv, model_key(EMB), EfSweep(k=10, ef_values=(16, 32, 64, 128, 256)))
    print(format_table(table))
    swept = table.filter(~table["configured"])
    recall = swept["recall_vs_exact"].to_numpy()
    assert swept["hnsw_ef"].to_list() == [16, 32, 64, 128, 256]
    assert np.all(np.diff(recall) >= -0.02)            # monotone in ef, up to graph-search noise
    assert recall[-1] >= 0.95
    assert recall[0] < 0.99                            # at ef 16 the graph really is approximate (not brute force)
    conf = table.filter(table["configured"])
    assert conf.height == 1 and conf["hnsw_ef"][0] is None
    assert (table["ms_per_query_ann"] > 0).all() and (table["ms_per_query_exact"] > 0).all()
    # searched with limit = depth, Qdrant explores max(ef, depth): ef 16 at depth 100 is as good as ef 100
    deep = ann_fidelity(index, "col", qv, model_key(EMB), EfSweep(k=10, ef_values=(16,), depth=100,
                                                                  include_configured=False))
    assert deep["depth"][0] == 100 and deep["recall_vs_exact"][0] >= recall[0]
    with pytest.raises(ValueError, match="need 1 <= k <= depth"):
        ann_fidelity(index, "col", qv, model_key(EMB), EfSweep(k=10, depth=5))
    index.close()


def test_a_sweep_measures_a_collections_ann_fidelity_once_for_its_dense_and_hybrid_configs(tmp_path, settings,
                                                                                            monkeypatch):
    """The table depends on the collection, the query vectors and the swept values only: the dense and the hybrid
    config over one collection store the same rows, measured once."""
    import duckdb

    from ragbench.config import load_config
    from ragbench.sweep import evaluate, run_sweep
    from conftest import write_config

    measured = []
    real = evaluate.ann_fidelity
    monkeypatch.setattr(evaluate, "ann_fidelity", lambda index, collection, *a, **k: measured.append(collection)
                        or real(index, collection, *a, **k))
    cfg = load_config(write_config(tmp_path / "ann.yaml", f"""name: ann-once
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: sentences, window: 1}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: dense, exact: true}}, {{kind: hybrid, fusion: rrf, dense: {{exact: true}}}}]
output: {{mlflow: false}}
"""))
    result = run_sweep(cfg, settings)
    assert len(measured) == 2 and len(set(measured)) == 2  # one per chunker's collection, for 4 configs
    with duckdb.connect(str(settings.home / "results.duckdb"), read_only=True) as con:
        rows = con.execute("SELECT config_id, list(recall_vs_exact ORDER BY hnsw_ef NULLS LAST), "
                           "list(ms_per_query_ann ORDER BY hnsw_ef NULLS LAST) FROM ann_fidelity WHERE sweep_id = ? "
                           "GROUP BY config_id", [result.sweep_id]).fetchall()
    chunker_of = {c.config_id: c.chunker.spec_id for c in cfg.expand()}
    assert len(rows) == 4
    by_chunker = {}
    for config_id, recall, ms in rows:
        by_chunker.setdefault(chunker_of[config_id], []).append((recall, ms))
    assert all(len(t) == 2 and t[0] == t[1] for t in by_chunker.values())
