"""Sweeps on the long SQuAD-style fixture (whole articles of 600-660 MiniLM tokens).

A warm rerun costs seconds: a config already evaluated on the same data, with the same spec, evaluation settings
and EVALUATION_VERSION reuses its stored results (no chunking, no retrieval, no scoring); `--fresh` forces a new
evaluation; changing an evaluation setting or the version re-evaluates. And the embedder's window is measured:
what share of the chunks it truncates and of their tokens it never reads, stored and warned next to the score."""

from __future__ import annotations

import logging

import pytest
from conftest import ROOT, without_costs, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.results.store import ResultStore
from ragbench.results.store_schema import PER_CONFIG_TABLES
from ragbench.sweep import run_sweep

LONG = ROOT / "tests" / "fixtures" / "squad_long.json"
SWEEP = f"""name: warm
dataset: {{format: squad, path: {LONG}, squad_documents: article, queries: all}}
chunkers: [{{kind: whole}}, {{kind: sentences, window: 3}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 3, 10]}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _run(cfg, settings, **kw):
    collect, logger = _Collect(), logging.getLogger("ragbench")
    logger.addHandler(collect)
    old = logger.level
    logger.setLevel(logging.INFO)
    try:
        return run_sweep(cfg, settings, **kw), "\n".join(collect.lines)
    finally:
        logger.removeHandler(collect)
        logger.setLevel(old)


@pytest.fixture
def cold(home, settings, tmp_path):
    cfg = load_config(write_config(tmp_path / "warm.yaml", SWEEP))
    result, log = _run(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 4 and not any(o.reused_from for o in result.outcomes)
    return cfg, result, log


def test_embedder_window_truncation_is_stored_and_warned_next_to_the_score(cold, home):
    _, first, log = cold
    store = ResultStore(home / "results.duckdb")
    names = store.config_names(first.sweep_id)
    by = {(names[c], s): v for c, s, v in store.chunk_stats(first.sweep_id).iter_rows()}
    whole, sent = "whole | all-MiniLM-L6-v2 | dense-exact", "sent3s3 | all-MiniLM-L6-v2 | dense-exact"
    assert by[(whole, "embed_window_tokens")] == 254                  # 256 minus [CLS] and [SEP]
    assert by[(whole, "chunks_over_embed_window")] == 1.0             # every article is longer
    assert 0.5 < by[(whole, "tokens_never_embedded")] < 0.7          # ~630 tokens each, 254 read
    assert by[(sent, "chunks_over_embed_window")] == 0.0 and by[(sent, "tokens_never_embedded")] == 0.0
    assert not any(n.endswith("bm25(k1=1.2,b=0.75)") and s == "tokens_never_embedded" for n, s in by)
    by_name = {o.name: o for o in first.outcomes}
    score = by_name[whole].metrics["ndcg@10"]
    # log lines name a config by its label, the one name every surface uses
    assert f"config {by_name[whole].label} (ndcg_at_10 = {score:.4f}): 100% of its chunks are longer than the " \
           "embedder's 254-token window" in log
    assert f"config {by_name[sent].label} (" not in log.split("never embedded")[0]   # none for a chunker that fits


def test_an_unchanged_rerun_reuses_every_config_and_says_from_which_sweep(cold, home, settings, monkeypatch):
    cfg, first, _ = cold
    import ragbench.sweep.work as orch  # the stage functions the sweep's graph calls

    def no_evaluation(*a, **k):
        raise AssertionError("a reused config was evaluated again")
    monkeypatch.setattr(orch, "evaluate_config", no_evaluation)
    monkeypatch.setattr(orch, "chunk_stage", no_evaluation)
    second, log = _run(cfg, settings)
    assert second.sweep_id != first.sweep_id and second.n_failed == 0
    assert second.vectors_computed == 0 and not second.embed_stats
    assert all(o.reused_from == first.sweep_id for o in second.outcomes)
    assert log.count(f"reused the results of sweep {first.sweep_id}") == 4
    assert {o.config_id: o.metrics for o in second.outcomes} == {o.config_id: o.metrics for o in first.outcomes}

    store = ResultStore(home / "results.duckdb")
    for table in ("query_metrics", "rankings", "config_metrics", "chunk_stats"):
        n = store.query(f"SELECT sweep_id, count(*) AS n FROM {table} GROUP BY 1 ORDER BY 1")["n"].to_list()
        assert len(n) == 2 and n[0] == n[1] > 0, table            # the new sweep holds a full copy of every row
    for table in PER_CONFIG_TABLES:  # ... the same rows, the sweep id aside
        rows = [f"SELECT * EXCLUDE (sweep_id) FROM {table} WHERE sweep_id = '{s}'" for s in (first.sweep_id,
                                                                                           second.sweep_id)]
        assert store.query(f"({rows[0]} EXCEPT ALL {rows[1]}) UNION ALL ({rows[1]} EXCEPT ALL {rows[0]})"
                           ).height == 0, table
    rows = store.query("SELECT reused_from FROM configs WHERE sweep_id = ?", [second.sweep_id])
    assert rows["reused_from"].to_list() == [first.sweep_id] * 4
    # a third run names the sweep that evaluated the results, not the one that copied them
    third, log = _run(cfg, settings)
    assert all(o.reused_from == first.sweep_id for o in third.outcomes)
    rows = store.query("SELECT reused_from FROM configs WHERE sweep_id = ?", [third.sweep_id])
    assert rows["reused_from"].to_list() == [first.sweep_id] * 4
    assert store.leaderboard(third.sweep_id).height == 4


def test_fresh_and_changed_settings_evaluate_again(cold, settings, tmp_path):
    cfg, first, _ = cold
    fresh, log = _run(cfg, settings, fresh=True)
    assert not any(o.reused_from for o in fresh.outcomes) and "reused the results" not in log
    def results(outcomes):  # timings and sizes measured anew differ; every result is the same
        return {o.config_id: without_costs(o.metrics) for o in outcomes}

    assert results(fresh.outcomes) == results(first.outcomes)
    # an evaluation setting changed (another cutoff): nothing is reused
    changed = load_config(write_config(tmp_path / "c.yaml", SWEEP.replace("[1, 3, 10]", "[1, 3, 5, 10]")))
    result, _ = _run(changed, settings)
    assert not any(o.reused_from for o in result.outcomes) and "recall@5" in result.outcomes[0].metrics
    # one chunker added: the four known configs are reused, the new two evaluated
    more = load_config(write_config(tmp_path / "m.yaml", SWEEP.replace(
        "{kind: sentences, window: 3}]", "{kind: sentences, window: 3}, {kind: sentences, window: 1}]")))
    result, _ = _run(more, settings)
    assert sum(bool(o.reused_from) for o in result.outcomes) == 4 and len(result.outcomes) == 6


def test_a_new_evaluation_version_re_evaluates(cold, settings, monkeypatch):
    cfg, _, _ = cold
    import ragbench.sweep.evaluate as ev

    monkeypatch.setattr(ev, "EVALUATION_VERSION", ev.EVALUATION_VERSION + 1)
    result, log = _run(cfg, settings)
    assert not any(o.reused_from for o in result.outcomes) and "reused the results" not in log


def test_cli_fresh_flag(cold, home, tmp_path):
    cfg_path = tmp_path / "warm.yaml"  # written by the cold fixture
    res = CliRunner().invoke(app, ["sweep", str(cfg_path), "--orchestrator", "local", "--home", str(home), "--json"])
    assert res.exit_code == 0, res.output
    store = ResultStore(home / "results.duckdb")
    latest = store.latest_sweep_id("warm")
    assert store.query("SELECT count(reused_from) AS n FROM configs WHERE sweep_id = ?", [latest])["n"][0] == 4
    res = CliRunner().invoke(app, ["sweep", str(cfg_path), "--orchestrator", "local", "--home", str(home), "--json",
                                   "--fresh"])
    assert res.exit_code == 0, res.output
    latest = store.latest_sweep_id("warm")
    assert store.query("SELECT count(reused_from) AS n FROM configs WHERE sweep_id = ?", [latest])["n"][0] == 0


def test_a_warm_rerun_in_a_new_process_imports_no_model_library(cold, home, tmp_path):
    """Everything reused: the rerun and its report never import torch, sentence-transformers or scipy.stats (1-2 s of
    a warm process here; the questions-needed estimate uses scipy.special's lighter distribution functions;
    benchmarks/sweep_overhead.py measures the whole)."""
    import subprocess
    import sys

    script = f"""import sys
from ragbench import Settings, load_config, publish_sweep, run_sweep
settings = Settings.from_env(home={str(home)!r}).replace(mlflow_tracking_uri=None, qdrant_url=None,
                                                          qdrant_api_key=None)
result = run_sweep(load_config({str(tmp_path / 'warm.yaml')!r}), settings)
assert all(o.reused_from for o in result.outcomes), "not a warm rerun"
publish_sweep(result.sweep_id, settings, mlflow=False)
print(sorted(m for m in ("torch", "sentence_transformers", "transformers", "scipy.stats") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False,
                         env={**__import__("os").environ, "RAGBENCH_PROGRESS": "0"}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
