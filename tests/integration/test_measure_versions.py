"""Per-component versions. A rank measure's version is stored with each config's results; a warm rerun after one
measure's version changed recomputes that measure only, from the stored rankings (no chunking, retrieval or
embedding), and copies everything else. A chunker's or retriever's version is folded into the keys that depend on
it, and only above 1 (so keys made before versions stay byte-identical: tests/integration/test_golden_keys.py)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from conftest import DEMO, write_config

from ragbench.chunking import CHUNKERS
from ragbench.config import load_config
from ragbench.core.cache import ChunkCache
from ragbench.core.schemas import RUN_SCHEMA
from ragbench.embedding.embed import model_key
from ragbench.embedding.spec import EmbedderSpec
from ragbench.evaluation.measures import MEASURE_VERSIONS, RANK_MEASURES, measure_version, rank_measure
from ragbench.results.store import ResultStore
from ragbench.retrieval import RETRIEVERS
from ragbench.sweep import run_sweep
from ragbench.index.build import collection_for
from ragbench.index.spec import IndexSpec
from ragbench.results.outcomes import ConfigResult, config_level
from ragbench.sweep.evaluate import EVALUATION_VERSION, component_versions, evaluation_key, plan_measure_refresh
from ragbench.sweep.plan import EvaluationSpec

SWEEP = f"""name: versions
dataset: {{path: {DEMO}, queries: all, holdout: 0.3}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
retrievers: [{{kind: bm25}}]
metrics: {{measures: [mrr, ndcg, recall], cutoffs: [1, 5, 10], primary: ndcg@10}}
output: {{mlflow: false}}
"""


def test_versions_fold_into_keys_only_above_one(tmp_path, monkeypatch):
    cfg = load_config(write_config(tmp_path / "v.yaml", SWEEP))
    c = cfg.expand()[0]
    spec = EvaluationSpec.of(cfg)
    chunk_key, eval_key = ChunkCache.key("fp", c.chunker), evaluation_key(c, "fp", spec)
    emb, index = EmbedderSpec(model="static-retrieval-m2v"), IndexSpec()
    collection = collection_for("fp", c.chunker, emb, index)
    assert chunk_key == ChunkCache.key("fp", c.chunker.canonical())  # version 1: the key made before versions
    assert component_versions(c) == {"chunker whole": 1, "retriever bm25": 1}
    monkeypatch.setattr(CHUNKERS.get("whole"), "version", 2)
    assert ChunkCache.key("fp", c.chunker) != chunk_key
    assert evaluation_key(c, "fp", spec) != eval_key  # the chunks changed, so the results did
    assert collection_for("fp", c.chunker, emb, index) != collection  # and the index of them
    monkeypatch.setattr(CHUNKERS.get("whole"), "version", 1)
    assert (ChunkCache.key("fp", c.chunker), evaluation_key(c, "fp", spec)) == (chunk_key, eval_key)
    assert collection_for("fp", c.chunker, emb, index) == collection
    vectors = model_key(emb)
    monkeypatch.setattr(EmbedderSpec, "version", 2)  # new embedding code: new vectors, a new collection of them
    assert model_key(emb) != vectors and collection_for("fp", c.chunker, emb, index) != collection
    monkeypatch.setattr(EmbedderSpec, "version", 1)
    assert model_key(emb) == vectors
    monkeypatch.setattr(RETRIEVERS.get("bm25"), "version", 3)
    assert component_versions(c)["retriever bm25"] == 3
    assert evaluation_key(c, "fp", spec) != eval_key
    assert ChunkCache.key("fp", c.chunker) == chunk_key  # a retriever's version is no business of the chunks
    monkeypatch.setattr(RETRIEVERS.get("bm25"), "version", 1)
    monkeypatch.setitem(MEASURE_VERSIONS, "mrr", 2)  # a measure's version recomputes that measure, not the config
    assert evaluation_key(c, "fp", spec) == eval_key
    assert EVALUATION_VERSION == 4  # still in every key: changing it re-evaluates everything


def test_a_measure_version_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="version must be an integer >= 1"):
        rank_measure("bad_measure", version=0)
    assert "bad_measure" not in RANK_MEASURES and measure_version("ndcg") == 1


def _rows(store: ResultStore, sweep_id: str, table: str) -> pl.DataFrame:
    value = "value" if table == "query_metrics" else "mean"
    who = "query_id, " if table == "query_metrics" else ""
    return store.query(f"SELECT config_id, {who}measure, {value} AS value FROM {table} WHERE sweep_id = ? "
                       f"ORDER BY config_id, {who}measure", [sweep_id])


def _versions(store: ResultStore, sweep_id: str) -> list[dict]:
    rows = store.query("SELECT measure_versions FROM configs WHERE sweep_id = ?", [sweep_id])["measure_versions"]
    return [json.loads(v) for v in rows]


def _is_mrr(measure: pl.Expr) -> pl.Expr:
    return measure.str.contains(r"(^|_|/)mrr_at_")


def test_a_new_measure_version_recomputes_that_measure_only(home, settings, tmp_path, monkeypatch, ragbench_log):
    cfg = load_config(write_config(tmp_path / "v.yaml", SWEEP))
    first = run_sweep(cfg, settings)
    store = ResultStore(home / "results.duckdb")
    assert first.n_failed == 0  # judged (label coverage) is stored with every config's measures
    assert _versions(store, first.sweep_id) == [{"judged": 1, "mrr": 1, "ndcg": 1, "recall": 1}] * 2
    before = {t: _rows(store, first.sweep_id, t) for t in ("query_metrics", "config_metrics")}
    assert before["query_metrics"].filter(_is_mrr(pl.col("measure")))["measure"].unique().len() == 12  # 3 k x
    # (document, chunk) x (tuning, held-out)

    # the same code under a new version: recomputed from the stored rankings, every value as before
    monkeypatch.setitem(MEASURE_VERSIONS, "mrr", 2)
    ragbench_log.clear()
    second = run_sweep(cfg, settings)
    assert {o.reused_from for o in second.outcomes} == {first.sweep_id}  # copied: not retrieved again
    assert not any(": ndcg_at_10 = " in m for m in ragbench_log)  # no config was evaluated
    assert not any("(built)" in m for m in ragbench_log)  # nothing chunked
    assert sum("mrr recomputed from its stored rankings" in m for m in ragbench_log) == 2
    assert _versions(store, second.sweep_id) == [{"judged": 1, "mrr": 2, "ndcg": 1, "recall": 1}] * 2
    assert _versions(store, first.sweep_id) == [{"judged": 1, "mrr": 1, "ndcg": 1, "recall": 1}] * 2
    for table, rows in before.items():
        again = _rows(store, second.sweep_id, table)
        assert again.height == rows.height and np.allclose(again["value"], rows["value"], rtol=0, atol=1e-12,
                                                           equal_nan=True), table

    # new code under a new version: only that measure's rows change, to what the new code computes
    def half_mrr(top, ideal, n_relevant, k, gain) -> float:
        hits = np.flatnonzero(top > 0)
        return 0.5 / (hits[0] + 1) if len(hits) else 0.0

    monkeypatch.setitem(RANK_MEASURES, "mrr", half_mrr)
    monkeypatch.setitem(MEASURE_VERSIONS, "mrr", 3)
    third = run_sweep(cfg, settings)
    assert {o.reused_from for o in third.outcomes} == {first.sweep_id}
    for table, rows in before.items():
        now = _rows(store, third.sweep_id, table)
        assert now.height == rows.height
        mrr, other = _is_mrr(pl.col("measure")), ~_is_mrr(pl.col("measure"))
        assert np.allclose(now.filter(other)["value"], rows.filter(other)["value"], atol=1e-12, equal_nan=True)
        assert np.allclose(now.filter(mrr)["value"], rows.filter(mrr)["value"] / 2, atol=1e-12, equal_nan=True)
    assert third.outcomes[0].metrics["heldout_mrr_at_10"] == pytest.approx(
        first.outcomes[0].metrics["heldout_mrr_at_10"] / 2)

    # back to the first version: the newest stored results (version 3) are stale again, recomputed to the original
    monkeypatch.undo()
    assert measure_version("mrr") == 1
    fourth = run_sweep(cfg, settings)
    assert {o.reused_from for o in fourth.outcomes} == {first.sweep_id}
    assert np.allclose(_rows(store, fourth.sweep_id, "query_metrics")["value"], before["query_metrics"]["value"],
                       rtol=0, atol=1e-12, equal_nan=True)


KINDS = f"""name: kinds
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}, {{kind: bm25, filter: {{tenant: public}}}}, {{kind: bm25, parents: {{mode: window}}}}]
metrics: {{measures: [mrr, ndcg], cutoffs: [10], primary: ndcg@10}}
output: {{mlflow: false}}
"""


def test_a_stale_measure_is_recomputed_where_the_stored_ranking_suffices(home, tmp_path, monkeypatch):
    """A filtered config's unfiltered measures and a small-to-big config's parents are not stored: those configs
    are evaluated again; results stored before versions (NULL) count as version 1."""
    cfg = load_config(write_config(tmp_path / "k.yaml", KINDS))
    plain, filtered, parents = configs = cfg.expand()
    store = ResultStore(home / "results.duckdb")
    store.begin_sweep("s1", "kinds", "h", {}, "demo", "fp")
    for c, versions in zip(configs, ({"mrr": 1, "ndcg": 1}, None, {"mrr": 1, "ndcg": 1})):
        store.write_config("s1", ConfigResult(c.config_id, c.name, c.spec(), "fp", config_level({"x": 1.0}),
                                              pl.DataFrame(schema=RUN_SCHEMA), 1, 0, 0.0, measure_versions=versions))
    assert store.measure_versions("s1") == {plain.config_id: {"mrr": 1, "ndcg": 1}, filtered.config_id: {},
                                            parents.config_id: {"mrr": 1, "ndcg": 1}}
    sources, by_id, spec = {c.config_id: "s1" for c in configs}, {c.config_id: c for c in configs}, \
        EvaluationSpec.of(cfg)
    # results stored before judged@k existed get it from their stored rankings, whatever the config's kind
    none = plan_measure_refresh(store, sources, by_id, spec)
    assert (none.recompute, none.re_evaluate) == ({c.config_id: ("judged",) for c in configs}, frozenset())
    monkeypatch.setitem(MEASURE_VERSIONS, "ndcg", 2)
    refresh = plan_measure_refresh(store, sources, by_id, spec)
    assert refresh.recompute == {plain.config_id: ("ndcg", "judged")}
    assert refresh.re_evaluate == {filtered.config_id, parents.config_id}
    assert refresh.only({plain.config_id}).re_evaluate == frozenset()
