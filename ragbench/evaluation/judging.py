"""Judging: chunk rankings -> document rankings, so every chunker is scored against the same labels.

A document's rank is the rank of its best (first-ranked) chunk; its score is that chunk's score. Later chunks of
an already-ranked document are dropped, so a document can never be counted twice.
"""

from __future__ import annotations

import polars as pl


def document_run(chunk_run: pl.DataFrame) -> pl.DataFrame:
    """Map a chunk run to a document run (first occurrence wins), re-ranked 1..n per query."""
    return (chunk_run.sort(["query_id", "rank"])
            .unique(subset=["query_id", "doc_id"], keep="first", maintain_order=True)
            .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("query_id").alias("rank"))
            .select("query_id", "rank", "doc_id", "score"))
