"""Labelling read questions against the documents: queries, document qrels and evidence spans.

Each row's ``doc`` paths must name documents of the folder (a skipped one says why it was skipped). Each ``quote``
is looked for in the ``doc`` documents of its row (every document when the row has none) as
:mod:`ragbench.data.quotes` finds quotes; it must occur exactly once: a quote found nowhere is an error showing the
closest passage, a quote found twice an error naming both places (quote more of the sentence). A quote found once
in each of several documents the row lists is evidence in each of them (twice in one of them stays ambiguous).
The span is ``[start, end)`` of the matched text in the document, and its document becomes relevant (with the
row's grade) if ``doc`` did not list it.

A question with no ``doc`` and no ``quote`` is unlabelled: counted, never scored. Every problem of the file is
reported at once, each with its line (:class:`~ragbench.core.errors.DatasetError`).

**Synthetic questions** are never averaged with real ones silently: when a file has any, every question's class
is its origin, ``synthetic`` or ``real`` (``synthetic/<class>`` when the row names a class too), so the per-class
breakdown keeps them apart; :attr:`Labels.notes` counts both and the mean overlap, and a warning says when
synthetic questions reuse most of their passage's words (mean overlap above :data:`HIGH_OVERLAP`).
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ragbench.core.errors import DatasetError
from ragbench.core.hashing import stable_hash
from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA
from ragbench.data.dataset import validate_spans
from ragbench.data.questions import Question
from ragbench.data.quotes import QUOTE_MARKS, QuoteCorpus, normalize, snippet, where_in

#: mean lexical overlap of synthetic questions above which they are flagged: most words come from the passage
HIGH_OVERLAP = 0.5


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


@dataclass
class _Labelling:
    """What labelling has gathered so far, row by row."""

    path: Path
    docs: dict[str, str]
    skipped: dict[str, str]
    problems: list[str]
    dropped: dict[str, str] = field(default_factory=dict)  # doc id -> boilerplate left out of its text
    corpus: QuoteCorpus = field(init=False)
    doc_ids: list[str] = field(init=False)
    seen_text: dict[str, int] = field(default_factory=dict)
    seen_id: dict[str, int] = field(default_factory=dict)
    qrels: dict[tuple[str, str], int] = field(default_factory=dict)
    span_rows: list[tuple] = field(default_factory=list)
    query_rows: list[tuple] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self.corpus = QuoteCorpus(self.docs)
        self.dropped_corpus = QuoteCorpus(self.dropped)
        self.doc_ids = sorted(self.docs)

    def judge(self, qid: str, doc: str, grade: int) -> None:
        self.qrels[(qid, doc)] = max(grade, self.qrels.get((qid, doc), 0))


def _identity(q: Question, state: _Labelling) -> tuple[str, str] | None:
    """``(query id, label for messages)`` of a row, or None (a problem recorded) when it is empty or a repeat."""
    where = f"{state.path}:{q.line}"
    if not q.question:
        state.problems.append(f"{where}: empty question")
        return None
    label = f"{where}: question {snippet(q.question, 60)!r}"
    key = " ".join(q.question.lower().split())
    if key in state.seen_text:
        state.problems.append(f"{label}: duplicate of the question on line {state.seen_text[key]}")
        return None
    state.seen_text[key] = q.line
    qid = q.id or f"q-{stable_hash(key, length=10)}"
    if qid in state.seen_id:
        state.problems.append(f"{label}: duplicate id {qid!r} (first on line {state.seen_id[qid]})")
        return None
    state.seen_id[qid] = q.line
    state.lines[qid] = q.line
    return qid, label


def _row_docs(q: Question, label: str, state: _Labelling) -> list[str] | None:
    """The row's ``doc`` paths as doc ids, or None (problems recorded) when one is not a document of the folder."""
    row_docs, ok = [], True
    for raw in q.docs:
        # a doc id as written first: a printable non-UTF-8 name holds backslashes (caf\xff.md) that are no separators
        d = raw.strip() if raw.strip() in state.docs else _norm_doc(raw)
        if d in state.docs:
            row_docs.append(d)
            continue
        ok = False
        if d in state.skipped:
            state.problems.append(f"{label}: doc {raw!r} was skipped: {state.skipped[d]}")
        else:
            close = difflib.get_close_matches(d, state.doc_ids, n=1, cutoff=0.6) or \
                [i for i in state.doc_ids if i.rsplit("/", 1)[-1] == d.rsplit("/", 1)[-1]][:1]
            state.problems.append(f"{label}: doc {raw!r} is not in the folder"
                                  + (f"; did you mean {close[0]!r}?" if close else ""))
    return row_docs if ok else None


def _quote_span(quote: str, row_docs: list[str], label: str, state: _Labelling) -> list[tuple[str, int, int]] | None:
    """``(doc_id, start, end)`` of the places ``quote`` labels, or None (a problem recorded): the one place it occurs,
    or, when the row lists documents, the one place in each listed document it occurs in (evidence in either place;
    twice in one document is ambiguous)."""
    norm, _ = normalize(quote.strip(QUOTE_MARKS))  # quotation marks around a quote are not part of it
    if not norm:
        state.problems.append(f"{label}: quote {quote!r} is empty once Markdown marks are dropped")
        return None
    candidates = row_docs or state.doc_ids
    hits = state.corpus.locate(norm, candidates)
    scope = ", ".join(row_docs) if row_docs else "any document"
    if not hits:
        in_dropped = [d for d in candidates if d in state.dropped and state.dropped_corpus.locate(norm, [d])]
        if in_dropped:
            state.problems.append(f"{label}: quote {snippet(quote, 80)!r} is only in boilerplate dropped at "
                                  f"conversion ({', '.join(in_dropped[:3])}); quote the page's own text, or keep "
                                  "everything with the dataset option convert: false")
            return None
        state.problems.append(f"{label}: quote {snippet(quote, 80)!r} is not in {scope}; "
                              f"{state.corpus.closest(norm, candidates)}")
        return None
    per_doc = Counter(d for d, _, _ in hits)
    # once in each listed document is evidence in each; twice in one document is ambiguous
    if len(hits) > 1 and (not row_docs or max(per_doc.values()) > 1):
        places = Counter(f"{d} {where_in(state.docs[d], s)}" for d, s, _ in hits)
        shown = "; ".join(p + (f" ({n} times)" if n > 1 else "") for p, n in list(places.items())[:3])
        state.problems.append(f"{label}: quote {snippet(quote, 80)!r} is ambiguous: found {len(hits)} times "
                              f"({shown}{'; ...' if len(places) > 3 else ''}); quote more of the passage")
        return None
    return hits


def _label_row(q: Question, by_origin: bool, state: _Labelling) -> None:
    """Judge one row's documents and quotes and add its query (problems recorded instead when it has any)."""
    identity = _identity(q, state)
    if identity is None:
        return
    qid, label = identity
    grades = _grades(q, label, state.problems)
    if grades is None:
        return
    row_docs = _row_docs(q, label, state)
    if row_docs is None:
        return
    grade_of = {d: (grades[i] if len(grades) > 1 else (grades[0] if grades else 1)) for i, d in enumerate(row_docs)}
    default = grades[0] if len(grades) == 1 else 1
    for d, g in grade_of.items():
        state.judge(qid, d, g)
    for quote in q.quotes:
        for d, s, e in _quote_span(quote, row_docs, label, state) or ():
            g = grade_of.get(d, default)
            state.judge(qid, d, g)
            state.span_rows.append((qid, d, s, e, max(g, 1), f"{state.path}:{q.line}"))
    qclass = q.qclass
    if by_origin:
        origin = "synthetic" if q.synthetic else "real"
        qclass = f"{origin}/{qclass}" if qclass else origin
    state.query_rows.append((qid, q.question, qclass, q.answers))


def label_questions(path: Path, questions: list[Question], docs: dict[str, str],
                    skipped: dict[str, str] | None = None, problems: list[str] | None = None, *,
                    dropped: dict[str, str] | None = None) -> Labels:
    """Check every row against the documents (``doc_id -> converted text``) and build queries, qrels and spans.

    ``skipped`` names documents left out of the folder with the reason (a ``doc`` naming one says why);
    ``problems`` are those found reading the file; ``dropped`` holds the boilerplate left out of a document's text
    (a quote found only there is reported as such). Raises :class:`DatasetError` listing every problem, one per line.
    """
    state = _Labelling(path, docs, skipped or {}, list(problems or []), dict(dropped or {}))
    by_origin = any(q.synthetic for q in questions)  # then every class says where the question came from
    for q in questions:
        _label_row(q, by_origin, state)
    if not state.query_rows and not state.problems:
        state.problems.append(f"{path}: no questions")
    if state.problems:
        raise DatasetError(f"{len(state.problems)} problem(s) with the questions in {path}:\n"
                           + "\n".join(state.problems))
    spans, warnings = validate_spans(state.span_rows, {d: len(t) for d, t in docs.items()}, str(path))
    notes = origin_notes([q for q in questions if q.question])
    warnings = [*warnings, *(f"{path}: {w}" for w in synthetic_warnings(notes))]
    return Labels(
        queries=pl.DataFrame(state.query_rows, schema=QUERY_SCHEMA, orient="row"),
        qrels=pl.DataFrame([(q, d, r) for (q, d), r in state.qrels.items()], schema=QRELS_SCHEMA, orient="row"),
        spans=spans, warnings=tuple(warnings), lines=state.lines, notes=notes)
