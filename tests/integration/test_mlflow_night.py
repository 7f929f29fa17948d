"""MLflow reads as a night: a sweep's parent run has every config of the sweep as a child (reused ones logged
without being recomputed, tagged with the sweep that computed them), the grid as params, and children that carry
rank, CI bounds, p against the best and the tied flag; the parent's description stays under MLflow's limit.

Cheap grids: BM25 variants on the demo set (no embedding model), through run_sweep, publish_sweep and the MLflow API.
"""

from __future__ import annotations

import logging
import warnings

import polars as pl
import pytest
from conftest import DEMO, write_config
from mlflow.tracking import MlflowClient

from ragbench.config import load_config
from ragbench.results.night import COMPUTED_IN, COMPUTED_RUN
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep
from ragbench.sweep.publish import DESCRIPTION_LIMIT, LEADERBOARD_ARTIFACT, publish_sweep

BM25S = "[{kind: bm25}, {kind: bm25, k1: 0.9, b: 0.4}]"


def night(chunkers: str, retrievers: str = BM25S, name: str = "night") -> str:
    return f"""name: {name}
dataset: {{path: {DEMO}, queries: all}}
chunkers: {chunkers}
retrievers: {retrievers}
metrics: {{cutoffs: [1, 5, 10], primary: ndcg@10}}
ann_fidelity: {{enabled: false}}
"""


def _client(home) -> MlflowClient:
    return MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")


def _runs(client: MlflowClient, experiment: str, sweep_id: str, kind: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`ragbench.sweep_id` = '{sweep_id}' and "
                                                                  f"tags.`ragbench.kind` = '{kind}'")


@pytest.fixture(scope="module")
def two_nights(tmp_path_factory):
    """Night 1: two chunkers x two BM25s; its best is promoted; night 2 adds a chunker (6 configs, 4 reused). Both
    published."""
    from ragbench.core.settings import Settings
    from ragbench.promotion.production import PromotionRequest, promote

    tmp = tmp_path_factory.mktemp("nights")
    home = tmp / "home"
    settings = Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    first = run_sweep(load_config(write_config(tmp / "n1.yaml", night(
        "[{kind: whole}, {kind: recursive, size: 128, overlap: 0}]"))), settings)
    publish_sweep(first.sweep_id, settings, out_dir=tmp / "r1")
    promote(ResultStore(home / "results.duckdb"), PromotionRequest(first.sweep_id, "1"), settings=settings)
    second = run_sweep(load_config(write_config(tmp / "n2.yaml", night(
        "[{kind: whole}, {kind: recursive, size: 128, overlap: 0}, {kind: fixed, size: 64, overlap: 16}]"))),
        settings)
    published = publish_sweep(second.sweep_id, settings, out_dir=tmp / "r2")
    return home, first, second, published


def test_second_parent_has_every_config_as_a_child(two_nights):
    home, first, second, published = two_nights
    client = _client(home)
    assert len(first.outcomes) == 4 and len(second.outcomes) == 6
    reused = {o.config_id for o in second.outcomes if o.reused_from}
    assert len(reused) == 4  # night 2 recomputed only the new chunker's configs

    children = _runs(client, "ragbench/night", second.sweep_id, "config")
    assert len(children) == len(second.outcomes)
    parent = _runs(client, "ragbench/night", second.sweep_id, "sweep")[0]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    first_runs = {c.data.tags["ragbench.config_id"]: c.info.run_id
                  for c in _runs(client, "ragbench/night", first.sweep_id, "config")}
    assert len(first_runs) == 4  # night 1 keeps its own children
    store = ResultStore(home / "results.duckdb")
    for c in children:
        cid, tags = c.data.tags["ragbench.config_id"], c.data.tags
        if cid in reused:
            assert tags[COMPUTED_IN] == first.sweep_id and tags[COMPUTED_RUN] == first_runs[cid]
            assert c.info.run_id != first_runs[cid]
        else:
            assert tags[COMPUTED_IN] == second.sweep_id
        means = store.config_means(second.sweep_id, cid)  # the reused child's metrics are DuckDB's
        assert c.data.metrics["ndcg_at_10"] == pytest.approx(means["ndcg_at_10"], abs=1e-12)


def test_children_carry_rank_ci_and_the_test_against_the_best(two_nights):
    home, _, second, published = two_nights
    report = published.report
    children = {c.data.tags["ragbench.config_id"]: c
                for c in _runs(_client(home), "ragbench/night", second.sweep_id, "config")}
    rows = {r["config_id"]: r for r in report.board.dicts()}
    summary = report.summary.filter(pl.col("measure") == "ndcg_at_10")
    ranks = sorted(int(c.data.metrics["rank"]) for c in children.values())
    assert ranks == list(range(1, len(children) + 1))
    for cid, c in children.items():
        m, r = c.data.metrics, summary.filter(pl.col("config_id") == cid).row(0, named=True)
        assert m["ndcg_at_10_ci_low"] == pytest.approx(r["ci_low"]) and m["ndcg_at_10_ci_high"] == pytest.approx(
            r["ci_high"])
        assert m["ndcg_at_10_ci_low"] <= m["ndcg_at_10"] <= m["ndcg_at_10_ci_high"]
        assert int(m["rank"]) == rows[cid]["rank"]
        assert m["tied_with_best"] == float(r["tied_with_best"])
        assert c.data.tags["ragbench.tied_with_best"] == str(r["tied_with_best"]).lower()
        if cid == report.best:
            assert m["rank"] == 1 and c.data.tags["ragbench.mark"] == "★"
        else:
            assert m["p_vs_best"] == pytest.approx(rows[cid]["p_vs_best"])
    assert max(children.values(), key=lambda c: c.data.metrics["ndcg_at_10"]).data.metrics["rank"] == 1


def test_children_carry_their_difference_to_production(two_nights):
    home, first, second, published = two_nights
    vp = published.report.vs_production
    assert vp is not None and vp.values_from == second.sweep_id  # production is one of night 2's reused configs
    children = {c.data.tags["ragbench.config_id"]: c
                for c in _runs(_client(home), "ragbench/night", second.sweep_id, "config")}
    prod = children[vp.production.config_id]
    assert prod.data.metrics["ndcg_at_10_vs_production"] == 0.0
    best = children[vp.best.config_id].data
    # the report's paired comparison (reporting/since.py) computes the best's difference on its own
    assert best.metrics["ndcg_at_10_vs_production"] == pytest.approx(vp.change.mean_diff, abs=1e-12)
    assert best.metrics["n_vs_production"] == vp.change.n
    assert vp.production.label in best.tags["ragbench.vs_production"]
    # every config scored the same labelled queries as production: the paired mean difference is the difference of
    # the stored means (aggregated by the evaluation, not by the code under test)
    base = prod.data.metrics["ndcg_at_10"]
    diffs = {cid: c.data.metrics["ndcg_at_10_vs_production"] for cid, c in children.items()}
    assert diffs == {cid: pytest.approx(c.data.metrics["ndcg_at_10"] - base, abs=1e-9) for cid, c in children.items()}
    assert any(abs(d) > 1e-6 for d in diffs.values())


def test_the_grid_is_the_parents_params(two_nights):
    home, first, second, _ = two_nights
    client = _client(home)
    p1 = _runs(client, "ragbench/night", first.sweep_id, "sweep")[0].data.params
    p2 = _runs(client, "ragbench/night", second.sweep_id, "sweep")[0].data.params
    assert p2["configs"] == "6" and p1["configs"] == "4"
    assert p2["chunkers"] == "whole document; recursive 128 tok, overlap 0; fixed 64 tok, overlap 16"
    assert p2["retrievers"] == "BM25; BM25 k1=0.9 b=0.4" and p2["k"] == "1,5,10"
    assert p2["grid.chunkers.2.size"] == "64" and "grid.chunkers.2.size" not in p1
    assert p2["grid.retrievers.1.k1"] == "0.9" and p2["dataset_fingerprint"] == second.dataset_fingerprint
    assert all(len(v) <= 6000 for v in p2.values())


def test_the_full_leaderboard_is_an_artifact_of_the_parent(two_nights, tmp_path):
    home, _, second, published = two_nights
    client = _client(home)
    parent = _runs(client, "ragbench/night", second.sweep_id, "sweep")[0]
    path = client.download_artifacts(parent.info.run_id, LEADERBOARD_ARTIFACT, str(tmp_path))
    text = open(path, encoding="utf-8").read()
    assert all(published.report.label_of(c) in text or "|" in text for c in published.report.configs["config_id"])
    assert LEADERBOARD_ARTIFACT in parent.data.tags["mlflow.note.content"]


def test_a_25_config_description_stays_under_mlflows_limit(home, settings, tmp_path, caplog):
    chunkers = ("[{kind: whole}, {kind: recursive, size: 128, overlap: 0}, {kind: fixed, size: 64, overlap: 16}, "
                "{kind: fixed, size: 128, overlap: 32}, {kind: sentences, window: 3}]")
    retrievers = ("[{kind: bm25}, {kind: bm25, k1: 0.9, b: 0.4}, {kind: bm25, k1: 1.5, b: 0.9}, "
                  "{kind: bm25, k1: 2.0, b: 0.6}, {kind: bm25, k1: 0.6, b: 0.3}]")
    result = run_sweep(load_config(write_config(tmp_path / "big.yaml", night(chunkers, retrievers, "big"))),
                       settings)
    assert len(result.outcomes) == 25 and result.n_failed == 0
    caplog.set_level(logging.WARNING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        published = publish_sweep(result.sweep_id, settings, out_dir=tmp_path / "report")
    parent = _runs(_client(home), "ragbench/big", result.sweep_id, "sweep")[0]
    description = parent.data.tags["mlflow.note.content"]
    assert len(description) < DESCRIPTION_LIMIT
    assert published.report.label_of(published.report.best) in description
    assert f"Full leaderboard: `{LEADERBOARD_ARTIFACT}`" in description
    leaked = [r.getMessage() for r in caplog.records if r.name.startswith("mlflow")] + [str(w.message)
                                                                                        for w in caught]
    assert not [m for m in leaked if "truncat" in m.lower() or "8000" in m], leaked
    assert len(_runs(_client(home), "ragbench/big", result.sweep_id, "config")) == 25


def test_an_unchanged_night_in_a_new_process_logs_every_child_once_and_draws_no_plot(two_nights, tmp_path):
    """Night 2 again, every config reused, in a fresh process with MLflow on: one child per config under the new
    parent (none doubled), the sweep's and every config's plots logged, each copied from the plot cache (night 2
    drew them from the same data), so matplotlib is never imported."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    home, _, second, _ = two_nights
    cfg = write_config(tmp_path / "n3.yaml", night(
        "[{kind: whole}, {kind: recursive, size: 128, overlap: 0}, {kind: fixed, size: 64, overlap: 16}]"))
    script = f"""import sys
from ragbench import Settings, load_config, publish_sweep, run_sweep
settings = Settings.from_env(home={str(home)!r}).replace(mlflow_tracking_uri=None, qdrant_url=None,
                                                          qdrant_api_key=None)
result = run_sweep(load_config({str(cfg)!r}), settings)
assert all(o.reused_from for o in result.outcomes), "not a warm rerun"
publish_sweep(result.sweep_id, settings, out_dir={str(tmp_path / 'r3')!r})
print(result.sweep_id, "matplotlib" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False,
                         env={**os.environ, "RAGBENCH_PROGRESS": "0"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    sweep_id, imported = out.stdout.split()[-2:]
    assert imported == "False"
    client = _client(home)
    children = _runs(client, "ragbench/night", sweep_id, "config")
    assert sorted(c.data.tags["ragbench.config_id"] for c in children) == sorted(o.config_id
                                                                                 for o in second.outcomes)
    assert all(c.info.status == "FINISHED" and c.data.params["config_id"] for c in children)
    parent = _runs(client, "ragbench/night", sweep_id, "sweep")[0]
    assert {a.path for a in client.list_artifacts(parent.info.run_id, "plots")} >= {"plots/recall_at_k.png"}
    for c in children:
        assert {a.path for a in client.list_artifacts(c.info.run_id, "plots")} == {"plots/config.png"}
