"""Two BM25 configs on a SciFact slice: ragbench's paired tests agree with ``ranx.compare`` on the stored rankings.

ranx gets its own Qrels (from the dataset) and Runs (from the rankings in DuckDB, mapped to documents as ragbench
judges them), computes nDCG@10 itself and its own p-values: Student's t and Fisher's randomization test. The
per-query values must be identical and the p-values within 0.01 (the randomization p-values are Monte Carlo
estimates of the same exact permutation p-value, from different random streams).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from conftest import SCIFACT, requires_scifact, write_config

from ragbench.evaluation.judging import document_run
from ragbench.evaluation.stats import compare_configs
from ragbench.reporting.report import per_query_values
from ragbench.results.store import ResultStore


@requires_scifact()
def test_bm25_k1_comparison_matches_ranx(home, settings, tmp_path):
    from ranx import Qrels, Run, compare

    from ragbench.config import load_config
    from ragbench.data import load_dataset
    from ragbench.sweep import run_sweep

    cfg = load_config(write_config(tmp_path / "sf.yaml", f"""name: sf-k1
dataset: {{path: {SCIFACT}, split: test, max_queries: 200, max_docs: 2000, seed: 1}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25, k1: 1.2}}, {{kind: bm25, k1: 0.5}}]
metrics: {{measures: [ndcg], cutoffs: [10]}}
output: {{mlflow: false}}
"""))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    store = ResultStore(home / "results.duckdb")
    ids = {o.spec["retriever"]["k1"]: o.config_id for o in result.outcomes}
    pq = per_query_values(store, result.sweep_id, ["ndcg@10"])  # either spelling
    assert pq["query_id"].n_unique() == 200

    ds = load_dataset(cfg.dataset)
    qrels = Qrels({q: {d: int(r) for _, d, r in grp.iter_rows()}
                   for (q,), grp in ds.qrels.filter(pl.col("relevance") > 0).group_by("query_id")})
    runs = []
    for k1 in (1.2, 0.5):
        chunk_run = store.query("SELECT query_id, rank, chunk_id, doc_id, score FROM rankings WHERE sweep_id = ? AND "
                                "config_id = ?", [result.sweep_id, ids[k1]])
        docs = document_run(chunk_run)
        # score = -rank: ranx re-sorts by score, this keeps ragbench's order even where BM25 scores tie
        runs.append(Run({q: {d: -float(r) for _, r, d in grp.select("query_id", "rank", "doc_id").iter_rows()}
                         for (q,), grp in docs.group_by("query_id")}, name=f"k1={k1}"))

    # identical per-query nDCG@10 (binary labels: ranx's linear-gain ndcg == ragbench's exponential gain)
    for k1, run in zip((1.2, 0.5), runs):
        from ranx import evaluate

        evaluate(qrels, run, "ndcg@10", make_comparable=True)
        ranx_q = run.scores["ndcg@10"]
        ours = dict(pq.filter(pl.col("config_id") == ids[k1]).select("query_id", "value").iter_rows())
        assert set(ranx_q) <= set(ours)
        for q, v in ours.items():
            assert ranx_q.get(q, 0.0) == pytest.approx(v, abs=1e-9), (k1, q)

    n = 20_000
    for ours_test, ranx_test in (("student", "student"), ("randomization", "fisher")):
        comp = compare_configs(pq, "ndcg_at_10", test=ours_test, n_resamples=n)
        pair = comp.pair(ids[1.2], ids[0.5])
        report = compare(qrels, runs, ["ndcg@10"], stat_test=ranx_test, n_permutations=n, make_comparable=True,
                         rounding_digits=6)
        ranx_p = report.comparisons[frozenset(["k1=1.2", "k1=0.5"])]["ndcg@10"]["p_value"]
        assert pair.n == 200
        assert abs(pair.p_value - ranx_p) <= 0.01, (ours_test, pair.p_value, ranx_p)
        # with only one pair Holm changes nothing
        assert pair.p_adjusted == pytest.approx(pair.p_value)
    means = {k1: float(np.mean(pq.filter(pl.col("config_id") == ids[k1])["value"].to_numpy())) for k1 in ids}
    assert pair.mean_diff == pytest.approx(means[1.2] - means[0.5])
