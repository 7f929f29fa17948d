"""Chunkers: documents -> chunks with ``[start, end)`` character offsets into the document text.

Every chunker returns a table with :data:`CHUNK_SCHEMA`. ``text == doc.text[start:end]`` always holds; the
``index_text`` (what is embedded and BM25-indexed) may carry a contextual prefix (title, heading breadcrumb) without
changing the offsets, so span labels judge every chunker on the same footing.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator

import polars as pl

from ragbench.config.sweep import FixedChunker, MarkdownChunker, RecursiveChunker, SentenceChunker, WholeDocChunker
from ragbench.data.dataset import Dataset
from ragbench.core.hashing import stable_hash
from ragbench.embedding.models import load_tokenizer

CHUNK_SCHEMA = {"chunk_id": pl.String, "doc_id": pl.String, "ordinal": pl.Int32, "start": pl.Int64,
                "end": pl.Int64, "text": pl.String, "index_text": pl.String}

Span = tuple[int, int]


# ---------------------------------------------------------------- span producers (one per strategy)
def _trim(text: str, s: int, e: int) -> Span | None:
    """Shrink [s, e) to exclude surrounding whitespace; None when nothing is left."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return (s, e) if s < e else None


def fixed_spans(text: str, size: int, overlap: int, unit: str, tokenizer: str) -> list[Span]:
    """Windows of ``size`` tokens (or characters) advancing by ``size - overlap``; the last window ends the text."""
    if unit == "chars":
        bounds = [(i, i + 1) for i in range(len(text))]
    else:
        bounds = [o for o in load_tokenizer(tokenizer).encode(text, add_special_tokens=False).offsets if o[1] > o[0]]
    if not bounds:
        return []
    spans, step = [], size - overlap
    for i in range(0, len(bounds), step):
        window = bounds[i:i + size]
        span = _trim(text, window[0][0], window[-1][1])
        if span:
            spans.append(span)
        if i + size >= len(bounds):
            break
    return spans


def recursive_spans(text: str, spec: RecursiveChunker) -> list[Span]:
    """LangChain's ``RecursiveCharacterTextSplitter`` (separators tried in order), length in tokens or chars."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if spec.unit == "tokens":
        tok = load_tokenizer(spec.tokenizer)
        length = lambda s: len(tok.encode(s, add_special_tokens=False).ids)  # noqa: E731
    else:
        length = len
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=spec.size, chunk_overlap=spec.overlap, separators=list(spec.separators), length_function=length,
        keep_separator="end", add_start_index=True, strip_whitespace=True)
    spans, cursor = [], 0
    for piece in splitter.split_text(text):
        start = text.find(piece, cursor if text.startswith(piece, cursor) else max(0, cursor - len(piece)))
        if start < 0:
            start = text.find(piece)
        if start < 0:  # cannot happen with strip_whitespace pieces of the same text; refuse a wrong offset
            raise AssertionError(f"splitter returned text not found in the document: {piece[:60]!r}")
        spans.append((start, start + len(piece)))
        cursor = start + 1
    return spans


_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#))")


def sentence_spans(text: str) -> list[Span]:
    """Sentence boundaries: ``.!?`` followed by space and a capital/digit, blank lines, and list/heading lines."""
    spans, s = [], 0
    for m in _SENTENCE_END.finditer(text):
        span = _trim(text, s, m.start())
        if span:
            spans.append(span)
        s = m.end()
    span = _trim(text, s, len(text))
    if span:
        spans.append(span)
    return spans


def sentence_window_spans(text: str, window: int, stride: int) -> list[Span]:
    """Windows of ``window`` consecutive sentences advancing by ``stride`` (``0`` = window)."""
    sents = sentence_spans(text)
    step = stride or window
    out = []
    for i in range(0, len(sents), step):
        group = sents[i:i + window]
        out.append((group[0][0], group[-1][1]))
        if i + window >= len(sents):
            break
    return out


_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, title)`` of each ATX heading outside fenced code blocks."""
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    return [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING.finditer(text)
            if not any(a <= m.start() < b for a, b in fenced)]


def heading_path_at(headings: list[tuple[int, int, str]], offset: int) -> list[str]:
    """The breadcrumb (outermost first) of headings in force at ``offset``."""
    stack: list[tuple[int, str]] = []
    for pos, level, title in headings[:bisect_right([h[0] for h in headings], offset)]:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
    return [t for _, t in stack]


def markdown_spans(text: str, spec: MarkdownChunker) -> list[Span]:
    """One chunk per heading section (heading line included); long sections split recursively."""
    starts = sorted({0} | {h[0] for h in markdown_headings(text)})
    sections = [_trim(text, a, b) for a, b in zip(starts, starts[1:] + [len(text)])]
    out: list[Span] = []
    for sec in filter(None, sections):
        if spec.max_tokens is None:
            out.append(sec)
            continue
        sub = RecursiveChunker(size=spec.max_tokens, overlap=0, tokenizer=spec.tokenizer)
        out.extend((sec[0] + a, sec[0] + b) for a, b in recursive_spans(text[sec[0]:sec[1]], sub))
    return out


def spans_for(spec, text: str) -> list[Span]:
    """Dispatch a chunker spec to its span producer."""
    match spec:
        case WholeDocChunker():
            return [(0, len(text))] if text else []
        case FixedChunker():
            return fixed_spans(text, spec.size, spec.overlap, spec.unit, spec.tokenizer)
        case RecursiveChunker():
            return recursive_spans(text, spec)
        case SentenceChunker():
            return sentence_window_spans(text, spec.window, spec.stride)
        case MarkdownChunker():
            return markdown_spans(text, spec)
    raise TypeError(f"unknown chunker spec {spec!r}")


# ---------------------------------------------------------------- the stage
def contextual_text(prefix: str, title: str, breadcrumb: list[str], text: str) -> str:
    """The text embedded and indexed. ``title``: ``"{title} {text}"`` (the BEIR/MTEB convention for title+body);
    ``breadcrumb``: ``"{title} > {h1} > {h2}\\n{text}"``; ``none``: the chunk text alone."""
    if prefix == "none" or (not title and not breadcrumb):
        return text
    if prefix == "title":
        return f"{title} {text}" if title else text
    trail = " > ".join([t for t in [title, *breadcrumb] if t])
    return f"{trail}\n{text}"


def _rows(ds: Dataset, spec) -> Iterator[tuple]:
    for doc_id, title, text in ds.corpus.select("doc_id", "title", "text").iter_rows():
        headings = markdown_headings(text) if spec.prefix == "breadcrumb" else []
        for ordinal, (s, e) in enumerate(spans_for(spec, text)):
            chunk_text = text[s:e]
            crumb = heading_path_at(headings, s) if headings else []
            yield (stable_hash([doc_id, s, e]), doc_id, ordinal, s, e, chunk_text,
                   contextual_text(spec.prefix, title, crumb, chunk_text))


def chunk_corpus(ds: Dataset, spec) -> pl.DataFrame:
    """Chunk every document of ``ds`` under ``spec``. Chunk ids hash ``(doc_id, start, end)``: the same span cut by
    two strategies is the same chunk."""
    return pl.DataFrame(list(_rows(ds, spec)), schema=CHUNK_SCHEMA, orient="row")
