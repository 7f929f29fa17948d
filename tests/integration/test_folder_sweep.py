"""A sweep on a folder of real files: document and span metrics, the held-out set measured apart, and a rerun after
one file changed that converts and embeds only that file."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import write_config
from folder_fixture import build_folder

from ragbench.chunking import chunk_corpus
from ragbench.config import load_config
from ragbench.core.measure_keys import measure_key
from ragbench.core.schemas import index_texts
from ragbench.data import holdout_split, load_dataset
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = """name: folder-test
dataset:
  format: folder
  path: {path}
{extra}
chunkers:
  - kind: markdown
    prefix: breadcrumb
    max_tokens: 48
embedders:
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 3, 5]
  primary: ndcg@5
{show}
output:
  mlflow: false
"""



def test_folder_sweep_scores_documents_spans_and_the_held_out_set_apart(tmp_path, settings, home):
    root = build_folder(tmp_path / "docs")
    cfg = load_config(write_config(tmp_path / "sweep.yaml", SWEEP.format(path=root, extra="  holdout: 0.3",
                                                                              show="  show: [ndcg@5, heldout/ndcg@5]")))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2

    ds = load_dataset(cfg.dataset)
    split = holdout_split(ds.queries, ds.qrels, 0.3, 0)
    assert len(split.heldout) == 2 and len(split.tuning) == 7  # 8 labelled: 2 held out; the unlabelled one tunes
    store = ResultStore(home / "results.duckdb")
    board = store.leaderboard(result.sweep_id)
    for written in ("ndcg@5", "recall@5", "span_recall@5", "evidence_recall@256tok", "chunk_ndcg@5",
                    "heldout/ndcg@5", "heldout/span_recall@5", "heldout/recall@5"):
        measure = measure_key(written)  # stored as keys: heldout/ndcg@5 is heldout_ndcg_at_5
        assert measure in board.columns, measure
        assert board[measure].is_between(0, 1).all(), measure
    assert board["n_queries"].to_list() == [7, 7] and board["n_unlabelled"].to_list() == [1, 1]
    # the winner's tuning and held-out scores side by side, each over its own queries
    winner = board.sort("ndcg_at_5", descending=True).row(0, named=True)
    assert winner["ndcg_at_5"] > 0 and winner["heldout_ndcg_at_5"] == winner["heldout_ndcg_at_5"]
    metrics = store.query_metrics(result.sweep_id, winner["config_id"])
    tuned = set(metrics.filter(pl.col("measure") == "ndcg_at_5")["query_id"])
    held = set(metrics.filter(pl.col("measure") == "heldout_ndcg_at_5")["query_id"])
    assert tuned == set(split.tuning) and held == set(split.heldout) and not tuned & held
    means = store.config_means(result.sweep_id, winner["config_id"])
    expected = metrics.filter(pl.col("measure") == "heldout_ndcg_at_5")["value"].mean()
    assert means["heldout_ndcg_at_5"] == pytest.approx(expected)
    # rankings are kept for the held-out queries too (they can be explained like any other)
    assert set(split.heldout) <= set(store.rankings(result.sweep_id, winner["config_id"])["query_id"])


def test_rerun_after_one_file_changed_converts_and_embeds_only_that_file(tmp_path, settings, ragbench_log):
    root = build_folder(tmp_path / "docs")
    cfg = load_config(write_config(tmp_path / "sweep.yaml", SWEEP.format(path=root, extra="", show="")))
    first = run_sweep(cfg, settings)
    assert first.n_failed == 0
    before = chunk_corpus(load_dataset(cfg.dataset), cfg.chunkers[0])

    with open(root / "guides" / "upgrade.md", "a") as f:
        f.write("\n## Rolling back\n\nTo roll back, reinstall the previous package and restart the node.\n")
    ragbench_log.clear()
    second = run_sweep(cfg, settings)
    assert second.n_failed == 0 and second.sweep_id != first.sweep_id  # new data, new sweep
    after = chunk_corpus(load_dataset(cfg.dataset), cfg.chunkers[0])
    new_texts = set(index_texts(after)) - set(index_texts(before))
    changed = set(index_texts(after.filter(pl.col("doc_id") == "guides/upgrade.md")))
    assert new_texts and new_texts <= changed  # only the changed file has new chunks ...
    unique = len(set(index_texts(after)))
    documents = [s for s in second.embed_stats if s.requested == after.height]
    assert len(documents) == 1 and documents[0].computed == len(new_texts)  # ... and only they were embedded
    assert documents[0].cached == unique - len(new_texts)
    log = "\n".join(ragbench_log)
    assert "converted (new or changed): guides/upgrade.md" in log
    assert "6 documents (1 converted, 5 from the conversion cache)" in log
    assert f"[document]: {after.height} texts, {unique} unique, {unique - len(new_texts)} cached, " \
           f"{len(new_texts)} computed" in log
