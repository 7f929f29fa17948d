"""Chunkers: documents -> chunks with ``[start, end)`` character offsets into the document text.

Every chunker is a spec registered in :data:`CHUNKERS` (one module per strategy in this package) whose
:meth:`ChunkerSpec.spans` cuts one document's text. :func:`chunk_corpus` turns those spans into a table with
:data:`~ragbench.core.schemas.CHUNK_SCHEMA`. ``text == doc.text[start:end]`` always holds; the index text (what
is embedded and BM25-indexed, ``prefix + text``) may carry a contextual prefix (title, heading breadcrumb) without
changing the offsets, so span labels judge every chunker on the same footing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import polars as pl
from pydantic import Field, model_validator

from ragbench.chunking.doc_spans import DocumentSpans
from ragbench.chunking.headings import heading_path_at, markdown_headings, trail_after_title
from ragbench.core.hashing import stable_hash
from ragbench.core.registry import Registry
from ragbench.core.schemas import CHUNK_SCHEMA, frame_from_rows
from ragbench.core.spec import Spec
from ragbench.data.dataset import Dataset

Span = tuple[int, int]
PrefixMode = Literal["none", "title", "breadcrumb"]
DEFAULT_TOKENIZER = "all-MiniLM-L6-v2"
#: behaviour version of each contextual prefix (1 when absent); breadcrumb 2: a first heading equal to the title is
#: left out of the trail
PREFIX_VERSIONS: dict[str, int] = {"breadcrumb": 2}


class ChunkerSpec(Spec):
    """Base of every chunker spec. Subclasses set ``kind`` (a ``Literal`` with a default), implement
    :meth:`spans`, and register with ``@CHUNKERS.register``."""

    kind: str
    name: str | None = None
    prefix: PrefixMode = Field(
        "title", description="text prepended to each chunk for embedding and BM25 (offsets unchanged): none, the "
        "document title, or title plus heading breadcrumb")

    @property
    def behaviour_version(self) -> int:
        """The class's version plus that of the contextual prefix in use beyond its first (:data:`PREFIX_VERSIONS`):
        a change to the prefix re-evaluates the chunkers that write it and no other."""
        return type(self).version + PREFIX_VERSIONS.get(self.prefix, 1) - 1

    def spans(self, text: str) -> list[Span]:
        """The ``[start, end)`` spans of one document's chunks, in document order."""
        raise NotImplementedError

    def describe(self) -> str:
        """The automatic label (used when ``name`` is not set). Part of config names, which are stored: keep it."""
        return self.kind

    def explain(self) -> str:
        """What the chunker does in words, for people (``recursive 128 tok, overlap 0``); subclasses override
        :meth:`explain_cut`. Display only: never part of an id or a stored name."""
        extra = {"title": "", "breadcrumb": ", breadcrumb", "none": ", no title"}.get(self.prefix, "")
        return self.explain_cut() + extra

    def explain_cut(self) -> str:
        """How the text is cut, in words (default: :meth:`describe`)."""
        return self.describe()

    @property
    def label(self) -> str:
        return self.name or self.describe()

    @property
    def tokenizer_name(self) -> str | None:
        """The tokenizer this chunker measures lengths with (checked offline before a sweep), if any."""
        return None

    def tracking_params(self) -> dict[str, Any]:
        """The chunk length in the one vocabulary of MLflow's runs table: ``chunk_size``, ``chunk_unit`` (tokens,
        chars, sentences) and ``chunk_overlap`` in that unit; None where the chunker has no such notion (default:
        all None). Display and search only, never part of an id."""
        return {"chunk_size": None, "chunk_unit": None, "chunk_overlap": None}


class SizedChunkerSpec(ChunkerSpec):
    """A chunker that cuts to a length of ``size`` tokens (of ``tokenizer``) or characters, with ``overlap``."""

    unit: Literal["tokens", "chars"] = "tokens"
    size: int = Field(..., gt=0)
    overlap: int = Field(0, ge=0)
    tokenizer: str = Field(DEFAULT_TOKENIZER, description="tokenizer that counts tokens (an embedder name)")

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self

    def describe(self) -> str:
        return f"{self.kind}{self.size}{'t' if self.unit == 'tokens' else 'c'}o{self.overlap}"

    def explain_cut(self) -> str:
        return f"{self.kind} {self.size} {'tok' if self.unit == 'tokens' else 'chars'}, overlap {self.overlap}"

    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer if self.unit == "tokens" else None

    def tracking_params(self) -> dict[str, Any]:
        return {"chunk_size": self.size, "chunk_unit": self.unit, "chunk_overlap": self.overlap}


CHUNKERS: Registry[ChunkerSpec] = Registry("chunker", ChunkerSpec)


def chunker_label(spec: ChunkerSpec) -> str:
    return spec.label


def trim(text: str, s: int, e: int) -> Span | None:
    """Shrink [s, e) to exclude surrounding whitespace; None when nothing is left."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return (s, e) if s < e else None


def unit_windows(units: list[Span], size: int, step: int) -> list[Span]:
    """Windows of ``size`` consecutive units (tokens, characters, sentences) advancing by ``step``, each from its
    first unit's start to its last unit's end; the last window ends at the last unit."""
    out = []
    for i in range(0, len(units), step):
        out.append((units[i][0], units[min(i + size, len(units)) - 1][1]))
        if i + size >= len(units):
            break
    return out


def spans_for(spec: ChunkerSpec, text: str) -> list[Span]:
    """The spans ``spec`` cuts ``text`` into."""
    return spec.spans(text)


# ---------------------------------------------------------------- the stage
def contextual_prefix(prefix: PrefixMode, title: str, breadcrumb: list[str]) -> str:
    """What goes before a chunk's text for embedding and BM25. ``title``: ``"{title} "`` (the BEIR/MTEB convention
    for title + body); ``breadcrumb``: ``"{title} > {h1} > {h2}\\n"``, a first heading equal to the title left out
    (:func:`~ragbench.chunking.headings.trail_after_title`); ``none`` (or nothing to say): ``""``."""
    breadcrumb = trail_after_title(title, breadcrumb)
    if prefix == "none" or (not title and not breadcrumb):
        return ""
    if prefix == "title":
        return f"{title} " if title else ""
    return " > ".join([t for t in [title, *breadcrumb] if t]) + "\n"


def contextual_text(prefix: PrefixMode, title: str, breadcrumb: list[str], text: str) -> str:
    """The text embedded and indexed: :func:`contextual_prefix` + ``text``."""
    return contextual_prefix(prefix, title, breadcrumb) + text


def document_spans(spec: ChunkerSpec, title: str, text: str) -> list[tuple[int, int, str]]:
    """``(start, end, prefix)`` of one document's chunks under ``spec``, in document order."""
    headings = markdown_headings(text) if spec.prefix == "breadcrumb" else []
    return [(s, e, contextual_prefix(spec.prefix, title, heading_path_at(headings, s) if headings else []))
            for s, e in spec.spans(text)]


def _rows(ds: Dataset, spans_of: Callable[[str, str, str], list[tuple[int, int, str]]]) -> Iterator[tuple]:
    for row, (doc_id, title, text) in enumerate(ds.corpus.select("doc_id", "title", "text").iter_rows()):
        for ordinal, (s, e, prefix) in enumerate(spans_of(doc_id, title, text)):
            yield stable_hash([doc_id, s, e]), doc_id, ordinal, s, e, prefix, row


_SPAN_SCHEMA = {k: v for k, v in CHUNK_SCHEMA.items() if k != "text"} | {"doc_row": pl.Int64}
#: corpora up to this many documents (folders, small sets) are chunked incrementally by :func:`chunk_corpus_incremental`
INCREMENTAL_MAX_DOCS = 20_000


def chunk_corpus(ds: Dataset, spec: ChunkerSpec) -> pl.DataFrame:
    """Chunk every document of ``ds`` under ``spec``. Chunk ids hash ``(doc_id, start, end)``: the same span cut by
    two strategies is the same chunk. The chunker gives spans; the texts are cut from the corpus column at once."""
    return _chunk_table(ds, lambda doc_id, title, text: document_spans(spec, title, text))


def chunk_corpus_incremental(ds: Dataset, spec: ChunkerSpec, folder: Path) -> tuple[pl.DataFrame, tuple[str, ...]]:
    """:func:`chunk_corpus` that cuts only new or changed documents: each document's spans are kept under ``folder``
    keyed by the document (id, title, text) and the chunker (spec and behaviour version), see
    :mod:`ragbench.chunking.doc_spans`. Returns the chunk table (equal to :func:`chunk_corpus`'s) and the ids of
    the documents cut in this call. A corpus of more than :data:`INCREMENTAL_MAX_DOCS` documents is chunked from
    scratch (every id returned), keeping nothing."""
    if ds.corpus.height > INCREMENTAL_MAX_DOCS:
        return chunk_corpus(ds, spec), tuple(ds.corpus["doc_id"].to_list())
    kept = DocumentSpans(folder, spec, lambda title, text: document_spans(spec, title, text))
    chunks = _chunk_table(ds, kept.spans_of)
    kept.save()
    return chunks, tuple(kept.rechunked)


def _chunk_table(ds: Dataset, spans_of: Callable[[str, str, str], list[tuple[int, int, str]]]) -> pl.DataFrame:
    spans = frame_from_rows(_rows(ds, spans_of), _SPAN_SCHEMA)
    text = _whole_document_text(spans, ds.corpus, spans["doc_row"])
    if text is None:  # cut chunks: their own strings, sliced by character offsets
        text = (pl.DataFrame({"t": ds.corpus["text"].gather(spans["doc_row"]), "s": spans["start"], "e": spans["end"]})
                .select(pl.col("t").str.slice(pl.col("s"), pl.col("e") - pl.col("s")))["t"])
    return spans.with_columns(text.alias("text")).select(list(CHUNK_SCHEMA))


def _whole_document_text(chunks: pl.DataFrame, corpus: pl.DataFrame, doc_rows: pl.Series) -> pl.Series | None:
    """The corpus text of each chunk's document (``doc_rows``), sharing the corpus' buffers, when every chunk spans
    its whole document (``whole``, or no document long enough to cut); else None."""
    doc_text = corpus["text"].gather(doc_rows)
    whole = ((chunks["start"] == 0) & (chunks["end"] == doc_text.str.len_chars())).all()
    return doc_text if whole else None


def share_corpus_text(chunks: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """``chunks`` with its ``text`` column taken from ``corpus`` without a copy when every chunk is a whole
    document: a gather of a polars string column shares the corpus' buffers, so a million abstracts are held once,
    not twice (1.3 GB). Chunks read from the cache otherwise carry their own copy. Other tables are returned as
    they are."""
    if chunks.height == 0:
        return chunks
    rows = chunks.select("doc_id").join(corpus.select("doc_id").with_row_index("doc_row"), on="doc_id",
                                         how="left", maintain_order="left")["doc_row"]
    text = None if rows.null_count() else _whole_document_text(chunks, corpus, rows)
    return chunks if text is None else chunks.with_columns(text.alias("text"))
