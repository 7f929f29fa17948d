"""`judge assess` with the real llama-server and the packaged SmolLM2 model: it grades the pairs people judged of a
small folder dataset and the blank rows of a pool, every reply parses to a grade 0-3 (the reply is constrained to a
JSON schema), the agreement is stored, the grades are cached (a rerun starts no server; a damaged entry is graded
again)."""

from __future__ import annotations

import pytest
from conftest import needs_llm

from ragbench.config import DatasetSpec
from ragbench.data import load_dataset
from ragbench.judgments.assess import AssessRequest, assess_pool
from ragbench.judgments.assessor import AssessorChoice, GradeCache, open_assessor
from ragbench.judgments.pool import PoolRow
from ragbench.judgments.pool_file import pool_rows, write_pool
from ragbench.results.store import ResultStore

DOCS = {
    "port.md": "# Ports\n\nThe broker listens on port 7400 for clients and on port 7401 for replication traffic "
               "between nodes.\n",
    "backup.md": "# Backups\n\nSnapshots are taken every six hours and kept for fourteen days by default.\n",
    "tls.md": "# TLS\n\nBrokers present the certificate configured in tls.cert_file and reload it on SIGHUP.\n",
}
QUESTIONS = ("question,doc,quote\n"
             "Which port carries replication traffic?,port.md,on port 7401 for replication traffic\n"
             "How long are snapshots kept?,backup.md,kept for fourteen days by default\n")


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text, encoding="utf-8")
    (root / "questions.csv").write_text(QUESTIONS, encoding="utf-8")
    return root


def _pool(ds, path):
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    qid = dict(zip(ds.queries["text"], ds.queries["query_id"]))
    port, snap = qid["Which port carries replication traffic?"], qid["How long are snapshots kept?"]
    rows = [PoolRow(port, "Which port carries replication traffic?", "tls.md", texts["tls.md"], 2, 1,
                    relevance=0),  # a person marked it: a negative for the calibration
            PoolRow(port, "Which port carries replication traffic?", "backup.md", texts["backup.md"], 1, 3),
            PoolRow(snap, "How long are snapshots kept?", "port.md", texts["port.md"], 2, 2),
            PoolRow(snap, "How long are snapshots kept?", "tls.md", texts["tls.md"], 1, 4)]
    return write_pool(rows, path)


@needs_llm
def test_smollm2_grades_every_row_and_every_reply_parses(folder, tmp_path, settings):
    ds = load_dataset(DatasetSpec(format="folder", path=folder), settings.home / "cache")
    pool = _pool(ds, tmp_path / "pool.csv")
    store = ResultStore(settings.home / "results.duckdb")
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1)) as assessor:
        result = assess_pool(assessor, ds, AssessRequest(pool, sample=10), store)
        graded_first = assessor.graded
    rows = pool_rows(result.out)
    assert result.out == tmp_path / "pool.assessed.csv" and len(rows) == 4
    assert rows[0].relevance == 0 and rows[0].source == ""  # the person's row is kept as it was
    for row in rows[1:]:  # every blank row got a grade that parsed
        assert row.relevance in (0, 1, 2, 3)
        assert row.source == f"assessor:{assessor.model}" and row.judge == assessor.model and row.judged_at
    assert assessor.model.startswith("SmolLM2-135M-Instruct.Q4_1@sha256:")
    # the calibration: the two labelled positives and the person's 0, graded and stored
    a = result.agreement
    assert (a.n, a.n_relevant) == (3, 2) and sum(map(sum, a.confusion)) == 3
    assert store.assessor_agreements(model=assessor.model)[0] == a
    assert graded_first == 6  # 3 calibration pairs + 3 blank rows, each sent once

    # a rerun: every grade from the cache, no server started, the same file
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1)) as again:
        second = assess_pool(again, ds, AssessRequest(pool, sample=10, force=True), store)
        assert again.graded == 0 and again._client is None
    assert [(r.relevance, r.source, r.judge) for r in pool_rows(second.out)] == \
        [(r.relevance, r.source, r.judge) for r in rows]
    assert len(store.assessor_agreements(model=assessor.model)) == 2

    # a damaged grade is never used: it is quarantined and graded again
    entries = sorted((settings.home / "cache" / GradeCache.folder).glob("*/*.json"))
    assert len(entries) == 6
    entries[0].write_bytes(b'{"grade": 3, "seconds": 0.1}')
    with open_assessor(settings, AssessorChoice(model="smollm2-135m", threads=1)) as third:
        assess_pool(third, ds, AssessRequest(pool, sample=10, force=True), store)
        assert third.graded == 1
