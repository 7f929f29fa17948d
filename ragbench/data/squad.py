"""SQuAD v1.1-format datasets: documents, span qrels from answer offsets, and the answer strings.

Layout (one JSON file; ``spec.path`` is the file, or a folder holding ``{split}.json``)::

    {"data": [{"title": str, "paragraphs": [{"context": str,
                                             "qas": [{"id": str, "question": str,
                                                      "answers": [{"answer_start": int, "text": str}, ...]}]}]}]}

Documents are either paragraphs (``doc_id = f"{title_slug}-p{i}"``) or whole articles (``doc_id = title_slug``, the
paragraphs of one title joined with ``"\\n\\n"`` and every answer offset shifted by the paragraph's position in the
article). Every answer gives a span ``[answer_start, answer_start + len(text))`` with relevance 1; identical spans are
deduplicated silently (SQuAD dev lists the same answer up to three times), overlapping different spans are merged by
:func:`ragbench.data.dataset.validate_spans` with a counted warning. Each question is judged relevant (1) to the document
holding its paragraph. A question with an empty answer list (SQuAD v2 ``is_impossible``) is unlabelled.

An answer whose text does not sit at its offset is an error naming the file, the JSON path, the question id and both
strings. :func:`parse_squad` with ``repair="nearest"`` instead moves it to the nearest exact occurrence within
:data:`REPAIR_WINDOW` characters and counts a warning (SQuAD v1.1 has a few off-by-one offsets).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import polars as pl

from ragbench.core.bounded_io import MAX_JSON_BYTES, parse_json, read_text
from ragbench.core.errors import DatasetError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.schemas import CORPUS_SCHEMA, QRELS_SCHEMA, QUERY_SCHEMA
from ragbench.data.dataset import Dataset, subset, validate_spans
from ragbench.data.spec import DATASET_FORMATS, DatasetSpec

REPAIR_WINDOW = 50
ANSWERS_SCHEMA = {"query_id": pl.String, "doc_id": pl.String, "start": pl.Int64, "end": pl.Int64,
                  "text": pl.String}
ARTICLE_SEPARATOR = "\n\n"

Repair = Literal["error", "nearest"]


@dataclass(frozen=True)
class SquadParse:
    """Everything read from one SQuAD file, before subsetting.

    ``answers`` keeps one row per distinct (query, start, end) answer occurrence in document coordinates, so that
    ``doc.text[start:end] == text`` can be checked for every answer; ``spans`` are the merged span qrels.
    """

    corpus: pl.DataFrame
    queries: pl.DataFrame
    qrels: pl.DataFrame
    spans: pl.DataFrame
    answers: pl.DataFrame
    warnings: tuple[str, ...]


def title_slug(title: str) -> str:
    """``"Super_Bowl_50"`` -> ``"super-bowl-50"``: lowercase ASCII letters/digits, runs of anything else -> ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def squad_file(spec: DatasetSpec) -> Path:
    """The JSON file a spec points at: the path itself, or ``{split}.json`` inside a folder."""
    path = Path(spec.path)
    if path.is_dir():
        path = path / f"{spec.split}.json"
    if not path.is_file():
        raise DatasetError(f"{path}: SQuAD file not found")
    return path


def load_squad(spec: DatasetSpec, *, repair: Repair = "error") -> Dataset:
    """Load a SQuAD v1.1-format file as a :class:`Dataset` (see the module docstring for the conventions).

    The fingerprint hashes the file's SHA-256 and the spec settings (and ``repair``); ``spec.max_queries`` /
    ``spec.max_docs`` are applied last with :func:`ragbench.data.dataset.subset`.
    """
    path = squad_file(spec)
    parsed = parse_squad(read_squad_json(path), str(path), spec.squad_documents, repair=repair)
    queries, qrels, spans = parsed.queries, parsed.qrels, parsed.spans
    if spec.queries == "in_qrels":
        queries = queries.filter(pl.col("query_id").is_in(qrels["query_id"].unique().implode()))
        spans = spans.filter(pl.col("query_id").is_in(queries["query_id"].implode()))
    if not spec.spans:
        spans = spans.clear()
    fingerprint = stable_hash({"files": {path.name: file_sha256(path)},
                               "spec": spec.model_dump(mode="json", exclude={"name", "path", "holdout"}),
                               "repair": repair})
    ds = Dataset(spec.name or path.stem, parsed.corpus, queries, qrels, spans, fingerprint, parsed.warnings)
    return subset(ds, spec.max_queries, spec.max_docs, spec.seed)


def read_squad_json(path: Path) -> Any:
    """The parsed JSON of a SQuAD file, read with a size limit (:data:`~ragbench.core.bounded_io.MAX_JSON_BYTES`;
    a SQuAD file is often one long line, so lines are not bounded apart from the file); every failure one line."""
    text = read_text(path, MAX_JSON_BYTES, "SQuAD JSON file", DatasetError)
    return parse_json(text, f"{path}:1", DatasetError)


# ---------------------------------------------------------------- parsing with JSON-path errors
def _get(obj: Any, key: str, typ: type | tuple[type, ...], source: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise DatasetError(f"{source}: {where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise DatasetError(f"{source}: {where}: missing key {key!r}")
    value = obj[key]
    # bool is an int in Python; an offset of `true` is a malformed file, not 1
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        want = typ.__name__ if isinstance(typ, type) else "/".join(t.__name__ for t in typ)
        raise DatasetError(f"{source}: {where}.{key}: expected {want}, got {type(value).__name__}")
    return value


def _locate(context: str, text: str, start: int, repair: Repair, source: str, where: str, qid: str,
            warnings: list[str]) -> int:
    """The verified start offset of ``text`` in ``context`` (repaired to the nearest exact occurrence if allowed)."""
    if not text:
        raise DatasetError(f"{source}: {where}: question {qid!r} has an empty answer text")
    found = context[start:start + len(text)] if start >= 0 else None
    if found == text:
        return start
    if repair == "nearest":
        lo, hi = max(0, start - REPAIR_WINDOW), min(len(context), start + REPAIR_WINDOW + len(text))
        hits = [lo + m.start() for m in re.finditer(f"(?={re.escape(text)})", context[lo:hi])
                if abs(lo + m.start() - start) <= REPAIR_WINDOW]
        if hits:
            best = min(hits, key=lambda p: (abs(p - start), p))
            warnings.append(f"{source}: {where}: question {qid!r}: answer {text!r} is not at offset {start} "
                            f"(found {found!r}); moved to the nearest occurrence at {best}")
            return best
    raise DatasetError(
        f"{source}: {where}: question {qid!r}: answer text {text!r} does not match the context at "
        f"answer_start={start} (context has {found!r} there, of length {len(context)})"
        + ("" if repair == "error" else f" and does not occur within ±{REPAIR_WINDOW} characters"))


def parse_squad(data: Any, source: str, documents: Literal["paragraph", "article"] = "paragraph", *,
                repair: Repair = "error") -> SquadParse:
    """Validate and convert parsed SQuAD JSON. ``source`` names the file in errors and warnings.

    Errors name the JSON path (``data[3].paragraphs[1].qas[0]``). ``repair="nearest"`` moves a mismatched answer to
    the nearest exact occurrence within ±:data:`REPAIR_WINDOW` characters (a counted warning); otherwise, and when
    there is no such occurrence, a mismatch is an error.
    """
    if documents not in ("paragraph", "article"):
        raise ValueError(f"documents must be 'paragraph' or 'article', not {documents!r}")
    if repair not in ("error", "nearest"):
        raise ValueError(f"repair must be 'error' or 'nearest', not {repair!r}")
    articles = _get(data, "data", list, source, "top level")
    warnings: list[str] = []
    corpus_rows: list[tuple] = []
    query_rows: list[tuple] = []
    answer_rows: dict[tuple[str, int, int], tuple] = {}  # (qid, start, end) -> row: identical answers deduped
    qrels_rows: dict[tuple[str, str], tuple] = {}
    span_rows: list[tuple] = []
    seen_q: dict[str, str] = {}
    seen_doc: dict[str, str] = {}

    for a, article in enumerate(articles):
        a_where = f"data[{a}]"
        title = _get(article, "title", str, source, a_where)
        slug = title_slug(title) or f"article-{a}"
        paragraphs = _get(article, "paragraphs", list, source, a_where)
        display_title = title.replace("_", " ")
        shift = 0
        contexts = []
        for p, para in enumerate(paragraphs):
            p_where = f"{a_where}.paragraphs[{p}]"
            context = _get(para, "context", str, source, p_where)
            qas = _get(para, "qas", list, source, p_where)
            doc_id = slug if documents == "article" else f"{slug}-p{p}"
            if documents == "paragraph" or p == 0:
                if doc_id in seen_doc:
                    raise DatasetError(f"{source}: {p_where}: document id {doc_id!r} (from title {title!r}) "
                                       f"repeats the one of {seen_doc[doc_id]}; titles must be distinct")
                seen_doc[doc_id] = p_where
            offset = shift if documents == "article" else 0
            contexts.append(context)
            for i, qa in enumerate(qas):
                q_where = f"{p_where}.qas[{i}]"
                qid = str(_get(qa, "id", (str, int), source, q_where))
                question = _get(qa, "question", str, source, q_where)
                answers = _get(qa, "answers", list, source, q_where)
                if qid in seen_q:
                    raise DatasetError(f"{source}: {q_where}: duplicate question id {qid!r} "
                                       f"(first at {seen_q[qid]})")
                seen_q[qid] = q_where
                texts: list[str] = []
                for j, ans in enumerate(answers):
                    an_where = f"{q_where}.answers[{j}]"
                    text = _get(ans, "text", str, source, an_where)
                    start = _get(ans, "answer_start", int, source, an_where)
                    start = _locate(context, text, start, repair, source, an_where, qid, warnings)
                    s, e = offset + start, offset + start + len(text)
                    if text not in texts:
                        texts.append(text)
                    if (qid, s, e) not in answer_rows:
                        answer_rows[(qid, s, e)] = (qid, doc_id, s, e, text)
                        span_rows.append((qid, doc_id, s, e, 1, f"{source}: {an_where}"))
                    qrels_rows.setdefault((qid, doc_id), (qid, doc_id, 1))
                query_rows.append((qid, question, None, texts))
            shift += len(context) + len(ARTICLE_SEPARATOR)
            if documents == "paragraph":
                corpus_rows.append((doc_id, display_title, context, json.dumps({"title": title, "paragraph": p})))
        if documents == "article" and paragraphs:
            corpus_rows.append((slug, display_title, ARTICLE_SEPARATOR.join(contexts),
                                json.dumps({"title": title, "paragraphs": len(contexts)})))

    if not corpus_rows:
        raise DatasetError(f"{source}: no paragraphs")
    corpus = pl.DataFrame(corpus_rows, schema=CORPUS_SCHEMA, orient="row")
    doc_len = dict(zip(corpus["doc_id"], corpus["text"].str.len_chars()))
    spans, span_warnings = validate_spans(span_rows, doc_len, source)
    return SquadParse(
        corpus=corpus,
        queries=pl.DataFrame(query_rows, schema=QUERY_SCHEMA, orient="row"),
        qrels=pl.DataFrame(list(qrels_rows.values()), schema=QRELS_SCHEMA, orient="row"),
        spans=spans.sort(["query_id", "doc_id", "start"]),
        answers=pl.DataFrame(list(answer_rows.values()), schema=ANSWERS_SCHEMA, orient="row"),
        warnings=tuple(warnings + span_warnings))


@DATASET_FORMATS.register
class SquadDataset(DatasetSpec):
    """``format: squad``: one SQuAD v1.1 JSON file (or a folder holding ``<split>.json``), answer offsets as
    evidence spans. Its option ``squad_documents`` stays on :class:`DatasetSpec`, where every format accepts it and
    every dataset fingerprint hashes it."""

    format: Literal["squad"] = "squad"

    @classmethod
    def recognizes(cls, path: Path) -> int:
        return 3 if path.suffix == ".json" else 0

    def load(self, cache_root: Path | None = None) -> Dataset:
        return load_squad(self)
