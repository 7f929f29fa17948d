"""Question texts in DuckDB: the ``queries`` table keyed by (dataset fingerprint, query id), written once per dataset,
read back by ``query_texts``."""

from __future__ import annotations

import polars as pl

from ragbench.results.store import ResultStore


def test_query_texts_are_stored_once_per_fingerprint_and_read_back(tmp_path):
    store = ResultStore(tmp_path / "results.duckdb")
    queries = pl.DataFrame({"query_id": ["q1", "q2"], "text": ["How do I stash?", "What is a branch?"],
                            "query_class": ["git", None]})
    assert store.write_query_texts("fp-a", queries) == 2
    assert store.write_query_texts("fp-a", queries) == 0  # a rerun adds nothing
    more = pl.DataFrame({"query_id": ["q2", "q3"], "text": ["changed?", "How do I rebase?"]})
    assert store.write_query_texts("fp-a", more) == 1  # only the new id; a stored text is kept
    assert store.query_texts("fp-a") == {"q1": "How do I stash?", "q2": "What is a branch?", "q3": "How do I rebase?"}
    assert store.write_query_texts("fp-b", more) == 2 and store.query_texts("fp-b")["q2"] == "changed?"
    assert store.query_texts("fp-unknown") == {}
    classes = store.query("SELECT query_id, query_class FROM queries WHERE dataset_fingerprint = 'fp-a' ORDER BY 1")
    assert classes.rows() == [("q1", "git"), ("q2", None), ("q3", None)]
