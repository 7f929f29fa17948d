"""The retrieval fixes as sweep knobs, on the demo set through the real stack: hybrid fusion, a rescoring cascade,
small-to-big, a metadata filter, ANN fidelity, reachability, and per-query-class results."""

from __future__ import annotations

import json

import duckdb
import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.settings import Settings
from ragbench.sweep import run_sweep

KNOBS = f"""name: knobs
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: markdown, prefix: breadcrumb, max_tokens: 128}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers:
  - {{kind: bm25, name: bm25}}
  - {{kind: dense, exact: true, name: dense}}
  - {{kind: dense, hnsw_ef: 16, depth: 10, name: dense-ef16}}
  - {{kind: hybrid, fusion: rrf, name: hybrid}}
  - {{kind: bm25, name: bm25-rescored, rerank: {{kind: biencoder, model: all-MiniLM-L6-v2, top_n: 20, keep: 10}}}}
  - {{kind: dense, exact: true, name: dense-parents, parents: {{mode: section}}}}
  - {{kind: hybrid, name: hybrid-public, filter: {{tenant: public}}}}
  - {{kind: hybrid, name: hybrid-qdrant, engine: qdrant}}
index: {{full_scan_threshold_kb: 1}}
metrics: {{cutoffs: [1, 5, 10, 20]}}
output: {{mlflow: false}}
"""


@pytest.fixture(scope="module")
def knobs(tmp_path_factory):
    home = tmp_path_factory.mktemp("knobs")
    settings = Settings(home=home)
    result = run_sweep(load_config(write_config(home / "knobs.yaml", KNOBS)), settings)
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    ids = {o.name.split(" | ")[-1].split(" ")[0]: o.config_id for o in result.outcomes}
    yield result, con, ids
    con.close()


def _class_means(con, config_id, measure="ndcg_at_10"):
    return dict(con.execute("SELECT query_class, avg(value) FROM query_metrics WHERE config_id = ? AND measure = ? "
                            "AND NOT isnan(value) GROUP BY ALL", [config_id, measure]).fetchall())


def test_all_knobs_run(knobs):
    result, _, ids = knobs
    assert result.n_failed == 0 and len(result.outcomes) == 8
    assert set(ids) == {"bm25", "dense", "dense-ef16", "hybrid", "bm25-rescored", "dense-parents", "hybrid-public",
                        "hybrid-qdrant"}


def test_native_qdrant_hybrid_is_rrf_inside_qdrant(knobs):
    result, con, ids = knobs
    top = con.execute("SELECT max(score), min(score) FROM rankings WHERE config_id = ?",
                      [ids["hybrid-qdrant"]]).fetchall()[0]
    assert 0 < top[1] <= top[0] <= 2 / 61 + 1e-6  # RRF: at most 1/(60+1) from each of the two lists
    m = {o.config_id: o.metrics for o in result.outcomes}
    assert m[ids["hybrid-qdrant"]]["ndcg@10"] > m[ids["dense"]]["ndcg@10"] - 0.1


def test_hybrid_beats_dense_on_exact_identifiers_and_dense_wins_paraphrases(knobs):
    _, con, ids = knobs
    dense, hybrid, bm25 = (_class_means(con, ids[n]) for n in ("dense", "hybrid", "bm25"))
    assert hybrid["identifier"] > dense["identifier"]
    assert dense["paraphrase"] > bm25["paraphrase"]


def test_filter_reports_recall_with_and_without_and_returns_only_matching_docs(knobs):
    result, con, ids = knobs
    corpus = {json.loads(line)["_id"]: json.loads(line)["metadata"]["tenant"]
              for line in open(DEMO / "corpus.jsonl")}
    docs = {d for (d,) in con.execute("SELECT DISTINCT doc_id FROM rankings WHERE config_id = ?",
                                      [ids["hybrid-public"]]).fetchall()}
    assert docs and all(corpus[d] == "public" for d in docs)
    m = next(o for o in result.outcomes if o.config_id == ids["hybrid-public"]).metrics
    assert m["unfiltered_recall@10"] > m["recall@10"]  # relevant internal docs are filtered away
    assert "filter_shortfall_queries@10" in m and "filter_returned_mean" in m


def test_ann_fidelity_table_and_reachability(knobs):
    result, con, ids = knobs
    rows = con.execute("SELECT hnsw_ef, configured, recall_vs_exact FROM ann_fidelity WHERE config_id = ? "
                       "ORDER BY configured, hnsw_ef", [ids["dense-ef16"]]).fetchall()
    assert [r[0] for r in rows if not r[1]] == [16, 32, 64, 128, 256] and rows[-1][:2] == (16, True)
    assert all(0 < r[2] <= 1 for r in rows)
    assert con.execute("SELECT count(*) FROM ann_fidelity WHERE config_id = ?", [ids["bm25"]]).fetchall()[0][0] == 0
    reach = dict(con.execute("SELECT category, count(*) FROM query_diagnostics WHERE config_id = ? GROUP BY ALL",
                             [ids["hybrid-public"]]).fetchall())
    assert sum(reach.values()) == 34 and reach["unlabelled"] == 2
    m = next(o for o in result.outcomes if o.config_id == ids["dense"]).metrics
    assert sum(m[f"reach_{c}@10/50"] for c in ("hit", "ranked_badly", "unreachable")) == pytest.approx(1.0)


def test_rescoring_and_small_to_big(knobs):
    result, con, ids = knobs
    m = next(o for o in result.outcomes if o.config_id == ids["bm25-rescored"]).metrics
    assert m["rerank_ms_per_query"] > 0
    depth = con.execute("SELECT max(rank) FROM rankings WHERE config_id = ?", [ids["bm25-rescored"]]).fetchall()
    assert depth[0][0] == 10  # keep
    parents = con.execute("SELECT count(*), count(DISTINCT chunk_id) FROM rankings WHERE config_id = ? "
                          "AND query_id = 'q01'", [ids["dense-parents"]]).fetchall()[0]
    small = con.execute("SELECT count(*) FROM rankings WHERE config_id = ? AND query_id = 'q01'",
                        [ids["dense"]]).fetchall()[0][0]
    assert parents[0] == parents[1] and parents[0] < small  # parents deduplicated
    m = next(o for o in result.outcomes if o.config_id == ids["dense-parents"]).metrics
    assert 0 < m["span_recall@5"] <= 1


def test_every_knob_is_servable_as_evaluated(knobs):
    """A promoted config answers new queries through the same pipeline the sweep evaluated: its ranking for a
    dataset query equals the stored one."""
    import json

    from ragbench.promotion.serving import ProductionRetriever

    result, con, ids = knobs
    dataset_spec = json.loads(con.execute("SELECT spec_json FROM sweeps").fetchall()[0][0])["dataset"]
    question = next(json.loads(line)["text"] for line in open(DEMO / "queries.jsonl")
                    if json.loads(line)["_id"] == "q01")
    for name in ("hybrid-qdrant", "hybrid-public", "dense-parents", "bm25-rescored"):
        o = next(o for o in result.outcomes if o.config_id == ids[name])
        served = ProductionRetriever.from_config(o.spec, result.dataset_fingerprint, Settings(home=result.home),
                                                  dataset_spec)
        got = served.search([question], 5)["chunk_id"].to_list()
        stored = [c for (c,) in con.execute("SELECT chunk_id FROM rankings WHERE config_id = ? AND query_id = 'q01' "
                                            "ORDER BY rank LIMIT 5", [ids[name]]).fetchall()]
        assert got == stored, name
        served.close()


def test_serving_stores_no_query_and_reads_the_cache_once(knobs, monkeypatch):
    """A served query the sweep never embedded is encoded by the model and not written to the vector cache (a
    segment per request would grow it without end); an evaluated one is served with its cached vector; the cache's
    query hashes are read once per retriever, not per request."""
    import numpy as np

    from ragbench.core.cache import VectorCache
    from ragbench.embedding.embed import encode_uncached, model_key, prompt_hashes
    from ragbench.promotion.serving import ProductionRetriever

    result, con, ids = knobs
    dataset_spec = json.loads(con.execute("SELECT spec_json FROM sweeps").fetchall()[0][0])["dataset"]
    evaluated = next(json.loads(line)["text"] for line in open(DEMO / "queries.jsonl"))
    new = "which question did no sweep ever ask about solar panels?"
    o = next(o for o in result.outcomes if o.config_id == ids["dense"])
    served = ProductionRetriever.from_config(o.spec, result.dataset_fingerprint, Settings(home=result.home),
                                              dataset_spec)
    spec, cache = served.parsed.embedder, VectorCache(result.home / "cache")
    segments = sorted((result.home / "cache").rglob("seg-*.parquet"))
    reads = []
    known = VectorCache.known
    monkeypatch.setattr(VectorCache, "known", lambda self, *a: reads.append(a) or known(self, *a))
    for _ in range(3):
        assert served.search([new, evaluated], 5).height == 10
    assert sorted((result.home / "cache").rglob("seg-*.parquet")) == segments  # nothing stored
    assert len(reads) == 1
    vectors = served.query_vectors([new, evaluated])
    cached = cache.fetch(model_key(spec), "query", prompt_hashes([evaluated], spec.query_prompt))
    assert np.array_equal(vectors[1], cached[0])  # the vector the sweep judged it with, bit for bit
    np.testing.assert_allclose(vectors[0], encode_uncached([new], spec, "query")[0], rtol=0, atol=1e-6)
    served.close()
