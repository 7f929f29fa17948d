"""The dataset's second label source (qrels/<split>.judged.tsv of a BEIR folder; judgments.csv of a folder): which
judgments count under `labels: human` and `human+assessor`, who wins a pair, and that the dataset fingerprint (and
so every chunk, vector and collection key) never moves with them while the labels fingerprint does."""

from __future__ import annotations

import shutil

import polars as pl
import pytest
from conftest import DEMO

from ragbench.core.errors import DatasetError
from ragbench.data import DatasetSpec, load_dataset
from ragbench.data.judged import JUDGED_COLUMNS, Judgment, read_judgments, write_judgments

PERSON, ASSESSOR = "person", "assessor:qwen"


@pytest.fixture
def demo(tmp_path):
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns("*.py", "README.md"))
    return root


def _load(root, **options):
    return load_dataset(DatasetSpec(format="beir", path=root, queries="all", **options))


def _write(root, rows):
    write_judgments(root / "qrels" / "test.judged.tsv",
                    [Judgment(q, d, rel, source, "ana", "2026-12-02T01:00:00+00:00") for q, d, rel, source in rows])


def _grade(ds, q, d):
    hit = ds.qrels.filter((pl.col("query_id") == q) & (pl.col("doc_id") == d))["relevance"].to_list()
    return hit[0] if hit else None


def test_without_judgments_nothing_changes(demo):
    ds = _load(demo)
    assert ds.labels_fingerprint is None and ds.primary_qrels is None
    # the labels option at its default is not dumped: sweep spec hashes and fingerprints stay as they were
    assert "labels" not in DatasetSpec(format="beir", path=demo).model_dump()
    assert _load(demo, labels="human+assessor").fingerprint == ds.fingerprint


def test_which_judgments_count_and_who_wins(demo):
    before = _load(demo)
    _write(demo, [("q01", "nimbus-cli-reference", 2, PERSON),          # a person's judgment of a new pair
                  ("q01", "nimbus-upgrade-guide", 3, ASSESSOR),        # an assessor's only
                  ("q02", "nimbus-cli-reference", 1, ASSESSOR),        # a person and an assessor disagree:
                  ("q02", "nimbus-cli-reference", 0, PERSON),          # the person wins
                  ("q01", "nimbus-errors-4xxx", 0, PERSON)])           # the dataset's own label (2) wins
    human = _load(demo)
    both = _load(demo, labels="human+assessor")
    assert human.fingerprint == both.fingerprint == before.fingerprint  # retrieval keys never move
    assert None not in (human.labels_fingerprint, both.labels_fingerprint)
    assert human.labels_fingerprint != both.labels_fingerprint
    assert human.primary_qrels.sort(["query_id", "doc_id"]).equals(before.qrels.sort(["query_id", "doc_id"]))
    assert (_grade(human, "q01", "nimbus-cli-reference"), _grade(human, "q01", "nimbus-upgrade-guide"),
            _grade(human, "q02", "nimbus-cli-reference"), _grade(human, "q01", "nimbus-errors-4xxx")) == (2, None, 0, 2)
    assert (_grade(both, "q01", "nimbus-upgrade-guide"), _grade(both, "q02", "nimbus-cli-reference")) == (3, 0)
    assert human.qrels.height == before.qrels.height + 2 and both.qrels.height == before.qrels.height + 3
    # the same judgments give the same labels fingerprint; another relevance another one
    assert _load(demo).labels_fingerprint == human.labels_fingerprint
    _write(demo, [("q01", "nimbus-cli-reference", 1, PERSON)])
    assert _load(demo).labels_fingerprint != human.labels_fingerprint


def test_a_judgment_of_a_query_or_document_the_dataset_lacks_is_left_out_with_a_warning(demo):
    _write(demo, [("q01", "gone", 1, PERSON), ("q01", "nimbus-cli-reference", 1, PERSON)])
    ds = _load(demo)
    assert _grade(ds, "q01", "nimbus-cli-reference") == 1 and _grade(ds, "q01", "gone") is None
    assert any("1 judgment(s) name a query or document this dataset does not hold" in w and "test.judged.tsv:2" in w
               for w in ds.warnings)


@pytest.mark.parametrize("line, message", [
    ("q01\tnimbus-cli-reference\t4\tperson\tana\tnow", "relevance '4' must be blank (not judged) or an integer 0-3"),
    ("q01\tnimbus-cli-reference\t1\tmachine\tana\tnow", "source 'machine' must be 'person' or 'assessor:<model>'"),
])
def test_a_bad_stored_row_names_its_line(demo, line, message):
    path = demo / "qrels" / "test.judged.tsv"
    path.write_text("\t".join(JUDGED_COLUMNS) + "\nq01\tnimbus-upgrade-guide\t1\tperson\tana\tnow\n" + line + "\n")
    with pytest.raises(DatasetError, match=f"^{path}:3: {message}".replace("(", r"\(").replace(")", r"\)")):
        _load(demo)


def test_write_then_read_keeps_every_field_sorted(tmp_path):
    rows = [Judgment("q2", "b", 0, PERSON, "ana", "t1"), Judgment("q1", "a, b", 3, ASSESSOR, "qwen", "t2")]
    for name in ("judgments.csv", "x.judged.tsv"):
        write_judgments(tmp_path / name, rows)
        assert [j for _, j in read_judgments(tmp_path / name)] == sorted(rows, key=lambda j: j.key)
    assert read_judgments(tmp_path / "missing.csv") == []


def test_merge_into_a_beir_folder_updates_a_row_merged_again(demo, tmp_path):
    import json

    from ragbench.judgments.merge import merge_pool

    spec = DatasetSpec(format="beir", path=demo, queries="all")
    pool = tmp_path / "pool.jsonl"

    def merge(relevance, judge="ana"):
        pool.write_text("\n".join(json.dumps({"query_id": "q01", "doc": d, "relevance": r}) for d, r in
                                  (("nimbus-cli-reference", relevance), ("nimbus-upgrade-guide", None))) + "\n")
        return merge_pool(pool, load_dataset(spec), spec, judge)

    first = merge(1)
    assert first.path == demo / "qrels" / "test.judged.tsv"
    assert (first.added, first.updated, first.unchanged, first.blank) == (1, 0, 0, 1)
    assert _grade(_load(demo), "q01", "nimbus-cli-reference") == 1
    again = merge(3, judge="bo")
    assert (again.added, again.updated) == (0, 1)
    stored = [j for _, j in read_judgments(again.path)]
    assert [(j.query_id, j.doc, j.relevance, j.source, j.judge) for j in stored] == \
        [("q01", "nimbus-cli-reference", 3, "person", "bo")]  # updated in place, never a second row
    assert _grade(_load(demo), "q01", "nimbus-cli-reference") == 3
