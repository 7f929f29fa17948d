"""Chunking statistics per strategy: sizes, sentence cuts, split evidence and index size.

Returned keys (all floats, so they log to MLflow as metrics as they are):

* ``chunk_count``; ``chunk_tokens_mean``, ``chunk_tokens_p50``, ``chunk_tokens_p95``, ``chunk_tokens_max``
  (percentiles by numpy's default linear interpolation);
* ``chunks_end_mid_sentence`` / ``chunks_start_mid_sentence``: share of chunks whose end (start) offset is not a
  sentence end (start) of :func:`ragbench.chunking.sentences.sentence_spans` of their document nor the document's end (start,
  whitespace ignored); ``chunks_cut_mid_sentence``: share with either;
* ``spans_split``: share of gold spans (relevance > 0) *split* across chunks — no single chunk contains the span
  whole but at least one chunk overlaps it (the "answer split across boundaries" failure); ``spans_counted`` is the
  denominator (spans of documents that have chunks) and ``spans_uncovered`` counts spans no chunk touches;
* ``index_chars`` (sum of chunk lengths), ``corpus_chars``, ``expansion`` = index_chars / corpus_chars (> 1 with
  overlap, < 1 when chunkers drop whitespace), ``index_tokens`` (sum of ``token_counts``).

With no spans the span entries are NaN, not 0.

:func:`window_statistics` adds, per embedder, what its sequence window hides (the model reads only the first
``window`` tokens of a text and silently drops the rest):

* ``embed_window_tokens``: the window (content tokens, special tokens excluded; NaN when the model reads all);
* ``chunks_over_embed_window``: share of chunks whose embedded text (prompt + prefix + text) is longer;
* ``tokens_never_embedded``: share of all embedded-text tokens beyond the window, ``sum(max(0, n - window)) /
  sum(n)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from ragbench.chunking.sentences import sentence_spans
from ragbench.core.schemas import FRAME_BATCH_ROWS


def chunk_statistics(chunks: pl.DataFrame, token_counts: Mapping[str, int], spans: pl.DataFrame,
                     corpus: pl.DataFrame, shape: Mapping[str, float] | None = None) -> dict[str, float]:
    """Statistics of one chunking of ``corpus`` (see the module docstring for every key and its definition).
    ``shape``: this chunking's :func:`chunk_shape_statistics`, when already computed (they do not depend on the
    tokenizer, so a sweep computes them once per chunker)."""
    if chunks.is_empty():
        raise ValueError("no chunks: the chunker produced nothing for this corpus")
    missing = [c for c in chunks["chunk_id"].to_list() if c not in token_counts]
    if missing:
        raise ValueError(f"token_counts lacks {len(missing)} chunk id(s), e.g. {missing[:3]}")
    tokens = np.array([token_counts[c] for c in chunks["chunk_id"].to_list()], dtype=np.float64)
    return {
        "chunk_count": float(chunks.height),
        "chunk_tokens_mean": float(tokens.mean()),
        "chunk_tokens_p50": float(np.percentile(tokens, 50)),
        "chunk_tokens_p95": float(np.percentile(tokens, 95)),
        "chunk_tokens_max": float(tokens.max()),
        **(shape if shape is not None else chunk_shape_statistics(chunks, spans, corpus)),
        "index_tokens": float(tokens.sum()),
    }


def chunk_shape_statistics(chunks: pl.DataFrame, spans: pl.DataFrame, corpus: pl.DataFrame) -> dict[str, float]:
    """The tokenizer-independent part of :func:`chunk_statistics`: sentence cuts, split and uncovered evidence
    spans, characters indexed against the corpus."""
    unknown = chunks.select("doc_id").unique().join(corpus.select("doc_id"), on="doc_id", how="anti")["doc_id"]
    if len(unknown):
        raise ValueError(f"chunks name {len(unknown)} document(s) absent from the corpus, e.g. "
                         f"{sorted(unknown.to_list())[:3]}")
    end_cut, start_cut = _sentence_cuts(chunks, corpus)
    split, counted, uncovered = _split_spans(chunks, spans)
    index_chars = float((chunks["end"] - chunks["start"]).sum())
    corpus_chars = float(corpus["text"].str.len_chars().sum())
    return {
        "chunks_end_mid_sentence": float(end_cut.mean()),
        "chunks_start_mid_sentence": float(start_cut.mean()),
        "chunks_cut_mid_sentence": float((end_cut | start_cut).mean()),
        "spans_split": split / counted if counted else math.nan,
        "spans_counted": float(counted),
        "spans_uncovered": float(uncovered),
        "index_chars": index_chars,
        "corpus_chars": corpus_chars,
        "expansion": index_chars / corpus_chars if corpus_chars else math.nan,
    }


def _sentence_cuts(chunks: pl.DataFrame, corpus: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per chunk (row order): (end is mid-sentence, start is mid-sentence). A boundary is whole when it is a sentence
    boundary of its document, the document's start or end, or where its surrounding whitespace begins or ends.
    Documents are taken a batch at a time (their texts and boundary sets are never all held at once)."""
    end_cut = np.zeros(chunks.height, dtype=bool)
    start_cut = np.zeros(chunks.height, dtype=bool)
    by_doc = (chunks.select(pl.int_range(pl.len()).alias("row"), "doc_id", "start", "end")
              .group_by("doc_id").agg("row", "start", "end"))
    docs = corpus.select("doc_id", "text").join(by_doc, on="doc_id", how="inner")
    for batch in docs.iter_slices(n_rows=FRAME_BATCH_ROWS):
        for _, text, rows, starts, ends in batch.iter_rows():
            sents = sentence_spans(text)
            body = len(text) - len(text.lstrip()), len(text.rstrip())
            starts_ok = {s for s, _ in sents} | {0, body[0]}
            ends_ok = {e for _, e in sents} | {len(text), body[1]}
            for row, s, e in zip(rows, starts, ends):
                end_cut[row], start_cut[row] = e not in ends_ok, s not in starts_ok
    return end_cut, start_cut


def _split_spans(chunks: pl.DataFrame, spans: pl.DataFrame) -> tuple[int, int, int]:
    """(split spans, spans of chunked documents, spans no chunk overlaps)."""
    ev = (spans.filter((pl.col("relevance") > 0) & pl.col("doc_id").is_in(chunks["doc_id"].unique().implode()))
          .select("doc_id", "start", "end").with_row_index("_span"))
    if ev.is_empty():
        return 0, 0, 0
    pairs = (ev.join(chunks.select("doc_id", pl.col("start").alias("cs"), pl.col("end").alias("ce")), on="doc_id")
             .filter((pl.min_horizontal("end", "ce") - pl.max_horizontal("start", "cs")) > 0)
             .group_by("_span")
             .agg(((pl.col("cs") <= pl.col("start")) & (pl.col("end") <= pl.col("ce"))).any().alias("contained")))
    split = int((~pairs["contained"]).sum())
    return split, ev.height, ev.height - pairs.height


def window_statistics(token_counts: Sequence[int], window: int | None) -> dict[str, float]:
    """What an embedder with a ``window``-token limit never reads of texts of ``token_counts`` tokens (keys in the
    module docstring); a ``window`` of None reads everything."""
    n = np.asarray(token_counts, dtype=np.float64)
    if not n.size:
        raise ValueError("no texts to measure")
    if window is None:
        return {"embed_window_tokens": math.nan, "chunks_over_embed_window": 0.0, "tokens_never_embedded": 0.0}
    total = float(n.sum())
    return {"embed_window_tokens": float(window), "chunks_over_embed_window": float((n > window).mean()),
            "tokens_never_embedded": float(np.clip(n - window, 0, None).sum() / total) if total else 0.0}
