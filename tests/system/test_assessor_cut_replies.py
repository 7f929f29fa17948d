"""The assessor on the real llama-server with SmolLM2 when its replies are cut short: a reply that is not a grade is
asked again once, then the pair is left ungraded and counted, and the run goes on (it once stopped the whole
``judge assess`` run after 22 pairs on ``'{\\n  "grade": 0\\n'``). With the grammar and the default room every reply
is exactly ``{"grade": N}``."""

from __future__ import annotations

import pytest
from conftest import needs_llm

from ragbench.config import DatasetSpec
from ragbench.data import load_dataset
from ragbench.judgments.assess import AssessRequest, assess_pool
from ragbench.judgments.assessor import AssessorChoice, AssessorError, messages, open_assessor
from ragbench.judgments.pool import PoolRow
from ragbench.judgments.pool_file import pool_rows, write_pool
from ragbench.results.store import ResultStore

DOCS = {"port.md": "# Ports\n\nThe broker listens on port 7400 for clients and on port 7401 for replication.\n",
        "backup.md": "# Backups\n\nSnapshots are taken every six hours and kept for fourteen days by default.\n"}
QUESTIONS = ("question,doc,quote\nWhich port carries replication?,port.md,on port 7401 for replication\n"
             "How long are snapshots kept?,backup.md,kept for fourteen days by default\n")


@pytest.fixture
def ds(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "questions.csv").write_text(QUESTIONS, encoding="utf-8")
    return load_dataset(DatasetSpec(format="folder", path=root), tmp_path / "cache")


def _pool(ds, path, blank: bool):
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    qid = dict(zip(ds.queries["text"], ds.queries["query_id"]))
    port, snap = qid["Which port carries replication?"], qid["How long are snapshots kept?"]
    rows = [PoolRow(port, "Which port carries replication?", "backup.md", texts["backup.md"], 1, 3, relevance=0)]
    if blank:
        rows.append(PoolRow(snap, "How long are snapshots kept?", "port.md", texts["port.md"], 2, 2))
    return write_pool(rows, path)


@needs_llm
def test_cut_replies_leave_pairs_ungraded_and_the_run_goes_on(ds, tmp_path, settings, caplog):
    store = ResultStore(settings.home / "results.duckdb")
    # first the calibration pairs with room: their grades are cached
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1)) as assessor:
        first = assess_pool(assessor, ds, AssessRequest(_pool(ds, tmp_path / "people.csv", blank=False)), store)
    assert first.agreement.n == 3 and first.ungraded == first.ungraded_calibration == 0

    # then one token of room (two on the retry): the blank row's replies are cut, it stays blank and is counted
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1, max_tokens=1)) as assessor:
        result = assess_pool(assessor, ds, AssessRequest(_pool(ds, tmp_path / "pool.csv", blank=True)), store)
        assert assessor.graded == 1 and assessor.ungraded == 1  # asked (twice) and left ungraded
    assert (result.graded, result.ungraded, result.ungraded_calibration) == (0, 1, 0)
    assert result.agreement.n == 3  # the calibration came from the cache
    rows = pool_rows(result.out)
    assert rows[0].relevance == 0 and rows[1].relevance is None and rows[1].source == ""
    assert "1 row(s) left blank" in result.describe()
    assert any("left ungraded" in r.getMessage() for r in caplog.records)


@needs_llm
def test_every_calibration_reply_cut_is_one_error_not_a_traceback(ds, tmp_path, settings):
    store = ResultStore(settings.home / "results.duckdb")
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1, max_tokens=1)) as assessor:
        with pytest.raises(AssessorError, match="graded none of the 3 calibration pair"):
            assess_pool(assessor, ds, AssessRequest(_pool(ds, tmp_path / "pool.csv", blank=True)), store)


@needs_llm
def test_the_grammar_allows_no_whitespace_in_the_reply(ds, settings):
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1)) as assessor:
        assessor.grade("Which port carries replication?", DOCS["port.md"])  # opens the server
        reply = assessor._client.complete(messages("How long are snapshots kept?", DOCS["backup.md"]),
                                          max_tokens=64)
    assert reply.text in {'{"grade": %d}' % g for g in range(4)}, reply.text


@needs_llm
def test_a_cut_reply_is_asked_again_with_twice_the_room(settings):
    """``{"grade": N}`` is 6 SmolLM2 tokens: 3 cut it short, the retry's 6 fit."""
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1, max_tokens=3)) as assessor:
        grade = assessor.grade("How long are snapshots kept?", DOCS["backup.md"])
    assert grade.grade in (0, 1, 2, 3) and not grade.cached and assessor.ungraded == 0
