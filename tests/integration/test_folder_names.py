"""Any file name: a folder dataset whose file names are not valid UTF-8 is read, under printable doc ids (each
undecodable byte written as \\xNN), by `datasets validate` and by a sweep, through DuckDB, Parquet and JSON; a
name that would clash once written printably is skipped with a warning showing it. Never a traceback."""

from __future__ import annotations

import json
import os

import duckdb
from conftest import write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.data import DatasetSpec, load_dataset
from ragbench.data.folder import printable_name

CAFE = "# Cafe\n\nThe cafe on the third floor opens at nine and serves coffee to every engineer on the team.\n"
GUIDE = "# Guide\n\nRotate the signing keys every ninety days with nimbusctl keys rotate.\n"


def _folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "install.md").write_text("# Install\n\nRun nimbusctl init once to write the cluster identity.\n")
    broot = os.fsencode(root)
    with open(os.path.join(broot, b"caf\xff.md"), "w") as f:  # Latin-1 bytes, as an old archive leaves them
        f.write(CAFE)
    os.mkdir(os.path.join(broot, b"old\xe9"))
    with open(os.path.join(broot, b"old\xe9", b"guide.md"), "w") as f:
        f.write(GUIDE)
    with open(os.path.join(broot, b"notes.\xff"), "w") as f:
        f.write("an unsupported type, with a suffix that is not UTF-8\n")
    (root / "questions.csv").write_text(
        "question,doc,quote\n"
        "How do I write the cluster identity?,install.md,\n"
        "When does the cafe open?,caf\\xff.md,\n"
        "How often are signing keys rotated?,,every ninety days\n", encoding="utf-8")
    return root


def test_names_that_are_not_utf8_are_read_under_printable_doc_ids(tmp_path):
    root = _folder(tmp_path)
    ds = load_dataset(DatasetSpec(format="folder", path=root))
    assert sorted(ds.corpus["doc_id"]) == ["caf\\xff.md", "install.md", "old\\xe9/guide.md"]
    metadata = dict(zip(ds.corpus["doc_id"], ds.corpus["metadata"]))
    assert json.loads(metadata["old\\xe9/guide.md"])["folders"] == ["old\\xe9"]
    assert sorted(ds.qrels["doc_id"]) == ["caf\\xff.md", "install.md", "old\\xe9/guide.md"]
    assert any("notes.\\xff" in w or ".\\xff: 1" in w for w in ds.warnings), ds.warnings
    res = CliRunner().invoke(app, ["datasets", "validate", str(root)])
    assert res.exit_code == 0 and res.exception is None, res.output
    assert "documents" in res.output and ".\\xff" in res.output


def test_a_name_that_clashes_once_printable_is_skipped_with_a_warning_showing_it(tmp_path):
    root = _folder(tmp_path)
    (root / "caf\\xff.md").write_text("# Another cafe\n\nA file whose name really is caf, backslash, x, f, f.\n")
    ds = load_dataset(DatasetSpec(format="folder", path=root))
    assert "caf\\xff.md" in set(ds.corpus["doc_id"])  # the real name keeps its id
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    assert "backslash" in texts["caf\\xff.md"]
    assert any(w.endswith("caf\\xff.md: skipped: its name is not UTF-8 and, written printably, is another file's "
                          "name") for w in ds.warnings), ds.warnings
    assert printable_name("plain.md") == "plain.md" and printable_name("a\udcffb") == "a\\xffb"


def test_a_sweep_over_such_a_folder_stores_and_logs_the_printable_ids(tmp_path):
    root = _folder(tmp_path)
    home = tmp_path / "home"
    cfg = write_config(tmp_path / "names.yaml", f"""name: names
dataset: {{format: folder, path: {root}}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [3], primary: ndcg@3}}
""")
    res = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(home)])
    assert res.exit_code == 0 and res.exception is None, res.output
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    docs = {d for (d,) in con.execute("SELECT DISTINCT doc_id FROM rankings").fetchall()}
    con.close()
    assert {"caf\\xff.md", "old\\xe9/guide.md"} <= docs
    logged = [p for p in home.rglob("rankings.parquet")]
    assert logged and any(b"caf\\\\xff.md" in p.read_bytes() or b"caf\\xff.md" in p.read_bytes() for p in logged)
    res = CliRunner().invoke(app, ["report", "latest", "--home", str(home)])
    assert res.exit_code == 0 and res.exception is None, res.output


def test_a_folder_whose_own_name_is_not_utf8_is_shown_printably(tmp_path):
    root = _folder(tmp_path)
    odd = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"d\xffocs"))
    os.rename(root, odd)
    res = CliRunner().invoke(app, ["datasets", "validate", odd], env={"COLUMNS": "400"})
    assert res.exit_code == 0 and res.exception is None, res.output
    assert "filesin" + printable_name(odd) in "".join(res.output.split())  # the table title, wrapped
    assert load_dataset(DatasetSpec(format="folder", path=odd)).name == "d\\xffocs"
