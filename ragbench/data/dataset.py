"""Datasets: documents, queries and labels that survive re-chunking.

Labels are documents (qrels) or character spans inside documents, never chunk ids, so every chunker is judged on
the same footing. Loaders validate everything before any heavy work and name the file and line of each problem.

One module per format reads its files into a :class:`Dataset` (:mod:`.beir`, :mod:`.squad`); this module holds
the type and the readers and checks they share.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import polars as pl

from ragbench.core.bounded_io import MAX_STREAMED_BYTES, check_size, iter_lines, parse_json
from ragbench.core.errors import DatasetError
from ragbench.core.schemas import QRELS_SCHEMA, SPANS_SCHEMA


@dataclass(frozen=True)
class Dataset:
    """A labelled retrieval dataset. Tables are polars DataFrames with the ``*_SCHEMA`` columns above."""

    name: str
    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    spans: pl.DataFrame
    fingerprint: str
    warnings: tuple[str, ...] = field(default=())
    #: facts about the questions a report needs (e.g. synthetic vs real counts:
    #: :func:`ragbench.data.labels.origin_notes`); stored with the sweep
    notes: dict = field(default_factory=dict, compare=False, hash=False)
    #: the hash of the judgments added to the dataset's own labels (:mod:`ragbench.data.judged`); None when none
    #: are. Judging depends on it, retrieval does not: :attr:`fingerprint` (chunks, vectors, collections, sweeps)
    #: stays the same, and evaluation keys add it (:func:`ragbench.sweep.evaluate.evaluation_key`)
    labels_fingerprint: str | None = None
    #: the dataset's own qrels when judgments were added to :attr:`qrels` (the "before" of a pooled report)
    primary_qrels: pl.DataFrame | None = field(default=None, compare=False, hash=False)

    @property
    def n_unlabelled(self) -> int:
        """Queries with no judged document of relevance > 0: judged only non-relevant (0), or not judged at all.

        The one meaning of "unlabelled": exactly the queries that every document measure gives NaN
        (:mod:`ragbench.evaluation.metrics`), so this count, ``configs.n_unlabelled``, the ``n_unlabelled`` of
        ``config_metrics`` and the leaderboard agree. (Span measures need span labels: a query without an evidence
        span of relevance > 0 is NaN there, counted per measure by ``aggregate``.)
        """
        relevant = self.qrels.filter(pl.col("relevance") > 0)["query_id"]
        return self.queries.filter(~pl.col("query_id").is_in(relevant.implode())).height

    def summary(self) -> dict:
        return {"name": self.name, "fingerprint": self.fingerprint, "documents": self.corpus.height,
                "queries": self.queries.height, "qrels": self.qrels.height, "spans": self.spans.height,
                "unlabelled_queries": self.n_unlabelled, "warnings": len(self.warnings)}


# ---------------------------------------------------------------- JSONL / TSV readers with file:line errors
def _text_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file, one at a time, without their line ends (a BOM is dropped); any other encoding
    is an error naming the line. Lines end at ``\\n`` only (as JSON Lines and TSV define them)."""
    check_size(path, MAX_STREAMED_BYTES, "JSON Lines or TSV file", DatasetError)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(iter_lines(f, path, DatasetError), 1):  # every line bounded
            if lineno == 1:
                if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
                    raise DatasetError(f"{path}:1: UTF-16 text; save the file as UTF-8")
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise DatasetError(f"{path}:{lineno}: not UTF-8 (byte 0x{raw[e.start]:02x}); save the file as "
                                   "UTF-8") from None


def relevance_grade(value, where: str) -> int:
    """A relevance label as trec_eval reads it: an integer >= 0 (``2`` and ``2.0`` are the same grade). Anything
    else (``1.5``, ``-1``, ``inf``, text) is an error naming ``where``: a grade is never truncated or guessed."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: relevance {value!r} is not a number") from None
    if not number.is_integer() or number < 0:
        raise DatasetError(f"{where}: relevance {value!r} must be an integer >= 0 (graded labels are 0, 1, 2, ...)")
    return int(number)


def _read_jsonl(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict]]:
    return list(_iter_jsonl(path, required))


def _iter_jsonl(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line, checked to be a JSON object with the ``required`` keys."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    for lineno, line in enumerate(_text_lines(path), 1):
        if not line.strip():
            continue
        obj = parse_json(line, f"{path}:{lineno}", DatasetError)
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        missing = [k for k in required if k not in obj]
        if missing:
            raise DatasetError(f"{path}:{lineno}: missing field(s) {', '.join(missing)}")
        yield lineno, obj


def _unique_ids(path: Path, rows: Iterable[tuple[int, dict]], key: str = "_id") -> Iterator[tuple[int, dict]]:
    """``rows`` as they come, checked to carry distinct ``key`` values (an error names the line of the repeat)."""
    seen: dict[str, int] = {}
    for lineno, obj in rows:
        i = str(obj[key])
        if i in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate id {i!r} (first seen on line {seen[i]})")
        seen[i] = lineno
        yield lineno, obj


def _read_qrels(path: Path, doc_ids: set[str], query_ids: set[str]) -> pl.DataFrame:
    if not path.is_file():
        raise DatasetError(f"{path}: qrels file not found")
    rows, seen = [], {}
    for lineno, line in enumerate(_text_lines(path), 1):
        parts = line.rstrip("\n").split("\t") if "\t" in line else line.split()
        if not parts or not line.strip():
            continue
        if lineno == 1 and parts[0] in ("query-id", "query_id", "qid"):
            continue
        if len(parts) == 4:  # TREC style: qid iter docid rel
            parts = [parts[0], parts[2], parts[3]]
        if len(parts) != 3:
            raise DatasetError(f"{path}:{lineno}: expected 3 tab-separated columns, got {len(parts)}")
        qid, did, score = parts
        rel = relevance_grade(score, f"{path}:{lineno}")
        if qid not in query_ids:
            raise DatasetError(f"{path}:{lineno}: query {qid!r} is not in queries.jsonl")
        if did not in doc_ids:
            raise DatasetError(f"{path}:{lineno}: document {did!r} is not in corpus.jsonl")
        if (qid, did) in seen:
            raise DatasetError(f"{path}:{lineno}: duplicate judgment for ({qid}, {did}) "
                               f"(first on line {seen[(qid, did)]})")
        seen[(qid, did)] = lineno
        rows.append((qid, did, rel))
    if not rows:
        raise DatasetError(f"{path}: no judgments (an empty qrels file judges nothing)")
    return pl.DataFrame(rows, schema=QRELS_SCHEMA, orient="row")


def validate_spans(spans: list[tuple], doc_len: dict[str, int], source: str) -> tuple[pl.DataFrame, list[str]]:
    """Check spans lie inside their documents; merge overlapping duplicates of one (query, doc) with a warning.

    ``spans`` rows are ``(query_id, doc_id, start, end, relevance, where)``; ``where`` names the line for errors.
    A span outside its document or with ``start >= end`` is an error, never a silently wrong label.
    """
    warnings: list[str] = []
    by_pair: dict[tuple[str, str], list[tuple]] = {}
    for q, d, s, e, rel, where in spans:
        if d not in doc_len:
            raise DatasetError(f"{where}: span names unknown document {d!r}")
        if e <= s:  # the cause is the span itself, wherever it lies
            raise DatasetError(f"{where}: span [{s}, {e}) " + ("is empty (end equals start)" if e == s else
                               f"ends before it starts (end {e} < start {s})") + "; spans are [start, end)")
        if not (0 <= s < e <= doc_len[d]):
            raise DatasetError(f"{where}: span [{s}, {e}) lies outside document {d!r} of length {doc_len[d]}")
        by_pair.setdefault((q, d), []).append((s, e, rel, where))
    out = []
    for (q, d), items in by_pair.items():
        items.sort()
        merged = [list(items[0][:3])]
        for s, e, rel, where in items[1:]:
            if s < merged[-1][1]:
                warnings.append(f"{where}: span [{s}, {e}) overlaps another span of ({q}, {d}); merged")
                merged[-1][1] = max(merged[-1][1], e)
                merged[-1][2] = max(merged[-1][2], rel)
            else:
                merged.append([s, e, rel])
        out.extend((q, d, s, e, rel) for s, e, rel in merged)
    return pl.DataFrame(out, schema=SPANS_SCHEMA, orient="row"), warnings


def subset(ds: Dataset, max_queries: int | None, max_docs: int | None, seed: int = 0) -> Dataset:
    """A seeded slice: ``max_queries`` judged queries (unjudged ones kept in proportion), and every judged doc of
    them plus seeded distractors up to ``max_docs``. The fingerprint already covers these settings."""
    if not max_queries and not max_docs:
        return ds
    rng = random.Random(seed)
    queries = ds.queries
    if max_queries and queries.height > max_queries:
        ids = sorted(queries["query_id"].to_list())
        keep = set(rng.sample(ids, max_queries))
        queries = queries.filter(pl.col("query_id").is_in(list(keep)))
    qids = queries["query_id"].implode()
    qrels = ds.qrels.filter(pl.col("query_id").is_in(qids))
    spans = ds.spans.filter(pl.col("query_id").is_in(qids))
    corpus = ds.corpus
    if max_docs and corpus.height > max_docs:
        judged = set(qrels["doc_id"].to_list())
        others = sorted(set(corpus["doc_id"].to_list()) - judged)
        n_extra = max(0, max_docs - len(judged))
        keep_docs = judged | set(rng.sample(others, min(n_extra, len(others))))
        corpus = corpus.filter(pl.col("doc_id").is_in(list(keep_docs)))
    primary = ds.primary_qrels.filter(pl.col("query_id").is_in(qids)) if ds.primary_qrels is not None else None
    return replace(ds, corpus=corpus, queries=queries, qrels=qrels, spans=spans, primary_qrels=primary)
