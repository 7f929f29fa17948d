"""Synthetic questions: the lexical-overlap rule, the loader keeping synthetic and real questions apart, the report's
warnings, and `ragbench questions generate` with the real llama-server and the packaged default model
(Qwen2.5-Coder-1.5B, fetched by `make llm`)."""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
from pathlib import Path

import polars as pl
import pytest
from conftest import write_config
from folder_fixture import QUESTIONS, build_folder, questions_csv
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.errors import DatasetError
from ragbench.data import DatasetSpec, load_dataset
from ragbench.data.folder import corpus_table, scan_folder
from ragbench.data.quotes import locate_quote
from ragbench.generation.llm import MODELS
from ragbench.generation.synthetic import (EXAMPLE_QUESTION, EXAMPLE_QUOTE, QUESTIONS_MODEL, content_words,
                                           lexical_overlap)
from ragbench.reporting.report import build_report, leaderboard_markdown, render_html
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep


def test_lexical_overlap_against_a_hand_computed_value():
    passage = "Snapshots are taken every six hours and kept for fourteen days by default."
    # content words of the question: often, snapshots, taken, default (how, are, by: stop-words);
    # of those, snapshots, taken and default are in the passage: 3 / 4
    assert content_words("How often are snapshots taken by default?") == ["often", "snapshots", "taken", "default"]
    assert lexical_overlap("How often are snapshots taken by default?", passage) == 0.75
    # identifiers stay one word; repeats count once; a question of stop-words only shares nothing
    assert content_words("What does NMB-4013 mean for queue.max_batch_bytes?") == \
        ["nmb-4013", "mean", "queue.max_batch_bytes"]
    assert lexical_overlap("Snapshots, snapshots: how long are they kept?", passage) == pytest.approx(2 / 3)
    assert lexical_overlap("What is it?", passage) == 0.0


# rows of a generated file appended to the real questions: (question, doc, quote, synthetic, overlap)
SYNTHETIC = [
    ("How often are snapshots taken by default?", "guides/backup.docx", "Snapshots are taken every six hours",
     "true", "0.75"),
    ("Which port does the broker listen on for replication traffic?", "guides/install.md",
     "on port 7401 for replication traffic between nodes", "true", "0.9"),
    ("What does the combined payload of a batch exceed?", "reference/errors.html",
     "The combined payload of a batch is larger than", "TRUE", "0.8"),
]


def _mixed(rows=SYNTHETIC) -> str:
    real = [(q, d, quote, "", "") for q, d, quote, _, _ in QUESTIONS[:5]]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["question", "doc", "quote", "synthetic", "lexical_overlap"])
    writer.writerows(real + list(rows))
    return buf.getvalue()


def test_loader_keeps_synthetic_and_real_questions_apart(tmp_path):
    root = build_folder(tmp_path / "docs", questions=_mixed())
    ds = load_dataset(DatasetSpec(format="folder", path=root))
    classes = dict(zip(ds.queries["text"], ds.queries["query_class"]))
    assert classes[SYNTHETIC[0][0]] == "synthetic" and classes[QUESTIONS[0][0]] == "real"
    assert sorted(set(classes.values())) == ["real", "synthetic"]
    assert ds.notes == {"synthetic_questions": 3, "real_questions": 5,
                        "synthetic_lexical_overlap": pytest.approx(0.8166, abs=1e-3)}
    assert any("synthetic questions share 82% of their words with their source passage" in w for w in ds.warnings)
    assert any("mix 3 synthetic and 5 real" in w for w in ds.warnings)
    # a file with no synthetic question keeps its own classes and says nothing
    plain = load_dataset(DatasetSpec(format="folder", path=build_folder(tmp_path / "plain", questions_csv())))
    assert plain.notes == {} and "real" not in set(plain.queries["query_class"].to_list())
    # a bad flag or overlap names the line
    bad = build_folder(tmp_path / "bad", questions=_mixed([SYNTHETIC[0][:3] + ("maybe", "1.5")]))
    with pytest.raises(DatasetError) as e:
        load_dataset(DatasetSpec(format="folder", path=bad))
    assert "questions.csv:7: synthetic 'maybe' is not true or false" in str(e.value)
    assert "questions.csv:7: lexical_overlap '1.5' is not a number from 0 to 1" in str(e.value)


SWEEP = """name: synthetic-mix
dataset:
  format: folder
  path: {path}
chunkers:
  - kind: whole
retrievers:
  - kind: bm25
metrics:
  cutoffs: [1, 5]
  primary: ndcg@5
output:
  mlflow: false
"""


def test_report_warns_about_overlap_and_splits_synthetic_from_real(tmp_path, settings, home):
    root = build_folder(tmp_path / "docs", questions=_mixed())
    result = run_sweep(load_config(write_config(tmp_path / "s.yaml", SWEEP.format(path=root))), settings)
    rep = build_report(ResultStore(home / "results.duckdb"), result.sweep_id, n_resamples=200)
    overlap = ("synthetic questions share 82% of their words with their source passage: this inflates BM25 and "
               "hides the vocabulary gap real users have")
    assert rep.dataset_warnings[0] == overlap
    assert "mix 3 synthetic and 5 real ones" in rep.dataset_warnings[1]
    assert set(rep.per_class["query_class"]) == {"synthetic", "real"}
    assert rep.per_class.filter(pl.col("query_class") == "synthetic")["n"].to_list() == [3]
    assert overlap in leaderboard_markdown(rep) and "dataset-warning" in render_html(rep, {})


# ---------------------------------------------------------------- the real LLM
def _llm_or_skip():
    from ragbench.core.settings import Settings
    from ragbench.generation.llm import LLMServerError
    from ragbench.generation.llm.server import locate_llama_server, locate_model

    try:
        locate_llama_server(Settings.from_env()), locate_model(Settings.from_env(), QUESTIONS_MODEL)
    except LLMServerError as e:
        (pytest.fail if os.environ.get("RAGBENCH_REQUIRE_LLM") == "1" else pytest.skip)(
            f"local LLM not installed ({e}); `make llm` fetches it")


def _key(text: str) -> str:
    return " ".join(text.lower().strip(" .?!").split())


def test_questions_generate_with_the_local_llm(tmp_path, monkeypatch):
    """The packaged default model, a few passages: at least half of the sampled passages give a kept question with a
    located quote, none the prompt's example; run from another directory with --out relative to it, the printed
    next command works there."""
    _llm_or_skip()
    root = build_folder(tmp_path / "docs", questions=None)
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("RAGBENCH_LLM_MODEL", raising=False)
    args = ["questions", "generate", "../docs", "--n", "3", "--out", "q.csv", "--home", str(home)]
    out = CliRunner().invoke(app, [*args, "--json"], terminal_width=300)
    assert out.exit_code == 0, out.output
    summary = json.loads(next(line for line in out.output.splitlines() if line.startswith("{")))
    y = summary["yields"]
    assert summary["model"].startswith(Path(MODELS[QUESTIONS_MODEL].filename).stem + "@sha256:")
    assert y["sampled"] >= y["replied"] >= y["parsed"] >= y["quote located"] >= y["kept"] == summary["kept"] >= 1
    assert 2 * y["kept"] >= y["sampled"], y  # at least half of the sampled passages give a kept question
    assert summary["seconds_per_question"] > 0 and summary["file"] == str(elsewhere / "q.csv")
    path = elsewhere / "q.csv"
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert len(rows) == y["kept"] and list(rows[0]) == ["question", "doc", "quote", "synthetic", "lexical_overlap"]
    docs = dict(corpus_table(scan_folder(root)).select("doc_id", "text").iter_rows())
    for r in rows:  # every kept quote is in its document, once, as the loader will find it; none is the example
        assert r["synthetic"] == "true" and 0 <= float(r["lexical_overlap"]) <= 1 and r["question"].strip()
        assert len(locate_quote(r["quote"], docs[r["doc"]])) == 1, r
        assert _key(r["question"]) != _key(EXAMPLE_QUESTION) and _key(r["quote"]) != _key(EXAMPLE_QUOTE), r
    # the next command, run where it was printed, validates the folder with the file outside it
    command = shlex.split(summary["next"])
    assert command[:3] == ["ragbench", "datasets", "validate"] and command[-1] == str(path)
    checked = CliRunner().invoke(app, command[1:], terminal_width=300)
    assert checked.exit_code == 0, checked.output
    ds = load_dataset(DatasetSpec(format="folder", path=root, questions=path))
    assert set(ds.queries["query_class"]) == {"synthetic"} and ds.spans.height == len(rows)

    # never overwritten without --force; with it, every answer comes from the LLM cache, same file; the terminal
    # summary names the yields and the next command
    before = path.read_text(encoding="utf-8")
    again = CliRunner().invoke(app, args, terminal_width=300)
    assert again.exit_code == 2 and "exists: not overwritten" in again.output
    again = CliRunner().invoke(app, [*args, "--force"], terminal_width=300)
    assert again.exit_code == 0, again.output
    flat = " ".join(again.output.split())
    assert f"({y['sampled']} answered from the LLM cache)" in flat and f"yields: {y['sampled']} sampled" in flat
    assert f"next: `{summary['next']}`" in flat
    assert path.read_text(encoding="utf-8") == before
