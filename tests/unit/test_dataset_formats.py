"""Dataset formats are an open seam: a format is one class (its options model and its loader) registered in
DATASET_FORMATS — here a toy format from this test file, with no edit to ragbench — and the sweep file, the
library and `ragbench datasets validate` (options generated from the model's fields) all take it. The built-in
formats keep the fingerprints and sweep spec hashes recorded before they had their own models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import polars as pl
import pytest
from conftest import DEMO, ROOT, write_config
from pydantic import Field, ValidationError
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.core.errors import ConfigError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.schemas import CORPUS_SCHEMA, QRELS_SCHEMA, QUERY_SCHEMA, SPANS_SCHEMA
from ragbench.data import DATASET_FORMATS, Dataset, DatasetSpec, dataset_options, detect_format, load_dataset
from ragbench.data.folder import FolderDataset
from ragbench.data.squad import SquadDataset

SQUAD = ROOT / "tests" / "fixtures" / "squad_long.json"
FOLDER = ROOT / "datasets" / "demo-folder"


class LinesDataset(DatasetSpec):
    """``format: lines``: ``docs.txt`` (one document per line) and ``questions.txt`` (``question<TAB>line``)."""

    format: Literal["lines"] = "lines"
    comment: str = Field("#", description="lines format: lines starting with this are skipped")
    lowercase: bool = Field(False, description="lines format: lowercase the documents")

    @classmethod
    def recognizes(cls, path: Path) -> int:
        return 2 if (path / "docs.txt").is_file() else 0  # more surely than any folder of documents (1)

    def load(self, cache_root: Path | None = None) -> Dataset:
        root = Path(self.path)
        docs = [t for t in (root / "docs.txt").read_text().splitlines() if t and not t.startswith(self.comment)]
        docs = [t.lower() if self.lowercase else t for t in docs]
        corpus = pl.DataFrame([(f"d{i}", "", t, "{}") for i, t in enumerate(docs, 1)], schema=CORPUS_SCHEMA,
                              orient="row")
        rows = [line.split("\t") for line in (root / "questions.txt").read_text().splitlines() if line]
        queries = pl.DataFrame([(f"q{i}", q, None, []) for i, (q, _) in enumerate(rows, 1)], schema=QUERY_SCHEMA,
                               orient="row")
        qrels = pl.DataFrame([(f"q{i}", f"d{d}", 1) for i, (_, d) in enumerate(rows, 1)], schema=QRELS_SCHEMA,
                             orient="row")
        fingerprint = stable_hash({"docs": file_sha256(root / "docs.txt"), "spec": self.canonical()})
        return Dataset(self.name or root.name, corpus, queries, qrels, pl.DataFrame(schema=SPANS_SCHEMA), fingerprint)


@pytest.fixture
def lines(tmp_path):
    DATASET_FORMATS.register(LinesDataset)
    root = tmp_path / "lines"
    root.mkdir()
    (root / "docs.txt").write_text("% a comment line\nThe Queue retries three times.\nTokens expire after an hour.\n")
    (root / "questions.txt").write_text("how often are jobs retried?\t1\nwhen do tokens expire?\t2\n")
    yield root
    DATASET_FORMATS.unregister("lines")


def _summary(output: str) -> dict[str, str]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def test_a_format_registered_outside_the_package_loads_from_a_sweep_file(lines, tmp_path):
    cfg = load_config(write_config(tmp_path / "s.yaml", f"""name: lines
dataset: {{format: lines, path: {lines}, comment: "%", lowercase: true}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
"""))
    assert isinstance(cfg.dataset, LinesDataset) and cfg.dataset.comment == "%"
    assert cfg.canonical()["dataset"]["comment"] == "%"  # its own options are part of the sweep's spec
    ds = load_dataset(cfg.dataset)
    assert ds.corpus["text"].to_list() == ["the queue retries three times.", "tokens expire after an hour."]
    assert ds.qrels["doc_id"].to_list() == ["d1", "d2"]
    assert DatasetSpec(format="lines", path=lines).comment == "#"  # DatasetSpec(...) builds the format's class


def test_an_option_of_another_format_is_refused_naming_the_file_line_and_format(lines, tmp_path):
    cases = {"dataset: {format: lines, path: x, questions: q.csv}":
             "questions: only the folder format reads it (format is 'lines')",
             "dataset: {path: x, comment: '%', lowercase: true}":
             "comment, lowercase: only the lines format reads them (format is 'beir')",
             "dataset: {format: squad, path: x, include: [a], exclude: [b]}":
             "include, exclude: only the folder format reads them (format is 'squad')",
             "dataset: {format: lines, path: x, max_docs: 0}": "dataset.max_docs: Input should be greater than 0",
             "dataset: {format: nope, path: x}": "dataset.format: unknown dataset format 'nope'; known: "
                                                 "beir, folder, lines, squad"}
    for section, want in cases.items():
        bad = write_config(tmp_path / "bad.yaml", f"name: b\n{section}\nchunkers: [{{kind: whole}}]\n"
                                                  "retrievers: [{kind: bm25}]\n")
        with pytest.raises(ConfigError) as e:
            load_config(bad)
        assert re.search(r"bad\.yaml:2: ", str(e.value)) and want in str(e.value), (section, str(e.value))
    # an option of another format at its default says nothing and is accepted, as before
    assert DatasetSpec(path=DEMO, include=[], questions=None).format == "beir"


def test_datasets_validate_takes_a_new_formats_options_from_its_model(lines):
    runner = CliRunner()
    res = runner.invoke(app, ["datasets", "validate", str(lines), "--format", "lines", "--comment", "%"])
    assert res.exit_code == 0, res.output
    assert _summary(res.output)["documents"] == "2" and _summary(res.output)["queries"] == "2"
    first = _summary(res.output)["fingerprint"]
    res = runner.invoke(app, ["datasets", "validate", str(lines), "--format", "lines", "--comment", "Tokens"])
    assert res.exit_code == 0 and _summary(res.output)["documents"] == "2"  # "% a comment line" is a document now
    lowered = runner.invoke(app, ["datasets", "validate", str(lines), "--format", "lines", "--lowercase"])
    plain = runner.invoke(app, ["datasets", "validate", str(lines), "--format", "lines", "--no-lowercase"])
    assert _summary(lowered.output)["fingerprint"] != _summary(plain.output)["fingerprint"]
    help_text = " ".join(runner.invoke(app, ["datasets", "validate", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "--comment" in help_text and "lines format: lines starting with this are skipped" in help_text
    assert "--lowercase --no-lowercase" in help_text
    found = runner.invoke(app, ["datasets", "validate", str(lines), "--comment", "%"])  # no --format: recognized
    assert found.exit_code == 0 and _summary(found.output)["fingerprint"] == first
    assert detect_format(lines) == "lines" and detect_format(DEMO) == "beir" and detect_format(SQUAD) == "squad"
    assert detect_format(FOLDER) == "folder" and detect_format(lines / "nowhere") == "beir"
    wrong = runner.invoke(app, ["datasets", "validate", str(DEMO), "--comment", "%"])  # a beir folder
    assert wrong.exit_code == 2 and "comment: only the lines format reads it (format is 'beir')" in wrong.output


def test_every_field_of_every_format_is_an_option_of_datasets_validate():
    import typer.main

    command = typer.main.get_command(app).commands["datasets"].commands["validate"]
    options = {p.name: p for p in command.params}
    for opt in dataset_options():
        if opt.name == "path":
            assert options["path"].param_type_name == "argument"
            continue
        assert opt.name in options, opt.name
        assert (opt.field.description or "") in options[opt.name].help.replace("`", ""), opt.name
    assert {"questions", "include", "exclude"} <= set(FolderDataset.model_fields) - set(DatasetSpec.model_fields)
    assert options["include"].multiple and options["spans"].secondary_opts == ["--no-spans"]
    shown = CliRunner().invoke(app, ["datasets", "validate", "--help"], env={"COLUMNS": "300"}).output
    assert "<paragraph|article>" in shown and "<in_qrels|all>" in shown  # a Literal field is a choice


def test_built_in_formats_keep_their_fingerprints_and_spec_hashes():
    """Values recorded with the code before formats had their own models."""
    pinned = {
        "3261822b4b5559bc": DatasetSpec(format="squad", path=SQUAD),
        "23a5edd7a9ba77c9": DatasetSpec(format="squad", path=SQUAD, squad_documents="article", queries="all"),
        "4a0aaf9e6e6df992": DatasetSpec(path=DEMO, squad_documents="article"),  # accepted by every format, hashed
    }  # a folder's fingerprint hashes its absolute path, so folder values cannot be pinned across checkouts
    for fingerprint, spec in pinned.items():
        assert load_dataset(spec).fingerprint == fingerprint, spec
    assert type(pinned["3261822b4b5559bc"]) is SquadDataset
    assert type(DatasetSpec(format="folder", path=FOLDER)) is FolderDataset
    for name, spec_hash in {"demo-folder": "b010f344c0b3996c", "squad-e2e": "eb2203864ef004eb"}.items():
        canonical = load_config(ROOT / "configs" / f"{name}.yaml").canonical()
        canonical["dataset"]["path"] = str(Path(canonical["dataset"]["path"]).relative_to(ROOT))
        assert stable_hash(canonical) == spec_hash, name


def test_a_stored_dataset_spec_validates_back_to_its_format():
    stored = DatasetSpec(format="folder", path=FOLDER, include=("*.md",)).model_dump(mode="json")
    again = DatasetSpec.model_validate(stored)
    assert type(again) is FolderDataset and again.include == ("*.md",) and again == FolderDataset(**stored)
    with pytest.raises(ValidationError, match="squad_documents"):
        DatasetSpec.model_validate({"format": "squad", "path": "x", "squad_documents": "chapter"})
