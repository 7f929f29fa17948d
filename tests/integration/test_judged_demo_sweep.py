"""judged@k as the demo sweep stores it equals ir_measures' ``Judged@k`` recomputed from the sweep's stored rankings
(each config's chunk ranking reduced to documents, as every document measure reads it) and the dataset's qrels."""

from __future__ import annotations

import math

import polars as pl
import pytest
from conftest import DEMO

from ragbench.config import DatasetSpec
from ragbench.core.schemas import canonical_order
from ragbench.data import load_dataset
from ragbench.evaluation.judging import document_run
from ragbench.results.store import ResultStore

ir_measures = pytest.importorskip("ir_measures")
CUTOFFS = (1, 3, 5, 10, 20)


def judged_matches(store: ResultStore, sweep_id: str, qrels: pl.DataFrame) -> int:
    """How many stored judged@k values were checked against ir_measures (each one asserted equal)."""
    ir_qrels = [ir_measures.Qrel(q, d, int(r)) for q, d, r in qrels.iter_rows()]
    measures = [ir_measures.Judged @ k for k in CUTOFFS]
    checked = 0
    for config_id in store.finished_configs(sweep_id):
        docs = canonical_order(document_run(store.rankings(sweep_id, config_id)), "doc_id")
        docs = docs.with_columns(pl.int_range(pl.len()).over("query_id").alias("r"))
        # scores strictly decreasing in the stored order: ir_measures' own tie rule cannot reorder it
        run = [ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in docs.select("query_id", "doc_id", "r").iter_rows()]
        ref = {(m.query_id, f"judged_at_{m.measure.params['cutoff']}"): m.value
               for m in ir_measures.iter_calc(measures, ir_qrels, run)}
        stored = store.query_metrics(sweep_id, config_id).filter(pl.col("measure").str.starts_with("judged_at_"))
        assert stored.height == len(CUTOFFS) * qrels["query_id"].n_unique() + len(CUTOFFS) * 2  # 2 unlabelled
        for q, m, v in stored.select("query_id", "measure", "value").iter_rows():
            if (q, m) in ref:
                assert v == pytest.approx(ref[(q, m)], abs=1e-12), (config_id, q, m)
                checked += 1
            else:
                assert math.isnan(v)  # unlabelled queries: NaN, as for every rank measure
    return checked


def test_stored_judged_at_k_equals_ir_measures_on_the_demo_sweeps_rankings(demo_sweep):
    ds = load_dataset(DatasetSpec(format="beir", path=DEMO))
    store = ResultStore(demo_sweep.home / "results.duckdb")
    assert judged_matches(store, demo_sweep.sweep_id, ds.qrels) == 20 * len(CUTOFFS) * 32
