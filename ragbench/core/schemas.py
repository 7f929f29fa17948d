"""The typed tables that flow between stages (polars schemas). One definition each, imported by every stage.

dataset -> chunks -> runs -> per-query measures::

    CORPUS   doc_id, title, text, metadata (JSON string)
    QUERY    query_id, text, query_class, answers
    QRELS    query_id, doc_id, relevance (integer grade; > 0 is relevant)
    SPANS    query_id, doc_id, [start, end) character offsets into the document text, relevance
    CHUNK    chunk_id, doc_id, ordinal, [start, end), text (== doc.text[start:end]), index_text (what is embedded)
    RUN      query_id, rank (1-based, best first), chunk_id, doc_id, score
    MEASURE  query_id, measure, value (NaN: the query has no relevant label)
"""

from __future__ import annotations

import polars as pl

CORPUS_SCHEMA = {"doc_id": pl.String, "title": pl.String, "text": pl.String, "metadata": pl.String}
QUERY_SCHEMA = {"query_id": pl.String, "text": pl.String, "query_class": pl.String, "answers": pl.List(pl.String)}
QRELS_SCHEMA = {"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32}
SPANS_SCHEMA = {"query_id": pl.String, "doc_id": pl.String, "start": pl.Int64, "end": pl.Int64,
                "relevance": pl.Int32}
CHUNK_SCHEMA = {"chunk_id": pl.String, "doc_id": pl.String, "ordinal": pl.Int32, "start": pl.Int64,
                "end": pl.Int64, "text": pl.String, "index_text": pl.String}
RUN_SCHEMA = {"query_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String, "doc_id": pl.String,
              "score": pl.Float64}
PER_QUERY_SCHEMA = {"query_id": pl.String, "measure": pl.String, "value": pl.Float64}


def check_run(run: pl.DataFrame, what: str = "run") -> pl.DataFrame:
    """Validate a run table and return it with :data:`RUN_SCHEMA` column types.

    Raises ``ValueError`` naming the problem: missing columns, ranks below 1, a chunk listed twice for a query, or
    two chunks sharing a rank.
    """
    missing = [c for c in RUN_SCHEMA if c not in run.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}; a run needs {list(RUN_SCHEMA)}")
    run = run.select([pl.col(c).cast(t) for c, t in RUN_SCHEMA.items()])
    if run.height == 0:
        return run
    if run["rank"].min() < 1:
        raise ValueError(f"{what}: ranks are 1-based; found rank {run['rank'].min()}")
    dup = run.filter(pl.struct("query_id", "chunk_id").is_duplicated())
    if dup.height:
        q, c = dup.row(0, named=True)["query_id"], dup.row(0, named=True)["chunk_id"]
        raise ValueError(f"{what}: chunk {c!r} is listed more than once for query {q!r}")
    dup = run.filter(pl.struct("query_id", "rank").is_duplicated())
    if dup.height:
        raise ValueError(f"{what}: rank {dup['rank'][0]} appears twice for query {dup['query_id'][0]!r}")
    return run
