"""Every YAML, CSV and JSONL file is read with limits: an alias bomb, a huge file, an endless line or a deeply
nested value fails in seconds, in bounded memory, with one line naming the file and line."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time

import pytest
from conftest import DEMO, ROOT

from ragbench.config.loader import load_config
from ragbench.core import bounded_io
from ragbench.core.errors import ConfigError, DatasetError
from ragbench.data.questions import read_questions

#: nine levels of nine aliases: 9^9 (387 million) strings once expanded, in ten lines
BOMB = "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, n in zip([None, *"abcdefgh"], "abcdefghi"))
MEMORY_LIMIT = 2 << 30


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _cli(*args: str, cwd=ROOT) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env["RAGBENCH_PROGRESS"] = "0"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, preexec_fn=_limited)
    return proc, time.monotonic() - start


def test_an_alias_bomb_in_a_questions_file_is_refused_in_seconds_under_a_memory_limit(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nSome text about lol.\n", encoding="utf-8")
    lines = [f"- &q{i} {{question: 'q{i}', answer: [{', '.join([f'*q{i - 1}'] * 9) if i else 'lol'}]}}"
             for i in range(9)]
    (folder / "questions.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc, seconds = _cli("datasets", "validate", str(folder))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert "questions.yaml:2: invalid YAML: YAML alias *q0 (aliases are not read in data files" in out, out[-3000:]
    assert seconds < 60


def test_an_alias_bomb_in_a_sweep_file_is_refused_in_seconds_under_a_memory_limit(tmp_path):
    cfg = tmp_path / "bomb.yaml"
    cfg.write_text(BOMB + f"name: bomb\ndataset: {{path: {DEMO}}}\nchunkers: [{{kind: whole}}]\n"
                   "retrievers: [{kind: bm25}]\nmetrics: {show: *i}\n", encoding="utf-8")
    proc, seconds = _cli("sweep", str(cfg), "--home", str(tmp_path / "home"), "--orchestrator", "local")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    # f: 9^6 = 531,441 strings, the first list over the bound; the line is named
    assert "bomb.yaml:6: YAML aliases expand to more than 100,000 values here" in out, out[-3000:]
    assert seconds < 60


def test_aliases_that_stay_small_still_share_settings_in_a_sweep_file(tmp_path):
    cfg = tmp_path / "s.yaml"
    cfg.write_text(f"name: shared\ndataset: {{path: {DEMO}}}\nchunkers: [{{kind: whole}}]\n"
                   "embedders: [{model: static-retrieval-m2v}]\n"
                   "retrievers: [{kind: bm25, k1: &k1 0.9}, {kind: hybrid, bm25: {k1: *k1}}]\n", encoding="utf-8")
    cfg_ = load_config(cfg)
    assert cfg_.retrievers[1].bm25.k1 == 0.9


def test_an_alias_of_itself_is_refused(tmp_path):
    cfg = tmp_path / "loop.yaml"
    cfg.write_text("name: loop\nchunkers: &c\n  - kind: whole\n  - *c\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"loop.yaml:2: YAML aliases expand to more than"):
        load_config(cfg)


def test_a_sweep_file_over_the_size_limit_is_refused_before_it_is_parsed(tmp_path):
    cfg = tmp_path / "big.yaml"
    cfg.write_text("name: big\n" + "# padding\n" * (bounded_io.MAX_CONFIG_BYTES // 10 + 1), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"big.yaml: [\d,]+ bytes, more than a sweep config may have"):
        load_config(cfg)


def test_a_line_over_the_limit_names_its_line_without_reading_the_rest(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "a"}\n' + b"x" * 5000 + b"\n")
    with open(path, "rb") as f, pytest.raises(DatasetError, match=r"corpus.jsonl:2: line longer than any line"):
        list(bounded_io.iter_lines(f, path, DatasetError, limit=1000))
    with open(path, "rb") as f:  # a line of exactly the limit (its line end aside) is fine
        assert len(list(bounded_io.iter_lines(f, path, DatasetError, limit=5000))) == 2
    with pytest.raises(DatasetError, match=r"q.csv:3: line of 5,000 characters, longer than any line may be"):
        bounded_io.check_lines(tmp_path / "q.csv", "question\nok\n" + "y" * 5000, DatasetError, limit=1000)


def test_deeply_nested_values_are_one_line_errors(tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(DEMO, ds)
    corpus = ds / "corpus.jsonl"
    lines = corpus.read_text(encoding="utf-8").splitlines()
    lines[2] = '{"_id": "deep", "text": ' + "[" * 200_000 + "]" * 200_000 + "}"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc, _ = _cli("datasets", "validate", str(ds))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert "corpus.jsonl:3: JSON nested too deeply to read" in out, out[-3000:]
    deep = tmp_path / "questions.yaml"
    deep.write_text("- question: " + "[" * 50_000 + "]" * 50_000 + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"questions.yaml: YAML nested too deeply to read"):
        read_questions(deep)
    squad = tmp_path / "squad.json"
    squad.write_text('{"data": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    proc, _ = _cli("datasets", "validate", str(squad))
    out = proc.stdout + proc.stderr
    assert "squad.json:1: JSON nested too deeply to read" in out and "Traceback" not in out, out[-3000:]


def test_a_csv_cell_over_the_csv_modules_limit_is_a_line_error(tmp_path):
    path = tmp_path / "questions.csv"
    path.write_text('question,answer\nfirst,ok\nsecond,"' + "z" * 200_000 + '"\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"questions.csv:3: unreadable CSV \(field larger than field limit"):
        read_questions(path)


def test_a_document_over_the_size_limit_is_skipped_with_a_warning_not_read(tmp_path, monkeypatch):
    from ragbench.data import DatasetSpec, load_dataset

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "small.md").write_text("# Small\n\nThe broker listens on port 7400.\n", encoding="utf-8")
    (folder / "huge.md").write_text("# Huge\n\n" + "words " * 400, encoding="utf-8")
    (folder / "questions.csv").write_text("question,doc\nWhich port?,small.md\n", encoding="utf-8")
    monkeypatch.setattr(bounded_io, "MAX_DOCUMENT_BYTES", 1000)  # the limit, scaled down to the test's files
    ds = load_dataset(DatasetSpec(format="folder", path=folder))
    assert list(ds.corpus["doc_id"]) == ["small.md"]
    assert any(w.endswith("huge.md: skipped: 2,408 bytes, larger than a document may be (1,000)") for w in ds.warnings)


def test_a_squad_file_names_the_line_of_a_byte_that_is_not_utf8(tmp_path):
    from ragbench.data.squad import read_squad_json

    squad = tmp_path / "dev.json"
    squad.write_bytes(b'{"version": "1",\n "data": [{"title": "caf\xe9"}]}')
    with pytest.raises(DatasetError, match=r"dev\.json:2: not UTF-8 text \(byte 0xe9\); save the file as UTF-8$"):
        read_squad_json(squad)
