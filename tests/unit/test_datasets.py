"""Dataset loading: the demo and SciFact load; every kind of bad input gets an error naming file and line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DEMO, SCIFACT, requires_scifact

from ragbench.config import DatasetSpec
from ragbench.core.errors import DatasetError
from ragbench.data import load_dataset


def _beir(tmp_path: Path, corpus: list[str], queries: list[str], qrels: list[str]) -> Path:
    root = tmp_path / "ds"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(queries) + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return root


GOOD_CORPUS = ['{"_id": "d1", "title": "T1", "text": "alpha beta"}', '{"_id": "d2", "title": "", "text": "gamma"}']
GOOD_QUERIES = ['{"_id": "q1", "text": "alpha?"}', '{"_id": "q2", "text": "nothing"}']


def test_demo_loads_with_classes_answers_and_spans():
    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    assert ds.corpus.height >= 30 and ds.queries.height >= 30
    assert set(ds.queries["query_class"].drop_nulls()) >= {"identifier", "paraphrase", "cross-section"}
    assert ds.n_unlabelled >= 1
    assert ds.spans.height > 0
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    for q, d, s, e, _ in ds.spans.iter_rows():
        assert 0 <= s < e <= len(texts[d])
    # in_qrels (the BEIR convention) drops the unjudged queries
    assert load_dataset(DatasetSpec(path=DEMO)).queries.height == ds.queries.height - ds.n_unlabelled


def test_fingerprint_is_content_hash(tmp_path):
    a = load_dataset(DatasetSpec(path=DEMO))
    copy = tmp_path / "demo"
    shutil.copytree(DEMO, copy)
    assert load_dataset(DatasetSpec(path=copy)).fingerprint == a.fingerprint  # location does not matter
    with open(copy / "corpus.jsonl", "a") as f:
        f.write(json.dumps({"_id": "extra", "title": "", "text": "new"}) + "\n")
    assert load_dataset(DatasetSpec(path=copy)).fingerprint != a.fingerprint


@requires_scifact()
def test_scifact_test_split_and_evidence_spans():
    ds = load_dataset(DatasetSpec(path=SCIFACT, split="test"))
    assert ds.corpus.height == 5183 and ds.queries.height == 300 and ds.qrels.height == 339
    assert ds.spans["query_id"].n_unique() == 188  # README: span ground truth for 188 of the 300 test queries
    sub = load_dataset(DatasetSpec(path=SCIFACT, split="test", max_queries=20, max_docs=200, seed=1))
    assert sub.queries.height == 20 and sub.corpus.height == 200
    assert set(sub.qrels["doc_id"]) <= set(sub.corpus["doc_id"])  # every judged doc kept


@pytest.mark.parametrize("corpus,queries,qrels,message", [
    (['{"_id": "d1", "text": "a"}', '{"_id": "d2", "text": '], GOOD_QUERIES, ["q1\td1\t1"],
     r"corpus.jsonl:2: malformed JSON"),
    (GOOD_CORPUS + ['{"_id": "d1", "text": "again"}'], GOOD_QUERIES, ["q1\td1\t1"],
     r"corpus.jsonl:3: duplicate id 'd1' \(first seen on line 1\)"),
    (GOOD_CORPUS, GOOD_QUERIES + ['{"_id": "q1", "text": "dup"}'], ["q1\td1\t1"], r"queries.jsonl:3: duplicate id"),
    (GOOD_CORPUS, GOOD_QUERIES, ["q1\td1\t1", "q1\tzzz\t1"], r"test.tsv:3: document 'zzz' is not in corpus"),
    (GOOD_CORPUS, GOOD_QUERIES, ["q9\td1\t1"], r"test.tsv:2: query 'q9' is not in queries"),
    (GOOD_CORPUS, GOOD_QUERIES, ["q1\td1\tvery"], r"test.tsv:2: relevance 'very' is not a number"),
    ([''], GOOD_QUERIES, ["q1\td1\t1"], r"corpus.jsonl: empty corpus"),
    (['{"_id": "d1"}'], GOOD_QUERIES, [], r"corpus.jsonl:1: missing field\(s\) text"),
])
def test_bad_input_names_file_and_line(tmp_path, corpus, queries, qrels, message):
    root = _beir(tmp_path, corpus, queries, qrels)
    with pytest.raises(DatasetError, match=message):
        load_dataset(DatasetSpec(path=root))


def test_span_outside_document_is_an_error_and_overlaps_are_merged_with_warning(tmp_path):
    root = _beir(tmp_path, GOOD_CORPUS, GOOD_QUERIES, ["q1\td1\t1"])
    (root / "spans").mkdir()
    spans = root / "spans" / "test.jsonl"
    spans.write_text('{"query_id": "q1", "doc_id": "d1", "start": 0, "end": 99}\n')
    with pytest.raises(DatasetError, match=r"test.jsonl:1: span \[0, 99\) lies outside document 'd1' of length 10"):
        load_dataset(DatasetSpec(path=root))
    spans.write_text('{"query_id": "q1", "doc_id": "d1", "start": 0, "end": 5}\n'
                     '{"query_id": "q1", "doc_id": "d1", "start": 3, "end": 10}\n')
    ds = load_dataset(DatasetSpec(path=root))
    assert ds.spans.select("start", "end").rows() == [(0, 10)]
    assert len(ds.warnings) == 1 and "overlaps" in ds.warnings[0]


def test_a_line_separator_inside_a_json_string_is_text_not_a_line_end(tmp_path):
    """JSON Lines end at \\n only: U+2028 / U+2029 written raw inside a string are part of the text (a reader
    splitting with ``str.splitlines`` cut such a line in two and called it malformed), and line numbers after it
    still count file lines."""
    text = "first\u2028second\u2029third"
    corpus = ['{"_id": "d1", "title": "T", "text": "' + text + '"}', '{"_id": "d2", "text": "gamma"}']
    root = _beir(tmp_path, corpus, GOOD_QUERIES, ["q1\td1\t1"])
    ds = load_dataset(DatasetSpec(path=root))
    assert ds.corpus.filter(ds.corpus["doc_id"] == "d1")["text"].item() == text
    root = _beir(tmp_path / "bad", corpus + ['{"_id": "d3", "text": 7}'], GOOD_QUERIES, ["q1\td1\t1"])
    with pytest.raises(DatasetError, match=r"corpus.jsonl:3: 'text' must be a string"):
        load_dataset(DatasetSpec(path=root))


def test_a_large_corpus_is_read_in_batches_with_the_same_table(tmp_path, monkeypatch):
    """The corpus becomes Arrow a batch of rows at a time: with a batch of 2 rows the table equals the one-batch
    table, in file order."""
    from ragbench.core import schemas

    corpus = [json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": f"text {i} ü", "metadata": {"n": i}})
              for i in range(7)]
    root = _beir(tmp_path, corpus, GOOD_QUERIES, ["q1\td1\t1"])
    whole = load_dataset(DatasetSpec(path=root)).corpus
    monkeypatch.setattr(schemas, "FRAME_BATCH_ROWS", 2)
    monkeypatch.setattr(schemas.frame_from_rows, "__defaults__", (2,))
    batched = load_dataset(DatasetSpec(path=root)).corpus
    assert batched.equals(whole) and batched["doc_id"].to_list() == [f"d{i}" for i in range(7)]
