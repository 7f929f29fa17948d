"""Second-stage reranking of the top-N candidates of a run, keeping the best ``keep``.

Two rerankers behind one protocol (``prepare`` once per run, then ``score`` per query):

* :class:`BiEncoderRescorer` -- rescore with a second, usually stronger, embedding model: ``score = cos(q, c)`` of
  the query and chunk vectors, both computed by :func:`ragbench.embedding.embed.embed_texts` so they come from (and go to)
  the vector cache. A real offline cascade: ``static-retrieval-m2v`` first stage, ``all-MiniLM-L6-v2`` rescorer.
* :class:`CrossEncoderReranker` -- a sentence-transformers ``CrossEncoder`` scoring ``(query, chunk)`` pairs, for
  users whose cross-encoder weights are reachable (none can be installed offline on this project's machines).

:func:`rerank` returns the reranked run (scores are the reranker's; ties keep the first-stage order) and a latency
table: per query, the wall time of its ``score`` call plus an equal share of the batch ``prepare`` time.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np
import polars as pl

from ragbench.core.cache import VectorCache
from ragbench.config.sweep import EmbedderSpec
from ragbench.retrieval.fusion import check_run
from ragbench.retrieval.base import RUN_SCHEMA

LATENCY_SCHEMA = {"query_id": pl.String, "ms": pl.Float64, "candidates": pl.Int64}


class Reranker(Protocol):
    name: str

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        """Batch work for a whole run (e.g. embedding every candidate once); may do nothing."""

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """Relevance of each of ``texts`` to ``query`` (higher is better)."""


def _unit(x: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


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
            into.update(zip(todo, _unit(vecs)))

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        self._embed(query_texts, "query", self._q)
        self._embed(chunk_texts, "document", self._d)

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        self._embed([query], "query", self._q)
        self._embed(texts, "document", self._d)
        if not texts:
            return np.zeros(0)
        return np.stack([self._d[t] for t in texts]).astype(np.float64) @ self._q[query].astype(np.float64)


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``; ``model_name`` resolves like an embedder name (packaged, local
    folder, or local Hugging Face cache). Extra keyword arguments go to ``CrossEncoder`` (e.g. ``num_labels=1``)."""

    def __init__(self, model_name: str, batch_size: int = 32, max_length: int | None = None, **kwargs):
        from sentence_transformers import CrossEncoder

        from ragbench.core.errors import ModelError
        from ragbench.embedding.models import resolve_model

        m = resolve_model(model_name)
        try:
            self.model = CrossEncoder(str(m.path) if m.path else m.name, max_length=max_length, **kwargs)
        except Exception as e:
            raise ModelError(f"cross-encoder {model_name!r} failed to load from {m.path or m.name}: {e}") from e
        self.batch_size = batch_size
        self.name = f"crossencoder:{model_name}"

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        return None

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        out = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False)
        out = np.asarray(out, dtype=np.float64)
        if out.ndim != 1:
            raise ValueError(f"{self.name}: expected one score per pair, got shape {out.shape} (a cross-encoder "
                             f"with several labels cannot rank; load it with num_labels=1)")
        return out


def rerank(run: pl.DataFrame, query_texts: dict[str, str], chunk_texts: dict[str, str], reranker: Reranker,
           top_n: int, keep: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rerank the best ``top_n`` chunks of each query by ``reranker`` and keep the best ``keep``.

    Parameters
    ----------
    run
        First-stage run (``RUN_SCHEMA``).
    query_texts, chunk_texts
        ``query_id -> text`` and ``chunk_id -> text`` (what the reranker reads; use the chunks' ``index_text`` to
        give it what the first stage indexed).
    top_n, keep
        Candidates reranked per query, and how many of them are returned (``1 <= keep <= top_n``).

    Returns
    -------
    ``(run, latency)``: the reranked run (reranker scores, ranks ``1..min(keep, candidates)``, ties in first-stage
    order) and :data:`LATENCY_SCHEMA` rows ``query_id, ms, candidates``.
    """
    if not 1 <= keep <= top_n:
        raise ValueError(f"rerank: need 1 <= keep <= top_n, got keep={keep}, top_n={top_n}")
    run = check_run(run, "rerank input")
    cand = run.sort("query_id", "rank").group_by("query_id", maintain_order=True).head(top_n)
    missing_q = sorted(set(cand["query_id"].to_list()) - set(query_texts))
    if missing_q:
        raise ValueError(f"rerank: no text for {len(missing_q)} queries, e.g. {missing_q[0]!r}")
    missing_c = sorted(set(cand["chunk_id"].to_list()) - set(chunk_texts))
    if missing_c:
        raise ValueError(f"rerank: no text for {len(missing_c)} chunks, e.g. {missing_c[0]!r}")
    groups = cand.group_by("query_id", maintain_order=True).agg("chunk_id", "doc_id").rows()
    t0 = time.perf_counter()
    reranker.prepare([query_texts[q] for q, _, _ in groups],
                     list(dict.fromkeys(chunk_texts[c] for _, cs, _ in groups for c in cs)))
    share = (time.perf_counter() - t0) / max(len(groups), 1)
    rows, lat = [], []
    for qid, chunk_ids, doc_ids in groups:
        t = time.perf_counter()
        scores = np.asarray(reranker.score(query_texts[qid], [chunk_texts[c] for c in chunk_ids]), dtype=np.float64)
        lat.append((qid, 1000 * (time.perf_counter() - t + share), len(chunk_ids)))
        if scores.shape != (len(chunk_ids),):
            raise ValueError(f"{reranker.name}: returned {scores.shape} scores for {len(chunk_ids)} candidates")
        if not np.isfinite(scores).all():
            raise ValueError(f"{reranker.name}: non-finite scores for query {qid!r}")
        order = np.argsort(-scores, kind="stable")[:keep]  # stable: ties keep the first-stage order
        rows.extend((qid, r, chunk_ids[i], doc_ids[i], float(scores[i])) for r, i in enumerate(order, 1))
    return (pl.DataFrame(rows, schema=RUN_SCHEMA, orient="row"),
            pl.DataFrame(lat, schema=LATENCY_SCHEMA, orient="row"))
