"""Retrieval stage: queries -> chunk rankings (a *run*), from BM25 (bm25s) or dense search (Qdrant).

A run is a table with :data:`RUN_SCHEMA`: one row per (query, rank), ranks 1-based, best first. Rankings are of
chunks; :mod:`ragbench.evaluation.judging` maps them back to documents and spans.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import polars as pl

from ragbench.config.sweep import BM25Params
from ragbench.index.qdrant import Hits

logging.getLogger("bm25s").setLevel(logging.WARNING)  # its per-index DEBUG lines flood Prefect's console

RUN_SCHEMA = {"query_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String, "doc_id": pl.String,
              "score": pl.Float64}


@dataclass(frozen=True)
class RetrievalResult:
    run: pl.DataFrame
    seconds: float

    @property
    def ms_per_query(self) -> float:
        n = self.run["query_id"].n_unique() or 1
        return 1000 * self.seconds / n


def run_from_hits(query_ids: list[str], chunks: pl.DataFrame, ids: list[np.ndarray],
                  scores: list[np.ndarray]) -> pl.DataFrame:
    """Assemble a run table from per-query chunk row indices and scores (already best-first)."""
    chunk_ids, doc_ids = chunks["chunk_id"].to_numpy(), chunks["doc_id"].to_numpy()
    lengths = np.array([len(i) for i in ids], dtype=np.int64)
    flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
    return pl.DataFrame({
        "query_id": np.repeat(np.array(query_ids, dtype=object), lengths),
        "rank": np.concatenate([np.arange(1, n + 1) for n in lengths]) if len(lengths) else np.zeros(0),
        "chunk_id": chunk_ids[flat] if len(flat) else np.zeros(0, dtype=object),
        "doc_id": doc_ids[flat] if len(flat) else np.zeros(0, dtype=object),
        "score": np.concatenate(scores) if scores else np.zeros(0),
    }, schema=RUN_SCHEMA)


class BM25Index:
    """bm25s over chunk ``index_text``: Lucene-variant BM25 by default, English stopwords, Snowball stemming.

    score(q, d) = sum over query terms t of  idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
    with Lucene's idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)).
    """

    def __init__(self, spec: BM25Params, texts: list[str]):
        import bm25s

        self.spec = spec
        self._stemmer = _stemmer(spec.stemmer)
        tokens = bm25s.tokenize(texts, stopwords=spec.stopwords, stemmer=self._stemmer, show_progress=False)
        self.retriever = bm25s.BM25(k1=spec.k1, b=spec.b, method=spec.method)
        self.retriever.index(tokens, show_progress=False)
        self.n_docs = len(texts)

    def search(self, queries: list[str], depth: int, weight_mask: np.ndarray | None = None) -> Hits:
        """Top ``depth`` chunks per query; hits scoring 0 (no query term matched, or masked out by a metadata
        filter's ``weight_mask``) are dropped, not ranked."""
        import bm25s

        tokens = bm25s.tokenize(queries, stopwords=self.spec.stopwords, stemmer=self._stemmer, show_progress=False)
        k = min(depth, self.n_docs)
        docs, scores = self.retriever.retrieve(tokens, k=k, show_progress=False, weight_mask=weight_mask)
        ids, out_scores = [], []
        for row_ids, row_scores in zip(docs, scores):
            keep = row_scores > 0
            ids.append(np.asarray(row_ids[keep], dtype=np.int64))
            out_scores.append(np.asarray(row_scores[keep], dtype=np.float64))
        return Hits(ids, out_scores)


def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


def timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0
