"""Answer strings: what a question row says answers it (answers, then located quotes), found in a passage the way
the quote locator finds a quote."""

from __future__ import annotations

from ragbench.config import DatasetSpec
from ragbench.data import load_dataset
from ragbench.data.answer_strings import answer_strings, answers_found


def _folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "stash.md").write_text("# Stashing\n\nUse **git stash push** to shelve changes.\n\n"
                                   "The stash is a stack: the newest entry is `stash@{0}`.\n", encoding="utf-8")
    (root / "branch.md").write_text("# Branches\n\nA branch is a movable pointer to a commit.\n", encoding="utf-8")
    (root / "questions.csv").write_text(
        "question,doc,quote,answer\n"
        "How do I shelve my changes?,stash.md,“Use git stash push”,git stash push|stash@{0}\n"
        "What is a branch?,branch.md,,\n", encoding="utf-8")
    return load_dataset(DatasetSpec(format="folder", path=root))


def test_answer_strings_are_the_answers_then_the_located_quotes_each_once(tmp_path):
    ds = _folder(tmp_path)
    ids = dict(zip(ds.queries["text"], ds.queries["query_id"]))
    got = answer_strings(ds, ids["How do I shelve my changes?"])
    # the quote's located text is "Use **git stash push**" in the document: a different string, kept after answers
    assert got[:2] == ("git stash push", "stash@{0}")
    assert len(got) == 3 and got[2].startswith("Use ") and "git stash push" in got[2]
    assert answer_strings(ds, ids["What is a branch?"]) == ()  # a document label only
    assert answer_strings(ds, "no-such-query") == ()


def test_answers_found_normalises_as_the_locator_does_and_respects_word_boundaries():
    answers = ["git stash push", "it's", "stash@{0}", "push"]
    text = "Run  GIT   **stash** push — it’s quick; then `stash@{0}` holds it."
    assert answers_found(text, answers) == ["git stash push", "it's", "stash@{0}", "push"]
    assert answers_found("pushing stashes", ["push", "stash"]) == []  # inside a word: no match
    assert answers_found("", answers) == [] and answers_found("anything", []) == []
