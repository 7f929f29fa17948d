"""Judging: chunk rankings -> document rankings, so every chunker is scored against the same labels.

**Order.** Every run is first put in :func:`~ragbench.core.schemas.canonical_order`, trec_eval 9's order: score
descending (compared as 32-bit floats), ties by id descending; the producer's ranks are not used.

**Documents.** A document's score is the best score of its chunks (the maximum), its row the first of its chunks
in canonical order (chunk runs break ties by ``doc_id`` then ``chunk_id``, both descending, so that first chunk's
place is already its document's place); later chunks of an already-ranked document are dropped, so a document is never counted twice.
The documents are then put in canonical order by ``doc_id``, ranks ``1..n``. This is what trec_eval computes when it
is given the document run: trec_eval itself refuses a run that names a document twice ("duplicate docs"), so a
chunk run must be reduced to documents first, and the reduction that keeps each document's best evidence is the
maximum.
"""

from __future__ import annotations

import polars as pl

from ragbench.core.schemas import canonical_order

__all__ = ["canonical_order", "document_run", "best_chunk_per_document"]


def best_chunk_per_document(chunk_run: pl.DataFrame, *, query: str = "query_id") -> pl.DataFrame:
    """One row per (query, document): the document's first chunk in canonical order, with ``score`` = the maximum
    score of its chunks, in canonical document order (ties by ``doc_id`` descending), ranks ``1..n``. Every other
    column of that chunk's row is kept (serving keeps ``chunk_id`` and ``text``)."""
    ordered = canonical_order(chunk_run, query=query)
    first = ordered.unique(subset=[query, "doc_id"], keep="first", maintain_order=True)
    if "score" in ordered.columns:
        best = ordered.group_by(query, "doc_id").agg(pl.col("score").max().alias("__best"))
        first = (first.join(best, on=[query, "doc_id"], how="left")
                 .with_columns(pl.col("__best").alias("score")).drop("__best"))
    return canonical_order(first, "doc_id", query=query)


def document_run(chunk_run: pl.DataFrame) -> pl.DataFrame:
    """Map a chunk run to a document run (``query_id, rank, doc_id, score``): each document scored by its best
    chunk, in trec_eval's order (see the module docstring), ranks 1..n per query."""
    return best_chunk_per_document(chunk_run).select("query_id", "rank", "doc_id", "score")
