"""`ragbench datasets validate` takes the dataset options of a sweep config (SQuAD article mode included), or a
config file's dataset section, and then loads exactly what a sweep would (same fingerprint)."""

from __future__ import annotations

from conftest import DEMO, ROOT, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.data import DatasetSpec, load_dataset

LONG = ROOT / "tests" / "fixtures" / "squad_long.json"


def _summary(res) -> dict[str, str]:
    rows = {}
    for line in res.output.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) == 2 and cells[0]:
            rows[cells[0]] = cells[1]
    return rows


def test_squad_article_mode_from_options():
    runner = CliRunner()
    paragraphs = runner.invoke(app, ["datasets", "validate", str(LONG)])
    assert paragraphs.exit_code == 0, paragraphs.output
    articles = runner.invoke(app, ["datasets", "validate", str(LONG), "--squad-documents", "article"])
    assert articles.exit_code == 0, articles.output
    assert _summary(paragraphs)["documents"] == "47" and _summary(articles)["documents"] == "5"
    sample = runner.invoke(app, ["datasets", "validate", str(LONG), "--squad-documents", "article",
                                 "--max-queries", "7", "--seed", "3", "--queries", "in_qrels"])
    assert sample.exit_code == 0 and _summary(sample)["queries"] == "7"
    bad = runner.invoke(app, ["datasets", "validate", str(LONG), "--squad-documents", "chapter"])
    assert bad.exit_code == 2


def test_config_dataset_section_is_validated_as_the_sweep_loads_it(tmp_path):
    cfg = write_config(tmp_path / "c.yaml", f"""name: v
dataset: {{format: squad, path: {LONG}, squad_documents: article, max_queries: 9, seed: 1}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
""")
    res = CliRunner().invoke(app, ["datasets", "validate", "--config", str(cfg)])
    assert res.exit_code == 0, res.output
    got = _summary(res)
    ds = load_dataset(load_config(cfg).dataset)
    assert got["fingerprint"] == ds.fingerprint and got["documents"] == "5" and got["queries"] == "9"
    # an option overrides the config's field
    res = CliRunner().invoke(app, ["datasets", "validate", "--config", str(cfg), "--squad-documents", "paragraph"])
    assert res.exit_code == 0 and _summary(res)["documents"] == "47"


def test_beir_folder_still_validates_and_nothing_given_is_refused():
    res = CliRunner().invoke(app, ["datasets", "validate", str(DEMO)])
    assert res.exit_code == 0 and int(_summary(res)["documents"]) > 0
    assert CliRunner().invoke(app, ["datasets", "validate"]).exit_code == 2


def test_folder_options_from_the_folder_model_keep_their_flags_and_meaning():
    """`--questions`, a repeatable `--exclude`, `--no-spans` and `--holdout` (fields of the folder format's model
    and the common one) load what they loaded before: the fingerprint recorded then, the folder's table, the
    held-out line."""
    folder = ROOT / "datasets" / "demo-folder"
    res = CliRunner().invoke(app, ["datasets", "validate", str(folder), "--questions", str(folder / "questions.csv"),
                                   "--exclude", "*.xyz", "--no-spans", "--holdout", "0.3"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    got = _summary(res)
    # a folder's fingerprint hashes its absolute path: it is not pinned, only shown to change with the options
    plain = _summary(CliRunner().invoke(app, ["datasets", "validate", str(folder)], env={"COLUMNS": "200"}))
    assert got["fingerprint"] != plain["fingerprint"] and got["spans"] == "0"
    assert "files in" in res.output and "holdout 0.3 (seed 0):" in res.output
    two = CliRunner().invoke(app, ["datasets", "validate", str(folder), "--exclude", "*.xyz", "--exclude", "*.zzz"])
    assert two.exit_code == 0  # every pattern given counts, in order
    spec = DatasetSpec(format="folder", path=folder, exclude=("*.xyz", "*.zzz"))  # the sweep default
    assert _summary(two)["fingerprint"] == load_dataset(spec).fingerprint
