"""Every path in a sweep file resolves against the sweep file, wherever the command runs; a folder has one
fingerprint in `datasets validate DIR`, `datasets validate --config` and the sweep."""

from __future__ import annotations

import shutil

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.errors import ConfigError
from ragbench.data import load_dataset

FOLDER = ROOT / "datasets" / "demo-folder"


def _sweep_file(where, dataset: str, extra: str = "") -> object:
    where.mkdir(parents=True, exist_ok=True)
    f = where / "sweep.yaml"
    f.write_text(f"name: paths\ndataset: {dataset}\nchunkers: [{{kind: whole}}]\n"
                 f"embedders: [{{model: ./models/my-model}}, {{model: BAAI/bge-small-en-v1.5}}, "
                 f"{{model: all-MiniLM-L6-v2}}]\nretrievers: [{{kind: bm25}}]\n{extra}")
    return f


def test_paths_follow_the_sweep_file_not_the_working_directory(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    shutil.copytree(FOLDER, docs)
    sweeps = tmp_path / "team" / "sweeps"
    sweeps.mkdir(parents=True)
    shutil.move(docs / "questions.csv", sweeps / "other.csv")
    f = _sweep_file(sweeps, "{format: folder, path: ../../docs, questions: other.csv}", "output: {home: ../home}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    cfg = load_config(f)
    assert cfg.dataset.path == docs.resolve() and cfg.dataset.questions == (sweeps / "other.csv").resolve()
    assert cfg.output.home == (tmp_path / "team" / "home").resolve()
    assert [e.model for e in cfg.embedders] == [str((sweeps / "models" / "my-model").resolve()),
                                                "BAAI/bge-small-en-v1.5", "all-MiniLM-L6-v2"]
    assert load_dataset(cfg.dataset).qrels.height > 0  # the questions beside the sweep file label the folder


def test_questions_only_inside_the_folder_names_the_path_to_write(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(FOLDER, docs)
    f = _sweep_file(tmp_path / "sweeps", "{format: folder, path: ../docs,\n  questions: questions.csv}")
    with pytest.raises(ConfigError) as e:
        load_config(f)
    assert f"{f}:3: dataset.questions: questions.csv is not next to the sweep file" in str(e.value)
    assert "write ../docs/questions.csv" in str(e.value)


def _fingerprint(res) -> str:
    assert res.exit_code == 0, res.output
    cells = ([c.strip() for c in line.strip("│┃ ").split("│")] for line in res.output.splitlines())
    return next(c[1] for c in cells if len(c) == 2 and c[0] == "fingerprint")


def test_one_fingerprint_for_a_folder_in_validate_and_the_sweep(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    shutil.copytree(FOLDER, docs)
    f = _sweep_file(tmp_path, "{format: folder, path: docs}")
    monkeypatch.setenv("COLUMNS", "200")
    by_dir = _fingerprint(CliRunner().invoke(app, ["datasets", "validate", str(docs)]))
    by_config = _fingerprint(CliRunner().invoke(app, ["datasets", "validate", "--config", str(f)]))
    assert by_dir == by_config == load_dataset(load_config(f).dataset).fingerprint
    monkeypatch.chdir(tmp_path)  # --questions on the command line is relative to the working directory
    shutil.move(docs / "questions.csv", tmp_path / "q.csv")
    assert _fingerprint(CliRunner().invoke(app, ["datasets", "validate", "docs", "--questions", "q.csv"])) == by_dir
    res = CliRunner().invoke(app, ["datasets", "validate", "docs", "--questions", "docs/q.csv"])
    assert res.exit_code != 0
