"""Questions files: the questions people asked, labelled with documents and quoted evidence that survive re-chunking.

A questions file is CSV (``.csv``, ``.tsv``), JSON Lines (``.jsonl``) or YAML (``.yaml``/``.yml``: a list of
mappings, or ``{questions: [...]}``). Columns (keys):

=============  =======================================================================================
``question``   the question (required, non-empty, no two alike)
``id``         a query id (default: ``q-`` + a hash of the question, stable when rows move)
``doc``        one or more document paths relative to the folder: document-level relevance
``relevance``  a grade for every ``doc`` and quote of the row, or one per ``doc`` (default 1)
``quote``      one or more passages quoted from the documents: located in the converted text -> a span
``answer``     one or more answer strings (answer-in-context and end-to-end accuracy)
``class``      a query class (the per-class breakdown)
``synthetic``  ``true`` for a question an LLM wrote (``ragbench questions generate``); default ``false``
``lexical_overlap``  share of a synthetic question's content words found in its source passage (0 to 1)
=============  =======================================================================================

**Synthetic questions** are never averaged with real ones silently: when a file has any, every question's class
is its origin, ``synthetic`` or ``real`` (``synthetic/<class>`` when the row names a class too), so the per-class
breakdown keeps them apart; :attr:`Labels.notes` counts both and the mean overlap, and a warning says when
synthetic questions reuse most of their passage's words (mean overlap above :data:`HIGH_OVERLAP`).

In CSV several values go in one cell separated by ``|`` (``\\|`` is a literal bar); JSONL and YAML take lists.
A file with a BOM or CRLF line ends reads as any other.

**Quotes.** A quote is looked for in the ``doc`` documents of its row (every document when the row has none) after
normalising both sides the same way: case, runs of whitespace, typographic quotes and dashes, the Markdown marks a
conversion adds (``* _ ` # >`` and link targets); quotation marks around it are dropped, and it must start and end
on word boundaries. It must occur
exactly once: a quote found nowhere is an error showing the closest passage; a quote found twice is an error naming
both places (quote more of the sentence). The span is ``[start, end)`` of the matched text in the document, and its
document becomes relevant (with the row's grade) if ``doc`` did not list it.

A question with no ``doc`` and no ``quote`` is unlabelled: counted, never scored. Every problem of the file is
reported at once, each with its line (:class:`~ragbench.core.errors.DatasetError`).
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from ragbench.core.errors import DatasetError
from ragbench.core.hashing import stable_hash
from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA
from ragbench.data.dataset import validate_spans

COLUMNS = ("id", "question", "doc", "relevance", "quote", "answer", "class", "synthetic", "lexical_overlap")
#: mean lexical overlap of synthetic questions above which they are flagged: most words come from the passage
HIGH_OVERLAP = 0.5
_TRUE, _FALSE = {"true", "1", "yes", "y"}, {"false", "0", "no", "n", ""}
SUFFIXES = (".csv", ".tsv", ".jsonl", ".yaml", ".yml")
#: the template ``ragbench datasets init`` writes, in this column order
TEMPLATE_COLUMNS = ("question", "doc", "quote", "answer", "class")

_TYPOGRAPHIC = {**dict.fromkeys("‘’‚‛′", "'"), **dict.fromkeys("“”„‟″«»", '"'),
                **dict.fromkeys("‐‑‒–—―−", "-"), "…": "...", "\u00ad": ""}
#: Markdown marks a conversion adds and a reader copying from the rendered page does not have
_IGNORED = set("*_`#>")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\n]*)\)")
_SPLIT = re.compile(r"(?<!\\)\|")
_QUOTE_MARKS = "\"'“”„‟‘’‚‛«» \t\n"


# ---------------------------------------------------------------- normalisation
def normalize(text: str, *, markdown: bool = True) -> tuple[str, list[int]]:
    """``(normalised text, offsets)``: ``offsets[i]`` is the index in ``text`` of normalised character ``i``.

    Lowercase, typographic quotes/dashes made plain (a run of dashes is one dash: ``--`` reads as ``—``), whitespace
    runs made one space, and (``markdown``) the marks in :data:`_IGNORED` and the ``(target)`` of Markdown links
    dropped. Leading and trailing whitespace is dropped.
    """
    skip = bytearray(len(text))
    if markdown:
        for m in _LINK.finditer(text):
            for i in range(m.start(), m.start(1)):  # "![" / "["
                skip[i] = 1
            for i in range(m.end(1), m.end()):  # "](target)"
                skip[i] = 1
    out: list[str] = []
    offsets: list[int] = []
    space = True  # drop leading whitespace
    for i, ch in enumerate(text):
        if skip[i] or (markdown and ch in _IGNORED):
            continue
        if ch.isspace():
            if not space:
                out.append(" ")
                offsets.append(i)
                space = True
            continue
        space = False
        for c in _TYPOGRAPHIC.get(ch, ch).lower():
            if c == "-" and out and out[-1] == "-":  # "--" typed, "—" printed: one dash
                continue
            out.append(c)
            offsets.append(i)
    if out and out[-1] == " ":
        out.pop()
        offsets.pop()
    return "".join(out), offsets


def _word_char(c: str) -> bool:
    return c.isalnum()


def find_all(haystack: str, needle: str) -> list[int]:
    """Start positions of ``needle`` in ``haystack`` (overlapping ones too) that begin and end on word boundaries."""
    hits, pos = [], haystack.find(needle)
    while pos >= 0:
        end = pos + len(needle)
        left_ok = pos == 0 or not (_word_char(needle[0]) and _word_char(haystack[pos - 1]))
        right_ok = end == len(haystack) or not (_word_char(needle[-1]) and _word_char(haystack[end]))
        if left_ok and right_ok:
            hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits


# ---------------------------------------------------------------- reading
@dataclass
class Question:
    """One row of a questions file, as read (values not yet checked against the documents)."""

    line: int
    question: str = ""
    id: str | None = None
    docs: list[str] = field(default_factory=list)
    relevance: list[Any] = field(default_factory=list)
    quotes: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    qclass: str | None = None
    synthetic: bool = False
    lexical_overlap: float | None = None


def find_questions_file(root: Path) -> Path | None:
    """``questions.csv`` / ``.tsv`` / ``.jsonl`` / ``.yaml`` / ``.yml`` in ``root`` (the first that exists)."""
    for suffix in SUFFIXES:
        if (root / f"questions{suffix}").is_file():
            return root / f"questions{suffix}"
    return None


def _unknown(col: str) -> str:
    close = difflib.get_close_matches(col, COLUMNS, n=1, cutoff=0.5)
    return (f"unknown column {col!r}" + (f"; did you mean {close[0]!r}?" if close else "")
            + f" (columns: {', '.join(COLUMNS)})")


def _values(v: Any, split: bool) -> list[str]:
    """A cell or value as a list of non-empty strings (CSV cells split on unescaped ``|``)."""
    if v is None:
        return []
    items = v if isinstance(v, list) else [v]
    out = []
    for item in items:
        if item is None:
            continue
        s = str(item)
        parts = _SPLIT.split(s) if split else [s]
        out += [p.replace("\\|", "|").strip() for p in parts if p.strip()]
    return out


def _question(line: int, obj: dict, split: bool, problems: list[str], where: str,
              key_lines: dict[str, int] | None = None) -> Question:
    q = Question(line)
    for key, value in obj.items():
        col = str(key).strip().lower()
        if col not in COLUMNS:
            at = f"{where.rsplit(':', 1)[0]}:{key_lines[str(key)]}" if key_lines and str(key) in key_lines else where
            problems.append(f"{at}: {_unknown(str(key))}")
            continue
        if col == "question":
            q.question = "" if value is None else str(value).strip()
        elif col == "id":
            q.id = str(value).strip() if value not in (None, "") else None
        elif col == "class":
            q.qclass = str(value).strip() if value not in (None, "") else None
        elif col == "relevance":
            q.relevance = _values(value, split)
        elif col == "synthetic":
            flag = str(value).strip().lower() if value is not None else ""
            if flag not in _TRUE | _FALSE:
                problems.append(f"{where}: synthetic {value!r} is not true or false")
            q.synthetic = flag in _TRUE
        elif col == "lexical_overlap":
            if value not in (None, ""):
                try:
                    q.lexical_overlap = float(value)
                    if not 0 <= q.lexical_overlap <= 1:
                        raise ValueError
                except (TypeError, ValueError):
                    problems.append(f"{where}: lexical_overlap {value!r} is not a number from 0 to 1")
        else:
            setattr(q, {"doc": "docs", "quote": "quotes", "answer": "answers"}[col], _values(value, split))
    return q


def _decode(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save the file as UTF-8"
                           ) from None


def _read_csv(path: Path, text: str, problems: list[str]) -> list[Question]:
    first = text.split("\n", 1)[0]
    delimiter = "\t" if path.suffix == ".tsv" or ("\t" in first and "," not in first) else \
        (";" if ";" in first and "," not in first else ",")
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header: list[str] | None = None
    out: list[Question] = []
    last = 0
    for row in reader:
        line, last = last + 1, reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [c.strip().lower() for c in row]
            for c in header:
                if c and c not in COLUMNS:
                    problems.append(f"{path}:{line}: {_unknown(c)}")
            if "question" not in header:
                raise DatasetError(f"{path}:{line}: no 'question' column in the header {row} (columns: "
                                   f"{', '.join(COLUMNS)})")
            continue
        if len(row) > len(header):
            problems.append(f"{path}:{line}: {len(row)} cells but the header has {len(header)} columns (a "
                            "comma inside an unquoted cell?)")
            continue
        obj = {c: v for c, v in zip(header, row) if c in COLUMNS}
        out.append(_question(line, obj, True, problems, f"{path}:{line}"))
    if header is None:
        raise DatasetError(f"{path}: empty questions file (expected a header with a 'question' column)")
    return out


def _read_jsonl(path: Path, text: str, problems: list[str]) -> list[Question]:
    out = []
    for line, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as e:
            problems.append(f"{path}:{line}: malformed JSON ({e.msg} at column {e.colno})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{path}:{line}: expected a JSON object, got {type(obj).__name__}")
            continue
        out.append(_question(line, obj, False, problems, f"{path}:{line}"))
    return out


def _read_yaml(path: Path, text: str, problems: list[str]) -> list[Question]:
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise DatasetError(f"{path}:{mark.line + 1 if mark else 1}: invalid YAML: {getattr(e, 'problem', e)}"
                           ) from None
    items_node = root
    if isinstance(data, dict) and isinstance(data.get("questions"), list):
        items_node = next(v for k, v in root.value if k.value == "questions")
        data = data["questions"]
    if not isinstance(data, list):
        raise DatasetError(f"{path}:1: expected a list of questions (or a 'questions:' list)")
    out = []
    for obj, node in zip(data, items_node.value):
        line = node.start_mark.line + 1
        if not isinstance(obj, dict):
            problems.append(f"{path}:{line}: expected a mapping with a 'question' key, got {type(obj).__name__}")
            continue
        key_lines = {k.value: k.start_mark.line + 1 for k, _ in node.value} \
            if isinstance(node, yaml.MappingNode) else None
        out.append(_question(line, obj, False, problems, f"{path}:{line}", key_lines))
    return out


def read_questions(path: Path) -> tuple[list[Question], list[str]]:
    """The rows of a questions file and the problems found reading them (``file:line: ...``).

    Raises :class:`DatasetError` at once only when the file as a whole cannot be read.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: questions file not found")
    if path.suffix.lower() not in SUFFIXES:
        raise DatasetError(f"{path}: a questions file is {', '.join(SUFFIXES)}, not {path.suffix or 'no suffix'}")
    text = _decode(path)
    problems: list[str] = []
    reader = {".jsonl": _read_jsonl, ".yaml": _read_yaml, ".yml": _read_yaml}.get(path.suffix.lower(), _read_csv)
    return reader(path, text, problems), problems


# ---------------------------------------------------------------- labelling
@dataclass(frozen=True)
class Labels:
    """The tables a questions file gives (:data:`~ragbench.core.schemas.QUERY_SCHEMA`, ``QRELS``, ``SPANS``)."""

    queries: pl.DataFrame
    qrels: pl.DataFrame
    spans: pl.DataFrame
    warnings: tuple[str, ...]
    lines: dict[str, int]  # query id -> line in the questions file
    notes: dict = field(default_factory=dict)  # synthetic_questions, real_questions, synthetic_lexical_overlap


def origin_notes(questions: list[Question]) -> dict:
    """``{synthetic_questions, real_questions, synthetic_lexical_overlap}`` (the mean over the synthetic questions
    that carry an overlap, None when none does); ``{}`` when no question is synthetic."""
    synthetic = [q for q in questions if q.synthetic]
    if not synthetic:
        return {}
    overlaps = [q.lexical_overlap for q in synthetic if q.lexical_overlap is not None]
    return {"synthetic_questions": len(synthetic), "real_questions": len(questions) - len(synthetic),
            "synthetic_lexical_overlap": sum(overlaps) / len(overlaps) if overlaps else None}


def synthetic_warnings(notes: dict) -> list[str]:
    """What a report says about synthetic questions (see :func:`origin_notes`): their overlap with the source when
    above :data:`HIGH_OVERLAP`, and that a dataset mixing them with real questions is split by origin."""
    out = []
    overlap = notes.get("synthetic_lexical_overlap")
    if overlap is not None and overlap > HIGH_OVERLAP:
        out.append(f"synthetic questions share {overlap:.0%} of their words with their source passage: this "
                   "inflates BM25 and hides the vocabulary gap real users have")
    if notes.get("synthetic_questions") and notes.get("real_questions"):
        out.append(f"the questions mix {notes['synthetic_questions']} synthetic and {notes['real_questions']} real "
                   "ones: overall means average both; the per-class breakdown keeps them apart (classes synthetic "
                   "and real)")
    return out


def _norm_doc(path: str) -> str:
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def _snippet(text: str, limit: int = 200) -> str:
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class _Corpus:
    """Documents normalised once, on demand, for locating quotes."""

    def __init__(self, docs: dict[str, str]):
        self.docs = docs
        self._norm: dict[str, tuple[str, list[int]]] = {}
        self._words: dict[str, set[str]] = {}

    def norm(self, doc_id: str) -> tuple[str, list[int]]:
        if doc_id not in self._norm:
            self._norm[doc_id] = normalize(self.docs[doc_id])
        return self._norm[doc_id]

    def words(self, doc_id: str) -> set[str]:
        if doc_id not in self._words:
            self._words[doc_id] = set(re.findall(r"\w+", self.norm(doc_id)[0]))
        return self._words[doc_id]

    def closest(self, quote: str, candidates: list[str]) -> str:
        """The passage of ``candidates`` most like ``quote`` (normalised), as ``doc: "…"``."""
        qwords = set(re.findall(r"\w+", quote))
        ranked = sorted(candidates, key=lambda d: (-len(qwords & self.words(d)), d))[:3]
        best: tuple[int, str, int, int] | None = None
        for d in ranked:
            text, _ = self.norm(d)
            m = difflib.SequenceMatcher(None, text, quote, autojunk=False).find_longest_match(
                0, len(text), 0, len(quote))
            if m.size and (best is None or m.size > best[0]):
                start = max(0, min(m.a - m.b, len(text) - len(quote)))
                best = (m.size, d, start, min(len(text), start + len(quote)))
        if best is None:
            return "no passage shares a word with it"
        _, d, s, e = best
        text, offsets = self.norm(d)
        s, e = max(0, s - 15), min(len(text), e + 15)  # some context, cut at word boundaries
        while s > 0 and text[s - 1] != " ":
            s -= 1
        while e < len(text) and text[e] != " ":
            e += 1
        orig = self.docs[d][offsets[s]: offsets[max(s, e - 1)] + 1]
        return f"closest passage, in {d}: {_snippet(orig)!r}"

    def locate(self, quote: str, candidates: list[str]) -> list[tuple[str, int, int]]:
        """``(doc_id, start, end)`` in original text of each occurrence of normalised ``quote``."""
        out = []
        for d in candidates:
            text, offsets = self.norm(d)
            if quote in text:
                out += [(d, offsets[p], offsets[p + len(quote) - 1] + 1) for p in find_all(text, quote)]
        return out


def locate_quote(quote: str, doc_text: str) -> list[tuple[int, int]]:
    """``[start, end)`` in ``doc_text`` of every occurrence of ``quote``, found as the loader finds quotes
    (normalised both sides, quotation marks around it dropped, word boundaries); one hit = a quote that labels."""
    norm, _ = normalize(quote.strip(_QUOTE_MARKS))
    if not norm:
        return []
    return [(s, e) for _, s, e in _Corpus({"doc": doc_text}).locate(norm, ["doc"])]


def _where_in(doc_text: str, start: int) -> str:
    return f"line {doc_text.count(chr(10), 0, start) + 1}"


def _grades(q: Question, where: str, problems: list[str]) -> list[int] | None:
    grades = []
    for v in q.relevance:
        try:
            g = int(float(v))
            if g != float(v) or g < 0:
                raise ValueError
        except (TypeError, ValueError):
            problems.append(f"{where}: relevance {v!r} is not a whole number >= 0")
            return None
        grades.append(g)
    if len(grades) > 1 and len(grades) != len(q.docs):
        problems.append(f"{where}: {len(grades)} relevance grades for {len(q.docs)} doc(s); give one grade, or "
                        "one per doc")
        return None
    return grades


def label_questions(path: Path, questions: list[Question], docs: dict[str, str],
                    skipped: dict[str, str] | None = None, problems: list[str] | None = None) -> Labels:
    """Check every row against the documents (``doc_id -> converted text``) and build queries, qrels and spans.

    ``skipped`` names documents left out of the folder with the reason (a ``doc`` naming one says why);
    ``problems`` are those found reading the file. Raises :class:`DatasetError` listing every problem, one per line.
    """
    problems = list(problems or [])
    skipped = skipped or {}
    corpus = _Corpus(docs)
    doc_ids = sorted(docs)
    seen_text: dict[str, int] = {}
    seen_id: dict[str, int] = {}
    query_rows, qrels, span_rows, lines = [], {}, [], {}
    by_origin = any(q.synthetic for q in questions)  # then every class says where the question came from
    for q in questions:
        where = f"{path}:{q.line}"
        if not q.question:
            problems.append(f"{where}: empty question")
            continue
        label = f"{where}: question {_snippet(q.question, 60)!r}"
        key = " ".join(q.question.lower().split())
        if key in seen_text:
            problems.append(f"{label}: duplicate of the question on line {seen_text[key]}")
            continue
        seen_text[key] = q.line
        qid = q.id or f"q-{stable_hash(key, length=10)}"
        if qid in seen_id:
            problems.append(f"{label}: duplicate id {qid!r} (first on line {seen_id[qid]})")
            continue
        seen_id[qid] = q.line
        lines[qid] = q.line
        grades = _grades(q, label, problems)
        if grades is None:
            continue
        row_docs, ok = [], True
        for raw in q.docs:
            d = _norm_doc(raw)
            if d in docs:
                row_docs.append(d)
                continue
            ok = False
            if d in skipped:
                problems.append(f"{label}: doc {raw!r} was skipped: {skipped[d]}")
            else:
                close = difflib.get_close_matches(d, doc_ids, n=1, cutoff=0.6) or \
                    [i for i in doc_ids if i.rsplit("/", 1)[-1] == d.rsplit("/", 1)[-1]][:1]
                problems.append(f"{label}: doc {raw!r} is not in the folder"
                                + (f"; did you mean {close[0]!r}?" if close else ""))
        if not ok:
            continue
        grade_of = {d: (grades[i] if len(grades) > 1 else (grades[0] if grades else 1))
                    for i, d in enumerate(row_docs)}
        default = grades[0] if len(grades) == 1 else 1
        for d, g in grade_of.items():
            qrels[(qid, d)] = max(g, qrels.get((qid, d), 0))
        for quote in q.quotes:
            norm, _ = normalize(quote.strip(_QUOTE_MARKS))  # quotation marks around a quote are not part of it
            if not norm:
                problems.append(f"{label}: quote {quote!r} is empty once Markdown marks are dropped")
                continue
            candidates = row_docs or doc_ids
            hits = corpus.locate(norm, candidates)
            scope = ", ".join(row_docs) if row_docs else "any document"
            if not hits:
                problems.append(f"{label}: quote {_snippet(quote, 80)!r} is not in {scope}; "
                                f"{corpus.closest(norm, candidates)}")
                continue
            if len(hits) > 1:
                places = Counter(f"{d} {_where_in(docs[d], s)}" for d, s, _ in hits)
                shown = "; ".join(p + (f" ({n} times)" if n > 1 else "") for p, n in list(places.items())[:3])
                problems.append(f"{label}: quote {_snippet(quote, 80)!r} is ambiguous: found {len(hits)} times "
                                f"({shown}{'; ...' if len(places) > 3 else ''}); quote more of the passage")
                continue
            d, s, e = hits[0]
            g = grade_of.get(d, default)
            qrels[(qid, d)] = max(g, qrels.get((qid, d), 0))
            span_rows.append((qid, d, s, e, max(g, 1), where))
        qclass = q.qclass
        if by_origin:
            origin = "synthetic" if q.synthetic else "real"
            qclass = f"{origin}/{qclass}" if qclass else origin
        query_rows.append((qid, q.question, qclass, q.answers))
    if not query_rows and not problems:
        problems.append(f"{path}: no questions")
    if problems:
        raise DatasetError(f"{len(problems)} problem(s) with the questions in {path}:\n" + "\n".join(problems))
    spans, warnings = validate_spans(span_rows, {d: len(t) for d, t in docs.items()}, str(path))
    notes = origin_notes([q for q in questions if q.question])
    warnings = [*warnings, *(f"{path}: {w}" for w in synthetic_warnings(notes))]
    return Labels(
        queries=pl.DataFrame(query_rows, schema=QUERY_SCHEMA, orient="row"),
        qrels=pl.DataFrame([(q, d, r) for (q, d), r in qrels.items()], schema=QRELS_SCHEMA, orient="row"),
        spans=spans, warnings=tuple(warnings), lines=lines, notes=notes)


# ---------------------------------------------------------------- the template
_SENTENCE = re.compile(r"[A-Z][^.!?\n`|#*_\[\]]{30,160}[.!?](?=\s|$)")


def example_quote(docs: dict[str, str]) -> tuple[str, str] | None:
    """``(doc_id, sentence)``: the first sentence of 6 to 25 words, in doc id order, that occurs exactly once in
    the corpus (a quote that validates), or None."""
    corpus = _Corpus(docs)
    ids = sorted(docs)
    for d in ids:
        for m in _SENTENCE.finditer(docs[d]):
            sentence = " ".join(m.group(0).split())
            if 6 <= len(sentence.split()) <= 25 and len(corpus.locate(normalize(sentence)[0], ids)) == 1:
                return d, sentence
    return None


def write_template(path: Path, docs: dict[str, str], titles: dict[str, str]) -> None:
    """Write a questions file (CSV, JSONL or YAML by suffix) with the columns of :data:`TEMPLATE_COLUMNS` and two
    example rows taken from the documents: one labelled with a document, one with a quote."""
    ids = sorted(docs)
    first = ids[0] if ids else "guides/install.md"
    quoted = example_quote(docs) if docs else None
    qdoc, quote = quoted or (first, "Quote the sentence that answers the question, as it reads in the document.")
    rows = [
        {"question": f"Which page covers {titles.get(first, 'this topic')}?", "doc": first, "quote": "",
         "answer": "", "class": "example"},
        {"question": "Replace me: a question this passage answers", "doc": qdoc, "quote": quote, "answer": "",
         "class": "example"},
    ]
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        text = "".join(json.dumps({k: v for k, v in r.items() if v}, ensure_ascii=False) + "\n" for r in rows)
    elif suffix in (".yaml", ".yml"):
        text = yaml.safe_dump([{k: v for k, v in r.items() if v} for r in rows], sort_keys=False, allow_unicode=True)
    else:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(TEMPLATE_COLUMNS), delimiter="\t" if suffix == ".tsv" else ",",
                                lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        text = buf.getvalue()
    path.write_text(text, encoding="utf-8")
