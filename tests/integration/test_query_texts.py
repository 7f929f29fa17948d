"""Question texts in DuckDB: the ``queries`` table keyed by (dataset fingerprint, query id), written once per dataset,
read back by ``query_texts``."""

from __future__ import annotations

import polars as pl
import pytest

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


SWEEP = """name: texts-test
dataset:
  format: folder
  path: {path}
chunkers:
  - kind: markdown
    max_tokens: 64
retrievers:
  - kind: bm25
metrics:
  cutoffs: [1, 3, 5]
  primary: ndcg@5
output:
  mlflow: false
"""


def _texts_sweep(tmp_path, settings, mlflow: bool = False):
    from conftest import write_config

    from ragbench.config import load_config
    from ragbench.sweep import run_sweep

    root = tmp_path / "docs"
    root.mkdir()
    (root / "stash.md").write_text("# Stashing\n\nStashing saves unfinished work. The command is git stash push; "
                                   "it takes a message with -m.\n", encoding="utf-8")
    (root / "cheatsheet.md").write_text("# Cheat sheet\n\nHow do I stash my changes? To stash my changes: "
                                        "git stash push. Stash my changes often.\n", encoding="utf-8")
    (root / "branch.md").write_text("# Branches\n\nA branch is a movable pointer to a commit.\n", encoding="utf-8")
    (root / "rebase.md").write_text("# Rebasing\n\nRebase replays commits onto another base.\n", encoding="utf-8")
    (root / "questions.csv").write_text(
        "id,question,doc,answer\n"
        "q-stash,How do I stash my changes?,stash.md,git stash push\n"
        "q-list,Which command shows the stash list?,stash.md,git stash list\n"
        "q-branch,What is a branch?,branch.md,\n"
        "q-rebase,What does rebase do?,rebase.md,\n", encoding="utf-8")
    text = SWEEP.format(path=root).replace("mlflow: false", f"mlflow: {str(mlflow).lower()}")
    cfg = load_config(write_config(tmp_path / "sweep.yaml", text))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0
    return result


def test_explain_finds_a_query_by_its_text_and_marks_near_misses_holding_an_answer(tmp_path, settings, home):
    from typer.testing import CliRunner

    from ragbench.cli import app
    from ragbench.core.errors import RagbenchError
    from ragbench.reporting.explain import explain, render_explanation

    result = _texts_sweep(tmp_path, settings)
    store = ResultStore(home / "results.duckdb")
    sweep = store.sweep(result.sweep_id)
    assert store.query_texts(sweep["dataset_fingerprint"]) == {
        "q-stash": "How do I stash my changes?", "q-list": "Which command shows the stash list?",
        "q-branch": "What is a branch?", "q-rebase": "What does rebase do?"}
    config = result.outcomes[0].config_id

    e = explain(store, result.sweep_id, config, "STASH   my", settings=settings)  # case and spaces do not matter
    assert e.query_id == "q-stash" and explain(store, result.sweep_id, config, "q-stash").query_id == "q-stash"
    ranks = {c.doc_id: c for c in e.ranked}
    hole = ranks["cheatsheet.md"]
    assert hole.answers == ("git stash push",) and hole.likely_hole  # not labelled, yet it holds the answer
    assert ranks["stash.md"].relevant and not ranks["stash.md"].likely_hole
    assert hole.rank < ranks["stash.md"].rank and e.likely_holes == (hole,)  # it beat the labelled page
    assert all(not c.answers for d, c in ranks.items() if d not in ("cheatsheet.md", "stash.md"))
    from rich.console import Console

    console = Console(width=160, record=True)
    console.print(render_explanation(e))
    shown = " ".join(console.export_text().split())  # rich wraps long lines
    assert "◆" in shown and "likely holes in the labels" in shown
    assert f"ragbench judge pool {result.sweep_id}" in shown

    with pytest.raises(RagbenchError, match=r"'stash' is in 2 questions of .*q-stash 'How do I stash my changes\?'"
                       r"; q-list 'Which command shows the stash list\?'; give more of the text"):
        explain(store, result.sweep_id, config, "stash", settings=settings)
    with pytest.raises(RagbenchError, match=r"did you mean q-branch 'What is a branch\?'"):
        explain(store, result.sweep_id, config, "what is a brnach", settings=settings)
    run = CliRunner().invoke(app, ["explain", result.sweep_id, config, "stash", "--home", str(home)])
    assert run.exit_code != 0 and "is in 2 questions" in run.output and "Traceback" not in run.output

    # the report's per-query sections read the texts from the store: they outlive the dataset's folder
    from ragbench.reporting.since import query_texts

    (tmp_path / "docs").rename(tmp_path / "moved")
    assert query_texts(store, result.sweep_id)["q-branch"] == "What is a branch?"


def test_mlflow_per_query_tables_carry_the_question_beside_the_id(tmp_path, settings, home):
    import json
    from pathlib import Path

    from mlflow.tracking import MlflowClient

    from ragbench.results.tracking import default_tracking_uri

    result = _texts_sweep(tmp_path, settings, mlflow=True)
    client = MlflowClient(default_tracking_uri(settings))
    run_id = ResultStore(home / "results.duckdb").config(result.sweep_id, result.outcomes[0].config_id)["mlflow_run_id"]
    table = json.loads(Path(client.download_artifacts(run_id, "per_query.json", str(tmp_path))).read_text())
    assert table["columns"][:3] == ["query_id", "question", "query_class"]
    rows = {r[0]: r[1] for r in table["data"]}
    assert rows == {"q-stash": "How do I stash my changes?", "q-list": "Which command shows the stash list?",
                    "q-branch": "What is a branch?", "q-rebase": "What does rebase do?"}
    long = pl.read_parquet(client.download_artifacts(run_id, "per_query.parquet", str(tmp_path / "p")))
    assert long.filter(pl.col("query_id") == "q-branch")["question"].unique().to_list() == ["What is a branch?"]
