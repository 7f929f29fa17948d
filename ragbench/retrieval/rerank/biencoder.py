"""Rescoring with a second (usually stronger) embedding model: ``score = cos(q, c)``, vectors through the cache.

A real offline cascade: ``static-retrieval-m2v`` first stage, ``all-MiniLM-L6-v2`` rescorer.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from ragbench.core.cache import VectorCache
from ragbench.embedding.spec import EmbedderSpec
from ragbench.retrieval.rerank.base import RERANKERS, RerankSpec, unit_rows


class BiEncoderRescorer:
    """Cosine similarity under a second embedding model, vectors through the content-addressed cache."""

    def __init__(self, embedder_spec: EmbedderSpec, vector_cache: VectorCache):
        self.spec = embedder_spec
        self.cache = vector_cache
        self.name = f"biencoder:{embedder_spec.label}"
        self._q: dict[str, np.ndarray] = {}
        self._d: dict[str, np.ndarray] = {}

    def _embed(self, texts: list[str], role: str, into: dict[str, np.ndarray]) -> None:
        from ragbench.embedding.embed import embed_texts

        todo = list(dict.fromkeys(t for t in texts if t not in into))
        if todo:
            vecs, _ = embed_texts(todo, self.spec, role, self.cache)
            into.update(zip(todo, unit_rows(vecs)))

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        self._embed(query_texts, "query", self._q)
        self._embed(chunk_texts, "document", self._d)

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        self._embed([query], "query", self._q)
        self._embed(texts, "document", self._d)
        if not texts:
            return np.zeros(0)
        return np.stack([self._d[t] for t in texts]).astype(np.float64) @ self._q[query].astype(np.float64)



@RERANKERS.register
class BiEncoderRerank(RerankSpec):
    kind: Literal["biencoder"] = "biencoder"
    #: a real offline cascade behind a cheap first stage (``static-retrieval-m2v`` or BM25)
    default_model: ClassVar[str] = "all-MiniLM-L6-v2"

    def build(self, vector_cache) -> BiEncoderRescorer:
        return BiEncoderRescorer(EmbedderSpec(model=self.model), vector_cache)
