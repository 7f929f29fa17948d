"""The bounded-memory BM25 build equals bm25s' own ``index`` bit for bit, on every bm25s scoring method.

``build_lean_index`` tokenizes a batch at a time and scatters scores straight into the CSC matrix; bm25s' own path
keeps every token of the corpus as Python lists. Both must give the same float32 score of every (term, document)
pair, the same document order inside each term's column, and so the same runs.
"""

from __future__ import annotations

import json

import bm25s
import numpy as np
import pytest

from conftest import DEMO
from ragbench.retrieval.bm25 import BM25Index, BM25Params, _stemmer, build_lean_index


def _texts() -> list[str]:
    docs = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line.strip()]
    texts = [f"{d.get('title', '')} {d['text']}" for d in docs]
    # an empty document, one of stopwords only, one term repeated past uint16 (the wide-tf path), non-ASCII
    return texts + ["", "the and of it", "cat " * 70_000 + "dog", "Zürich naïve café façade zürich"] + texts[:5]


def _columns(retriever) -> dict[str, tuple[list[int], list[int]]]:
    """term -> (documents, float32 score bits) of its CSC column."""
    s = retriever.scores
    out = {}
    for term, col in retriever.vocab_dict.items():
        if term == "" or col + 1 >= len(s["indptr"]):
            continue
        a, b = s["indptr"][col], s["indptr"][col + 1]
        out[term] = (s["indices"][a:b].tolist(), s["data"][a:b].view(np.uint32).tolist())
    return out


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_lean_build_equals_bm25s_index(method):
    texts, spec = _texts(), BM25Params(method=method)
    stemmer = _stemmer(spec.stemmer)
    ref = bm25s.BM25(k1=spec.k1, b=spec.b, method=method)
    ref.index(bm25s.tokenize(texts, stopwords=spec.stopwords, stemmer=stemmer, show_progress=False),
              show_progress=False)
    lean = bm25s.BM25(k1=spec.k1, b=spec.b, method=method)
    build_lean_index(lean, texts, spec.stopwords, stemmer, batch_size=7)  # many batches, uneven last one

    assert set(lean.vocab_dict) == set(ref.vocab_dict)
    assert {k: lean.scores[k].dtype for k in ("data", "indices", "indptr")} == \
        {k: ref.scores[k].dtype for k in ("data", "indices", "indptr")}
    assert _columns(lean) == _columns(ref)
    if ref.nonoccurrence_array is not None:
        by_term = {t: ref.nonoccurrence_array[i] for t, i in ref.vocab_dict.items() if i < len(ref.vocab_dict) - 1}
        assert all(lean.nonoccurrence_array[lean.vocab_dict[t]] == v for t, v in by_term.items())
    queries = texts[:12] + ["cat", "unknownword", "Zürich café"]
    tokens = bm25s.tokenize(queries, stopwords=spec.stopwords, stemmer=stemmer, show_progress=False,
                            return_ids=False)
    ref_docs, ref_scores = ref.retrieve(tokens, k=len(texts), show_progress=False)
    lean_docs, lean_scores = lean.retrieve(tokens, k=len(texts), show_progress=False)
    assert np.array_equal(lean_scores, ref_scores) and np.array_equal(lean_docs, ref_docs)


def test_bm25_index_reads_a_polars_column_batch_by_batch():
    import polars as pl

    texts = _texts()
    from_list = BM25Index(BM25Params(), texts).search(texts[:8], depth=20)
    from_series = BM25Index(BM25Params(), pl.Series(texts)).search(texts[:8], depth=20)
    assert [a.tolist() for a in from_list.ids] == [a.tolist() for a in from_series.ids]
    assert [a.tolist() for a in from_list.scores] == [a.tolist() for a in from_series.scores]
