"""Small-to-big: search small chunks, return their enclosing parent span, deduplicated.

A parent is a ``[start, end)`` span of the chunk's document that contains the chunk:

* ``mode="section"``: the markdown section (ATX headings outside code fences, via
  :func:`ragbench.chunking.base.markdown_headings`) that contains the chunk's start, extended to the end of the section
  that contains its last character when the chunk crosses a heading. ``max_level`` picks which headings cut
  sections (2: ``#`` and ``##`` start sections, ``###`` stays inside). A document without headings is one section.
  Sections are trimmed of surrounding whitespace, like markdown chunks.
* ``mode="window"``: a fixed window of ``window_chars`` characters, clipped to the document, either on a fixed grid
  (``align="grid"``: windows ``[i*W, (i+1)*W)``, extended to cover a chunk that crosses a grid line, so
  neighbouring chunks share a parent) or centred on the chunk (``align="center"``, shifted inwards at the document
  edges). A chunk longer than the window is its own parent.

Parent ids follow the chunk-id convention, ``stable_hash([doc_id, start, end])``: a parent with the same span as a
chunk has the same id, and :func:`parent_chunks` gives a table in ``CHUNK_SCHEMA`` shape that span judging accepts.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Literal

import polars as pl
from pydantic import Field

from ragbench.chunking.headings import markdown_headings
from ragbench.core.hashing import stable_hash
from ragbench.core.schemas import CHUNK_SCHEMA, RUN_SCHEMA, check_run
from ragbench.core.spec import Spec


class ParentsSpec(Spec):
    """Small-to-big: search small chunks, return their enclosing parent (markdown section or a fixed window)."""

    mode: Literal["section", "window"] = "section"
    window_chars: int = Field(2000, gt=0)
    max_level: int = Field(6, ge=1, le=6)
    align: Literal["grid", "center"] = "grid"


PARENT_SCHEMA = {"chunk_id": pl.String, "parent_id": pl.String, "doc_id": pl.String, "parent_start": pl.Int64,
                 "parent_end": pl.Int64, "parent_text": pl.String}


def _trim(text: str, s: int, e: int) -> tuple[int, int]:
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return s, e


def _section_bounds(text: str, max_level: int) -> list[int]:
    """Section start offsets (0 and every heading of level <= max_level), ascending; sentinel len(text) last."""
    starts = sorted({0} | {pos for pos, level, _ in markdown_headings(text) if level <= max_level})
    return starts + [len(text)]


def section_span(text: str, start: int, end: int, bounds: list[int]) -> tuple[int, int]:
    """The union of the sections containing offsets ``start`` and ``end - 1``, trimmed, always enclosing the chunk."""
    i = bisect_right(bounds, start) - 1
    j = bisect_right(bounds, max(start, end - 1)) - 1
    s, e = _trim(text, bounds[i], bounds[min(j + 1, len(bounds) - 1)])
    return min(s, start), max(e, end)


def window_span(n: int, start: int, end: int, window: int, align: str) -> tuple[int, int]:
    """A ``window``-character parent of ``[start, end)`` in a document of length ``n``."""
    if end - start >= window:
        return start, end
    if align == "grid":
        s = (start // window) * window
        e = max(min(s + window, n), end)
        return s, e
    centre = (start + end) // 2
    s = max(0, min(centre - window // 2, n - window))
    return s, min(s + window, n)


def parent_spans(chunks: pl.DataFrame, corpus: pl.DataFrame, mode: str = "section", window_chars: int = 2000,
                 max_level: int = 6, align: str = "grid") -> pl.DataFrame:
    """Map each chunk to its parent span (see the module docstring).

    Parameters
    ----------
    chunks
        A chunk table (``CHUNK_SCHEMA``: needs ``chunk_id, doc_id, start, end``).
    corpus
        The dataset corpus (``doc_id, text``).
    mode
        ``"section"`` or ``"window"``.
    window_chars, align
        Window size and placement (``"grid"`` or ``"center"``) for ``mode="window"``.
    max_level
        Deepest heading level that starts a section for ``mode="section"`` (1..6).

    Returns
    -------
    One row per chunk with :data:`PARENT_SCHEMA`: ``chunk_id, parent_id, doc_id, parent_start, parent_end,
    parent_text`` where ``parent_text == doc.text[parent_start:parent_end]``.
    """
    if mode not in ("section", "window"):
        raise ValueError(f"parent_spans: mode must be 'section' or 'window', got {mode!r}")
    if mode == "window" and window_chars <= 0:
        raise ValueError(f"parent_spans: window_chars must be positive, got {window_chars}")
    if align not in ("grid", "center"):
        raise ValueError(f"parent_spans: align must be 'grid' or 'center', got {align!r}")
    if not 1 <= max_level <= 6:
        raise ValueError(f"parent_spans: max_level must be 1..6, got {max_level}")
    texts = dict(zip(corpus["doc_id"].to_list(), corpus["text"].to_list()))
    unknown = set(chunks["doc_id"].to_list()) - set(texts)
    if unknown:
        raise ValueError(f"parent_spans: chunks of documents not in the corpus: {sorted(unknown)[:5]}")
    bounds: dict[str, list[int]] = {}
    rows = []
    for chunk_id, doc_id, start, end in chunks.select("chunk_id", "doc_id", "start", "end").iter_rows():
        text = texts[doc_id]
        if not 0 <= start < end <= len(text):
            raise ValueError(f"parent_spans: chunk {chunk_id} [{start}, {end}) lies outside document {doc_id!r} "
                             f"of length {len(text)}")
        if mode == "section":
            if doc_id not in bounds:
                bounds[doc_id] = _section_bounds(text, max_level)
            s, e = section_span(text, start, end, bounds[doc_id])
        else:
            s, e = window_span(len(text), start, end, window_chars, align)
        rows.append((chunk_id, stable_hash([doc_id, s, e]), doc_id, s, e, text[s:e]))
    return pl.DataFrame(rows, schema=PARENT_SCHEMA, orient="row")


def parent_chunks(parents: pl.DataFrame) -> pl.DataFrame:
    """The distinct parents as a chunk table (``CHUNK_SCHEMA``; ``chunk_id := parent_id``, no prefix,
    ``ordinal`` = position by start within the document), for span judging of a small-to-big run."""
    uniq = (parents.select("parent_id", "doc_id", "parent_start", "parent_end", "parent_text")
            .unique(subset="parent_id").sort("doc_id", "parent_start", "parent_end"))
    return uniq.select(
        pl.col("parent_id").alias("chunk_id"), "doc_id",
        pl.int_range(0, pl.len(), dtype=pl.Int32).over("doc_id").alias("ordinal"),
        pl.col("parent_start").alias("start"), pl.col("parent_end").alias("end"),
        pl.col("parent_text").alias("text"), pl.lit("").alias("prefix"),
    ).cast(CHUNK_SCHEMA)


def small_to_big(run: pl.DataFrame, parents: pl.DataFrame) -> pl.DataFrame:
    """Replace each chunk of ``run`` by its parent, keep each parent's first (best) occurrence, re-rank 1..n.

    The parent inherits the score of its best child. ``chunk_id`` of the output is the ``parent_id``, so the run
    judges against :func:`parent_chunks`. Every chunk of the run must have a parent row.
    """
    run = check_run(run, "small_to_big")
    mapped = run.join(parents.select("chunk_id", "parent_id"), on="chunk_id", how="left")
    lost = mapped.filter(pl.col("parent_id").is_null())
    if lost.height:
        raise ValueError(f"small_to_big: {lost.height} run rows have no parent (e.g. chunk "
                         f"{lost['chunk_id'][0]!r}); build parents from the same chunk table")
    out = (mapped.sort("query_id", "rank")
           .unique(subset=["query_id", "parent_id"], keep="first", maintain_order=True)
           .with_columns(pl.col("parent_id").alias("chunk_id"),
                         pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("query_id").alias("rank")))
    return out.select([pl.col(c).cast(t) for c, t in RUN_SCHEMA.items()])
