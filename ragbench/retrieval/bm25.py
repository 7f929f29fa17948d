"""BM25 first stage (bm25s over each chunk's ``index_text``)."""

from __future__ import annotations

import logging
from typing import Literal

import numpy as np
import polars as pl
from pydantic import Field

from ragbench.core.spec import Spec
from ragbench.data.dataset import Dataset
from ragbench.index.qdrant import Hits
from ragbench.retrieval.base import RETRIEVERS, Filters, RetrievalResources, RetrieverSpec, run_from_hits


class BM25Params(Spec):
    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stopwords: str | None = "en"
    stemmer: str | None = "english"


class BM25Index:
    """bm25s over chunk ``index_text``: Lucene-variant BM25 by default, English stopwords, Snowball stemming.

    score(q, d) = sum over query terms t of  idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
    with Lucene's idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)).
    """

    def __init__(self, spec: BM25Params, texts: list[str]):
        import bm25s

        # bm25s sets its own logger to DEBUG when first imported: its "Building index" lines reached Prefect's
        # console handler (through the root logger) once per index
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.spec = spec
        self._stemmer = _stemmer(spec.stemmer)
        tokens = bm25s.tokenize(texts, stopwords=spec.stopwords, stemmer=self._stemmer, show_progress=False)
        self.retriever = bm25s.BM25(k1=spec.k1, b=spec.b, method=spec.method)
        self.retriever.index(tokens, show_progress=False)
        self.n_docs = len(texts)
        self._disk_bytes: int | None = None

    def disk_bytes(self) -> int:
        """Bytes of the index as ``bm25s.BM25.save`` writes it (score matrix, vocabulary, parameters); measured
        once, in a temporary folder."""
        if self._disk_bytes is None:
            import tempfile
            from pathlib import Path

            with tempfile.TemporaryDirectory() as tmp:
                self.retriever.save(tmp)
                self._disk_bytes = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
        return self._disk_bytes

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


def bm25_index(res: RetrievalResources, params: BM25Params) -> BM25Index:
    """The BM25 index of ``res.chunks`` under ``params``, built once per chunker and params."""
    key = params.spec_id if hasattr(params, "spec_id") else repr(params)
    if key not in res.bm25:
        res.bm25[key] = BM25Index(params, res.chunks["index_text"].to_list())
    return res.bm25[key]


def bm25_run(ds: Dataset, res: RetrievalResources, params: BM25Params, depth: int,
             mask: np.ndarray | None) -> pl.DataFrame:
    hits = bm25_index(res, params).search(ds.queries["text"].to_list(), depth, weight_mask=mask)
    return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)


@RETRIEVERS.register
class BM25Retriever(RetrieverSpec, BM25Params):
    kind: Literal["bm25"] = "bm25"

    def first_stage(self, ds: Dataset, res: RetrievalResources, embedder, filters: Filters) -> pl.DataFrame:
        return bm25_run(ds, res, self, self.depth, filters.bm25_mask)

    def describe(self) -> str:
        return f"bm25(k1={self.k1:g},b={self.b:g})"

    def explain_first_stage(self) -> str:
        default = (self.k1, self.b) == (1.2, 0.75)
        return "BM25" + ("" if default else f" k1={self.k1:g} b={self.b:g}")
