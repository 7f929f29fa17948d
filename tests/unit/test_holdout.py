"""The held-out split: seeded, stratified by class, exact in size, unlabelled queries kept for tuning; configs may
show held-out measures but never rank on them."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.errors import ConfigError, DatasetError
from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA
from ragbench.data import holdout_split


def _data(classes: dict[str, int], unlabelled: int = 3):
    queries, qrels = [], []
    for cls, n in classes.items():
        for i in range(n):
            qid = f"{cls}{i}"
            queries.append((qid, f"question {qid}", cls, []))
            qrels.append((qid, "d1", 1))
    queries += [(f"u{i}", f"unlabelled {i}", None, []) for i in range(unlabelled)]
    return (pl.DataFrame(queries, schema=QUERY_SCHEMA, orient="row"),
            pl.DataFrame(qrels, schema=QRELS_SCHEMA, orient="row"))


def test_split_is_seeded_stratified_and_exact():
    queries, qrels = _data({"a": 10, "b": 5, "c": 5})
    split = holdout_split(queries, qrels, 0.3, seed=0)
    assert len(split.heldout) == 6 and split.n_labelled == 20
    per_class = {c: sum(q.startswith(c) for q in split.heldout) for c in "abc"}
    assert per_class == {"a": 3, "b": 2, "c": 1}  # 3 + 1.5 + 1.5: the half goes to the first class by name
    assert {"u0", "u1", "u2"} <= split.tuning and not split.tuning & split.heldout
    assert split.tuning | split.heldout == set(queries["query_id"])
    assert holdout_split(queries, qrels, 0.3, seed=0) == split  # seeded
    assert holdout_split(queries, qrels, 0.3, seed=1).heldout != split.heldout
    assert holdout_split(queries.reverse(), qrels, 0.3, seed=0) == split  # file order does not matter
    assert split.describe() == "holdout 0.3 (seed 0): 14 labelled tuning queries, 6 held out"


def test_a_split_that_leaves_a_side_empty_is_refused():
    queries, qrels = _data({"a": 3})
    with pytest.raises(DatasetError, match="holdout 0.1 of 3 labelled queries leaves none held out"):
        holdout_split(queries, qrels, 0.1)
    with pytest.raises(DatasetError, match="leaves none to tune on"):
        holdout_split(queries, qrels, 0.9)


CONFIG = f"""name: h
dataset:
  path: {DEMO}
{{holdout}}
chunkers: [{{{{kind: whole}}}}]
retrievers: [{{{{kind: bm25}}}}]
metrics:
  cutoffs: [10]
  primary: {{primary}}
  show: [ndcg@10, heldout/ndcg@10]
"""


def test_show_may_name_held_out_measures_and_primary_may_not(tmp_path):
    cfg = load_config(write_config(tmp_path / "a.yaml", CONFIG.format(holdout="  holdout: 0.3", primary="ndcg@10")))
    assert cfg.dataset.holdout == 0.3 and cfg.canonical()["dataset"]["holdout"] == 0.3
    with pytest.raises(ConfigError, match=r"b.yaml:9: metrics.primary: 'heldout/ndcg@10': configs are ranked on the "
                                          r"tuning queries"):
        load_config(write_config(tmp_path / "b.yaml", CONFIG.format(holdout="  holdout: 0.3",
                                                                    primary="heldout/ndcg@10")))
    with pytest.raises(ConfigError, match=r"c.yaml:10: metrics.show.1: 'heldout/ndcg@10' needs dataset.holdout"):
        load_config(write_config(tmp_path / "c.yaml", CONFIG.format(holdout="", primary="ndcg@10")))
