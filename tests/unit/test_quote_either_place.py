"""Evidence in either place: a quote found once in each of several documents its row lists labels each of them; twice
in one document, or only in a document the row does not list, stays an error naming the file and line."""

from __future__ import annotations

import pytest

from ragbench.config import DatasetSpec
from ragbench.core.errors import DatasetError
from ragbench.data import load_dataset

SENTENCE = "Run git stash push to shelve your local changes."


def _folder(tmp_path, rows: str):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text(f"# Stash\n\n{SENTENCE}\n\nMore about stashes.\n", encoding="utf-8")
    (root / "b.md").write_text(f"# Cheat sheet\n\nSaving work: {SENTENCE.upper()}\n", encoding="utf-8")
    (root / "c.md").write_text(f"# Twice\n\n{SENTENCE}\n\nAgain: {SENTENCE}\n", encoding="utf-8")
    (root / "d.md").write_text("# Other\n\nNothing about it here.\n", encoding="utf-8")
    (root / "questions.csv").write_text("question,doc,quote\n" + rows, encoding="utf-8")
    return root


def test_a_quote_once_in_each_listed_document_is_evidence_in_each(tmp_path):
    ds = load_dataset(DatasetSpec(format="folder", path=_folder(tmp_path, f"How do I stash?,a.md|b.md,{SENTENCE}\n")))
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    spans = {d: texts[d][s:e] for _, d, s, e, _ in ds.spans.iter_rows()}
    assert spans == {"a.md": SENTENCE, "b.md": SENTENCE.upper()}
    assert sorted(ds.qrels["doc_id"].to_list()) == ["a.md", "b.md"]


@pytest.mark.parametrize("row, expected", [
    # twice in one listed document: ambiguous there, even though the other listed document has it once
    (f"How do I stash?,a.md|c.md,{SENTENCE}\n", "is ambiguous: found 3 times (a.md line 3; c.md line 3; c.md line 5)"),
    # without a doc list the quote must be unique in the whole folder
    (f"How do I stash?,,{SENTENCE}\n", "is ambiguous: found 4 times"),
    # only in a document the row does not list
    (f"How do I stash?,d.md,{SENTENCE}\n", "is not in d.md"),
])
def test_twice_in_one_document_or_outside_the_listed_ones_stays_an_error(tmp_path, row, expected):
    root = _folder(tmp_path, row)
    with pytest.raises(DatasetError) as e:
        load_dataset(DatasetSpec(format="folder", path=root))
    message = str(e.value).splitlines()[1]
    assert message.startswith(f"{root / 'questions.csv'}:2: question 'How do I stash?'") and expected in message
