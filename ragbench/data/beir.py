"""The BEIR folder format (``format: beir``, the default).

Layout (the BEIR convention, plus two optional extras)::

    corpus.jsonl        {"_id", "title", "text", "metadata"?}
    queries.jsonl       {"_id", "text", "metadata"?: {"class"?, "answers"?, <doc_id>: [{"sentences": [...]}]}}
    qrels/<split>.tsv   query-id <TAB> corpus-id <TAB> score   (header line optional)
    spans/<split>.jsonl {"query_id", "doc_id", "start", "end", "relevance"}   (optional, [start, end) in text)
    sentences.jsonl     {"_id", "sentences": [[start, end], ...]}  (optional; SciFact: evidence sentence offsets)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import polars as pl

from ragbench.core.errors import DatasetError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.schemas import CORPUS_SCHEMA, QUERY_SCHEMA, frame_from_rows
from ragbench.data.dataset import (
    Dataset,
    _iter_jsonl,
    _read_jsonl,
    _read_qrels,
    _unique_ids,
    relevance_grade,
    subset,
    validate_spans,
)
from ragbench.data.judged import judgments_path, with_judgments
from ragbench.data.spec import DATASET_FORMATS, DatasetSpec


def load_beir(spec: DatasetSpec) -> Dataset:
    """Load a BEIR-layout folder, validating ids, references and spans. See the module docstring for the layout."""
    root = Path(spec.path)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset folder not found")
    corpus_path, queries_path = root / "corpus.jsonl", root / "queries.jsonl"
    qrels_path = root / "qrels" / f"{spec.split}.tsv"
    for required in (corpus_path, queries_path):
        if not required.is_file():
            raise DatasetError(f"{required}: not found; a BEIR folder holds corpus.jsonl, queries.jsonl and "
                               f"qrels/<split>.tsv{_layout_hint(root)}")

    empty: dict[str, int] = {}  # empty documents: their line

    def corpus_rows():  # checked and converted one line at a time: a large corpus never sits as Python objects
        for lineno, obj in _unique_ids(corpus_path, _ids_checked(corpus_path, ("_id", "text"))):
            if not isinstance(obj["text"], str):
                raise DatasetError(f"{corpus_path}:{lineno}: 'text' must be a string")
            metadata = _mapping(obj, "metadata", f"{corpus_path}:{lineno}")
            if not obj["text"].strip():
                empty[str(obj["_id"])] = lineno
            yield str(obj["_id"]), str(obj.get("title") or ""), obj["text"], json.dumps(metadata, sort_keys=True)

    corpus = frame_from_rows(corpus_rows(), CORPUS_SCHEMA)
    if not corpus.height:
        raise DatasetError(f"{corpus_path}: empty corpus")
    if len(empty) == corpus.height:
        raise DatasetError(f"{corpus_path}: every document's text is empty")
    query_rows = list(_unique_ids(queries_path, _ids_checked(queries_path, ("_id", "text"))))
    if not query_rows:
        raise DatasetError(f"{queries_path}: no queries")
    for lineno, obj in query_rows:
        where = f"{queries_path}:{lineno}"
        if not isinstance(obj["text"], str) or not obj["text"].strip():
            raise DatasetError(f"{where}: query {obj['_id']!r}: 'text' must be a non-empty string, got "
                               f"{obj['text']!r:.60}")
        answers = _mapping(obj, "metadata", where).get("answers", [])
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise DatasetError(f"{where}: query {obj['_id']!r}: metadata.answers must be a list of strings, got "
                               f"{answers!r:.60}")
    doc_len = dict(zip(corpus["doc_id"], corpus["text"].str.len_chars()))

    query_meta = {str(o["_id"]): (o.get("metadata") or {}) for _, o in query_rows}
    queries = pl.DataFrame(
        [(str(o["_id"]), str(o["text"]), (o.get("metadata") or {}).get("class"),
          [str(a) for a in (o.get("metadata") or {}).get("answers", []) or []])
         for _, o in query_rows], schema=QUERY_SCHEMA, orient="row")
    qrels = _read_qrels(qrels_path, set(doc_len), set(query_meta))
    judged_empty = sorted(set(qrels["doc_id"]) & set(empty), key=empty.get)
    if judged_empty:
        did = judged_empty[0]
        raise DatasetError(f"{corpus_path}:{empty[did]}: document {did!r} is judged in {qrels_path.name} but its "
                           f"text is empty: no chunk can hold it ({len(judged_empty)} such document(s))")

    span_rows: list[tuple] = []
    spans_path = root / "spans" / f"{spec.split}.jsonl"
    sentences_path = root / "sentences.jsonl"
    if spec.spans and spans_path.is_file():
        judged = {(q, d) for q, d, r in qrels.iter_rows() if r > 0}
        for lineno, o in _read_jsonl(spans_path, ("query_id", "doc_id", "start", "end")):
            where, q, d = f"{spans_path}:{lineno}", str(o["query_id"]), str(o["doc_id"])
            if q not in query_meta:
                raise DatasetError(f"{where}: span for query {q!r}, which is not in queries.jsonl")
            if d not in doc_len:  # before the qrels check: an unknown document is the cause, not its judgment
                raise DatasetError(f"{where}: span for document {d!r}, which is not in corpus.jsonl")
            if (q, d) not in judged:
                raise DatasetError(f"{where}: span for ({q}, {d}), which {qrels_path.name} does not judge relevant: "
                                   "evidence must sit in a relevant document")
            bounds = [o["start"], o["end"]]
            if not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
                raise DatasetError(f"{where}: span start and end must be integers, got {bounds!r}")
            span_rows.append((q, d, o["start"], o["end"], relevance_grade(o.get("relevance", 1), where), where))
    elif spec.spans and sentences_path.is_file():
        span_rows = _sentence_evidence_spans(sentences_path, query_meta, qrels)

    if spec.queries == "in_qrels":
        queries = queries.filter(pl.col("query_id").is_in(qrels["query_id"].unique().implode()))
    spans, warnings = validate_spans(span_rows, doc_len, str(spans_path))
    spans = spans.filter(pl.col("query_id").is_in(queries["query_id"].implode()))

    files = [corpus_path, queries_path, qrels_path] + [p for p in (spans_path, sentences_path) if p.is_file()]
    fingerprint = stable_hash({"files": {p.name: file_sha256(p) for p in files},
                               "spec": spec.model_dump(mode="json", exclude={"name", "path", "holdout", "labels"})})
    ds = Dataset(spec.name or root.name, corpus, queries, qrels, spans, fingerprint, tuple(warnings))
    ds = subset(ds, spec.max_queries, spec.max_docs, spec.seed)  # judgments after: the corpus stays the same
    return with_judgments(ds, judgments_path(root, "beir", spec.split), spec.labels)


def is_beir_folder(path: Path) -> bool:
    """Whether ``path`` is meant as a BEIR folder: it holds any of ``corpus.jsonl``, ``queries.jsonl`` or a
    ``qrels/`` folder (so a BEIR folder missing one of them is reported as such, not read as a folder of files)."""
    path = Path(path)
    return path.is_dir() and any(p.exists() for p in (path / "corpus.jsonl", path / "queries.jsonl", path / "qrels"))


def _layout_hint(root: Path) -> str:
    """What the folder holds instead, when a file of the BEIR layout is missing (a misspelt name is the usual cause)."""
    present = sorted(p.name for p in root.iterdir() if p.suffix == ".jsonl") if root.is_dir() else []
    return f" (this folder has {', '.join(present)})" if present else ""


def _ids_checked(path: Path, required: tuple[str, ...]):
    """The objects of a JSONL file whose ``_id`` is a non-empty string or an integer; anything else (null, a list,
    "") is an error naming the line, before any table refers to it."""
    for lineno, obj in _iter_jsonl(path, required):
        i = obj["_id"]
        if isinstance(i, bool) or not isinstance(i, (str, int)) or (isinstance(i, str) and not i.strip()):
            raise DatasetError(f"{path}:{lineno}: '_id' must be a non-empty string or an integer, got {i!r:.40}")
        yield lineno, obj


def _mapping(obj: dict, key: str, where: str) -> dict:
    """``obj[key]`` when it is a mapping (absent or null: empty); anything else is an error naming ``where``."""
    value = obj.get(key) or {}
    if not isinstance(value, dict):
        raise DatasetError(f"{where}: '{key}' must be an object, got {type(value).__name__} {value!r:.40}")
    return value


def _sentence_evidence_spans(path: Path, query_meta: dict[str, dict], qrels: pl.DataFrame) -> list[tuple]:
    """SciFact: evidence sentence indices in query metadata + sentence offsets -> character spans (relevance 1)."""
    offsets: dict[str, list] = {}
    for lineno, o in _read_jsonl(path, ("_id", "sentences")):
        offsets[str(o["_id"])] = o["sentences"]
    judged = set(zip(qrels["query_id"], qrels["doc_id"]))
    rows = []
    for qid, meta in query_meta.items():
        for did, evidence in meta.items():
            if (qid, did) not in judged or not isinstance(evidence, list) or did not in offsets:
                continue
            for ev in evidence:
                for idx in ev.get("sentences", []):
                    if not 0 <= idx < len(offsets[did]):
                        raise DatasetError(f"{path}: query {qid} cites sentence {idx} of doc {did}, "
                                           f"which has {len(offsets[did])} sentences")
                    s, e = offsets[did][idx]
                    rows.append((qid, did, int(s), int(e), 1, f"{path} (query {qid}, doc {did})"))
    return rows


@DATASET_FORMATS.register
class BeirDataset(DatasetSpec):
    """``format: beir`` (the default): a BEIR-layout folder (``corpus.jsonl``, ``queries.jsonl``,
    ``qrels/<split>.tsv``; optional ``spans/<split>.jsonl`` or SciFact's ``sentences.jsonl``); the common options
    only."""

    format: Literal["beir"] = "beir"

    @classmethod
    def recognizes(cls, path: Path) -> int:
        return 2 if is_beir_folder(path) else 0  # more surely than any folder of documents

    def load(self, cache_root: Path | None = None) -> Dataset:
        return load_beir(self)
