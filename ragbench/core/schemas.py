"""The typed tables that flow between stages (polars schemas). One definition each, imported by every stage.

dataset -> chunks -> runs -> per-query measures::

    CORPUS   doc_id, title, text, metadata (JSON string)
    QUERY    query_id, text, query_class, answers
    QRELS    query_id, doc_id, relevance (integer grade; > 0 is relevant)
    SPANS    query_id, doc_id, [start, end) character offsets into the document text, relevance
    CHUNK    chunk_id, doc_id, ordinal, [start, end), text (== doc.text[start:end]), prefix (contextual prefix:
             what is embedded and BM25-indexed is ``prefix + text``, see :func:`index_texts`)
    RUN      query_id, rank (1-based, best first), chunk_id, doc_id, score
    MEASURE  query_id, measure, value (NaN: the query has no relevant label)

Every run is put in :func:`canonical_order` before it is judged or served: one tie rule everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

import polars as pl

CORPUS_SCHEMA = {"doc_id": pl.String, "title": pl.String, "text": pl.String, "metadata": pl.String}
QUERY_SCHEMA = {"query_id": pl.String, "text": pl.String, "query_class": pl.String, "answers": pl.List(pl.String)}
QRELS_SCHEMA = {"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32}
SPANS_SCHEMA = {"query_id": pl.String, "doc_id": pl.String, "start": pl.Int64, "end": pl.Int64,
                "relevance": pl.Int32}
CHUNK_SCHEMA = {"chunk_id": pl.String, "doc_id": pl.String, "ordinal": pl.Int32, "start": pl.Int64,
                "end": pl.Int64, "text": pl.String, "prefix": pl.String}
RUN_SCHEMA = {"query_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String, "doc_id": pl.String,
              "score": pl.Float64}
PER_QUERY_SCHEMA = {"query_id": pl.String, "measure": pl.String, "value": pl.Float64}


#: rows turned into one Arrow table at a time by :func:`frame_from_rows`
FRAME_BATCH_ROWS = 50_000


def frame_from_rows(rows: Iterable[tuple], schema: dict, batch_rows: int = FRAME_BATCH_ROWS) -> pl.DataFrame:
    """The rows as one DataFrame of ``schema``, converted ``batch_rows`` at a time: only one batch of Python tuples
    and strings is alive at once (a million documents as Python objects held ~6 KB each at peak)."""
    rows = iter(rows)
    parts = []
    while batch := list(islice(rows, batch_rows)):
        parts.append(pl.DataFrame(batch, schema=schema, orient="row"))
    if not parts:
        return pl.DataFrame(schema=schema)
    return parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=True)


class PrefixedTexts:
    """A text column whose row i is ``prefix[i] + text[i]``, made a batch at a time and never held whole.

    Each chunk's index text (what is embedded and BM25-indexed) is its contextual prefix (a title, a heading
    breadcrumb, or nothing) plus its text. Materialized, it would hold the corpus text a third time (corpus, chunk
    text, index text: 1.4 GB of the 8.6 GB peak at a million abstracts); the chunk table keeps only the prefixes.
    Slicing (``texts[a:b]``) and :meth:`gather` return polars String Series; ``texts[i]`` returns one string.
    """

    def __init__(self, prefix: pl.Series, text: pl.Series):
        if len(prefix) != len(text):
            raise ValueError(f"{len(prefix)} prefixes for {len(text)} texts")
        self.prefix, self.text = prefix, text

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, rows: slice | int) -> pl.Series | str:
        if isinstance(rows, slice):
            return (self.prefix[rows] + self.text[rows]).alias("index_text")
        return self.prefix[rows] + self.text[rows]

    def __iter__(self) -> Iterator[str]:
        for batch in text_batches(self, FRAME_BATCH_ROWS):
            yield from batch

    def gather(self, rows) -> pl.Series:
        return (self.prefix.gather(rows) + self.text.gather(rows)).alias("index_text")

    def len_chars(self) -> pl.Series:
        """Characters of each row (no string is made)."""
        return self.prefix.str.len_chars() + self.text.str.len_chars()

    def to_list(self) -> list[str]:
        """Every row as a Python list (whole: for callers that need all of them at once)."""
        return list(self)


#: a column of texts as the stages take it: a Python list, a polars String column, or :class:`PrefixedTexts`
TextColumn = Sequence[str] | pl.Series | PrefixedTexts


def index_texts(chunks: pl.DataFrame) -> PrefixedTexts:
    """Each chunk's index text, ``prefix + text``: what is embedded (after the embedder's document prompt) and
    BM25-indexed. Offsets and ``text`` stay those of the document, so span labels judge every chunker alike."""
    return PrefixedTexts(chunks["prefix"], chunks["text"])


def text_batches(texts: TextColumn, size: int) -> Iterator[list[str]]:
    """``texts`` (a list, a polars String column or :class:`PrefixedTexts`) as Python lists of at most ``size``, in
    order: a column is turned into Python strings one batch at a time, never whole."""
    for start in range(0, len(texts), size):
        batch = texts[start:start + size]
        yield batch.to_list() if isinstance(batch, pl.Series) else list(batch)


def texts_at(texts: TextColumn, rows: list[int]) -> list[str]:
    """The texts at ``rows`` as a Python list."""
    return texts.gather(rows).to_list() if isinstance(texts, (pl.Series, PrefixedTexts)) else [texts[i] for i in rows]


def text_lengths(texts: TextColumn) -> list[int]:
    """Characters of each text."""
    if isinstance(texts, PrefixedTexts):
        return texts.len_chars().to_list()
    return texts.str.len_chars().to_list() if isinstance(texts, pl.Series) else [len(t) for t in texts]


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
    # the three checks in one pass (a run of one query is checked on every served query); details only on failure
    lowest, chunk_twice, rank_twice = run.select(
        pl.col("rank").min(), pl.struct("query_id", "chunk_id").is_duplicated().any().alias("chunk_twice"),
        pl.struct("query_id", "rank").is_duplicated().any().alias("rank_twice")).row(0)
    if lowest < 1:
        raise ValueError(f"{what}: ranks are 1-based; found rank {lowest}")
    if chunk_twice:
        dup = run.filter(pl.struct("query_id", "chunk_id").is_duplicated())
        q, c = dup.row(0, named=True)["query_id"], dup.row(0, named=True)["chunk_id"]
        raise ValueError(f"{what}: chunk {c!r} is listed more than once for query {q!r}")
    if rank_twice:
        dup = run.filter(pl.struct("query_id", "rank").is_duplicated())
        raise ValueError(f"{what}: rank {dup['rank'][0]} appears twice for query {dup['query_id'][0]!r}")
    return run


def canonical_order(run: pl.DataFrame, ids: str | Sequence[str] = ("doc_id", "chunk_id"), *,
                    query: str = "query_id") -> pl.DataFrame:
    """The one order of every run before judging or serving: trec_eval 9's, so ragbench and trec_eval agree.

    Within each query (column ``query``), rows are sorted by

    1. ``score`` descending, compared as **32-bit floats** (trec_eval keeps a result's score in a C ``float``:
       two float64 scores that round to the same float32 are a tie there, e.g. ``1.0`` and ``1.0 + 1e-12``);
    2. ties by id **descending** in byte order (``strcmp(b, a)`` in trec_eval's ``comp_sim_docno``): of two
       documents with equal scores ``d2`` ranks above ``d10`` above ``d1``. ``ids`` names the id columns, compared
       one after the other: ``"doc_id"`` for a document run (exactly trec_eval's rule); for a chunk run the default
       ``("doc_id", "chunk_id")``, so tied chunks are ordered as their documents are (the first chunk of each
       document in this order is its document's place in :func:`ragbench.evaluation.judging.document_run`), and
       tied chunks of one document by ``chunk_id`` descending. Id columns absent from ``run`` are skipped (a chunk
       run without ``doc_id`` is ordered by ``chunk_id``).

    The ``rank`` column given is ignored (as trec_eval ignores it) and rewritten as ``1..n``; all other columns
    are kept. ``-0.0`` equals ``0.0``; a NaN or null score ranks below every number. A run without a ``score``
    column has no ties: its own ranks are the order (rewritten as ``1..n``). Ties that straddle a run's depth are
    beyond repair here: the producer already chose which of them made the list (trec_eval has the same limit).
    """
    wanted = [ids] if isinstance(ids, str) else list(ids)
    keys = [c for c in wanted if c in run.columns]
    if not keys or query not in run.columns:
        raise ValueError(f"canonical_order: the run lacks column(s) {wanted if not keys else query!r} "
                         f"(has {', '.join(run.columns)})")
    rank_type = run.schema["rank"] if "rank" in run.columns else pl.Int32
    if "score" in run.columns:
        key = pl.col("score").cast(pl.Float64).cast(pl.Float32)
        key = pl.when(key == 0).then(pl.lit(0.0, pl.Float32)).otherwise(key).fill_nan(None)
        out = run.sort([pl.col(query), key, *keys], descending=[False, True, *[True] * len(keys)], nulls_last=True,
                       maintain_order=True)
    elif "rank" in run.columns:
        out = run.sort([query, "rank"], maintain_order=True)
    else:
        raise ValueError("canonical_order: the run has neither a score nor a rank column")
    return out.with_columns(pl.int_range(1, pl.len() + 1, dtype=rank_type).over(query).alias("rank"))
