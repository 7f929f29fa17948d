"""BM25 first stage (bm25s over each chunk's index text, ``prefix + text``)."""

from __future__ import annotations

import itertools
import logging
from collections import deque
from typing import Any, Literal

import numpy as np
import polars as pl
from pydantic import Field

from ragbench.core.schemas import TextColumn, index_texts, text_batches
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
    """bm25s over each chunk's index text (``prefix + text``): Lucene-variant BM25 by default, English stopwords,
    Snowball stemming.

    score(q, d) = sum over query terms t of  idf(t) * tf(t,d) * (k1 + 1) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))
    with Lucene's idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)).
    """

    def __init__(self, spec: BM25Params, texts: TextColumn):
        import bm25s

        # bm25s sets its own logger to DEBUG when first imported: its "Building index" lines reached Prefect's
        # console handler (through the root logger) once per index
        logging.getLogger("bm25s").setLevel(logging.WARNING)
        self.spec = spec
        self._stemmer = _stemmer(spec.stemmer)
        self.retriever = bm25s.BM25(k1=spec.k1, b=spec.b, method=spec.method)
        build_lean_index(self.retriever, texts, spec.stopwords, self._stemmer)
        self.n_docs = len(texts)
        self._disk_bytes: int | None = None

    def disk_bytes(self) -> int:
        """Bytes of the index as ``bm25s.BM25.save`` writes it (score matrix, vocabulary, parameters); measured
        once, in a temporary folder."""
        if self._disk_bytes is None:
            import tempfile

            from ragbench.core.resources import files_bytes

            with tempfile.TemporaryDirectory() as tmp:
                self.retriever.save(tmp)
                self._disk_bytes = files_bytes(tmp)
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


#: texts tokenized at a time: bounds the Python token lists (bm25s' own ``index`` holds them for the whole corpus:
#: 8.6 KB per SciFact abstract at peak, which put a 1M-chunk sweep over 6 GB)
TOKENIZE_BATCH = 8192


def build_lean_index(retriever, texts: TextColumn, stopwords: str | None, stemmer,
                     batch_size: int = TOKENIZE_BATCH) -> None:
    """Index ``texts`` into the bm25s ``retriever`` exactly as ``retriever.index(bm25s.tokenize(texts, ...))`` does
    (same float32 score matrix, same CSC layout: columns = terms, rows ascending), in bounded memory.

    Pass 1 tokenizes ``batch_size`` texts at a time with ``bm25s.tokenize`` and keeps each document's distinct term
    ids and term frequencies as numpy arrays (int32 + uint16/int32). Pass 2 scores every (document, term) entry with
    bm25s' own idf and tf-component functions, vectorized over a batch, and places it straight into the final CSC
    arrays (a counting sort over terms). Peak memory: the kept term arrays (about 6 bytes per entry) + the CSC
    (8 bytes per entry) + one batch, instead of Python lists of every token of the corpus.
    Document length |d| counts every kept token (with repeats), avgdl is their mean, as bm25s computes them.
    """
    import bm25s
    from bm25s.scoring import _build_idf_array, _build_nonoccurrence_array, _select_idf_scorer, _select_tfc_scorer

    vocab: dict[str, int] = {}
    batches = deque()  # per batch: (distinct terms per document, term ids, term frequencies)
    lengths = []
    for batch in text_batches(texts, batch_size):
        ids, local_vocab = bm25s.tokenize(batch, stopwords=stopwords, stemmer=stemmer, show_progress=False)
        to_global = np.empty(len(local_vocab), dtype=np.int64)
        for token, local_id in local_vocab.items():
            to_global[local_id] = vocab.setdefault(token, len(vocab))
        doc_len = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(doc_len.sum()))
        del ids
        doc = np.repeat(np.arange(len(doc_len), dtype=np.int64), doc_len)
        pairs, tf = np.unique((doc << 32) | to_global[flat], return_counts=True)  # sorted by (document, term)
        terms_per_doc = np.bincount(pairs >> 32, minlength=len(doc_len)).astype(np.int32)
        tf = tf.astype(np.uint16) if tf.max(initial=0) <= np.iinfo(np.uint16).max else tf.astype(np.int32)
        batches.append((terms_per_doc, (pairs & 0xFFFFFFFF).astype(np.int32), tf))
        lengths.append(doc_len)
    doc_lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    del lengths
    n_docs, n_vocab = len(doc_lengths), len(vocab)
    avg_doc_len = doc_lengths.mean() if n_docs else np.float64(0)

    df = np.zeros(n_vocab, dtype=np.int64)
    for _, terms, _ in batches:
        df += np.bincount(terms, minlength=n_vocab)
    doc_frequencies = dict(enumerate(df.tolist()))
    r = retriever
    r.nonoccurrence_array = None
    if r.method in r.methods_requiring_nonoccurrence:
        r.nonoccurrence_array = _build_nonoccurrence_array(
            doc_frequencies=doc_frequencies, n_docs=n_docs, compute_idf_fn=_select_idf_scorer(r.idf_method),
            calculate_tfc_fn=_select_tfc_scorer(r.method), l_d=avg_doc_len, l_avg=avg_doc_len, k1=r.k1, b=r.b,
            delta=r.delta, dtype=r.dtype)
    idf = _build_idf_array(doc_frequencies=doc_frequencies, n_docs=n_docs,
                           compute_idf_fn=_select_idf_scorer(r.idf_method), dtype=r.dtype)
    tfc_fn = _select_tfc_scorer(r.method)

    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    data = np.empty(int(indptr[-1]), dtype=r.dtype)
    rows = np.empty(int(indptr[-1]), dtype=r.int_dtype)
    heads = indptr[:-1].copy()  # next free slot of each term's column
    first_doc = 0
    while batches:
        terms_per_doc, terms, tf = batches.popleft()  # each batch freed once it is placed
        doc = np.repeat(np.arange(first_doc, first_doc + len(terms_per_doc), dtype=np.int64), terms_per_doc)
        first_doc += len(terms_per_doc)
        # the same elementwise expressions bm25s evaluates per document (float64, then stored as float32)
        scores = idf[terms] * tfc_fn(tf_array=tf.astype(r.dtype), l_d=doc_lengths[doc], l_avg=avg_doc_len,
                                     k1=r.k1, b=r.b, delta=r.delta)
        if r.nonoccurrence_array is not None:
            scores -= r.nonoccurrence_array[terms]
        order = np.argsort(terms, kind="stable")  # by term, documents ascending within a term
        sorted_terms = terms[order]
        in_batch = np.bincount(terms, minlength=n_vocab)
        rank = np.arange(len(order)) - (np.cumsum(in_batch) - in_batch)[sorted_terms]
        slots = heads[sorted_terms] + rank
        data[slots] = scores[order]
        rows[slots] = doc[order]
        heads += in_batch
    r.scores = {"data": data, "indices": rows, "indptr": indptr, "num_docs": n_docs}
    vocab[""] = n_vocab  # bm25s' empty token: a query with no known term scores nothing
    r.vocab_dict = vocab
    r.unique_token_ids_set = set(vocab.values())


def _stemmer(language: str | None):
    if not language:
        return None
    import Stemmer

    return Stemmer.Stemmer(language)


def bm25_index(res: RetrievalResources, params: BM25Params) -> BM25Index:
    """The BM25 index of ``res.chunks`` under ``params``, built once per chunker and index parameters: a BM25
    retriever and a hybrid's BM25 leg with the same k1, b, variant, stopwords and stemmer share one (search depth
    is not part of an index)."""
    key = repr((params.k1, params.b, params.method, params.stopwords, params.stemmer))
    if key not in res.bm25:
        res.bm25[key] = BM25Index(params, index_texts(res.chunks))
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

    def bm25_params(self) -> BM25Params:
        return self

    def tracking_params(self) -> dict[str, Any]:
        return {**super().tracking_params(), "bm25_k1": self.k1, "bm25_b": self.b}
