"""Second-stage reranking of the top-N candidates of a run, keeping the best ``keep``.

Rerankers behind one protocol, one module per kind registered in :data:`RERANKERS` (``prepare`` once per run,
then ``score`` per query):

* :class:`BiEncoderRescorer` -- rescore with a second, usually stronger, embedding model: ``score = cos(q, c)`` of
  the query and chunk vectors, both computed by :func:`ragbench.embedding.embed.embed_texts` so they come from (and
  go to) the vector cache. A real offline cascade: ``static-retrieval-m2v`` first stage, ``all-MiniLM-L6-v2`` rescorer.
* :class:`CrossEncoderReranker` -- a sentence-transformers ``CrossEncoder`` scoring ``(query, chunk)`` pairs, for
  users whose cross-encoder weights are reachable (none can be installed offline on this project's machines).

:func:`rerank` returns the reranked run (scores are the reranker's; ties keep the first-stage order) and a latency
table: per query, the wall time of its ``score`` call plus an equal share of the batch ``prepare`` time.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar, Protocol

import numpy as np
import polars as pl
from pydantic import Field, model_validator

from ragbench.core.registry import Registry
from ragbench.core.schemas import RUN_SCHEMA, check_run
from ragbench.core.spec import Spec

LATENCY_SCHEMA = {"query_id": pl.String, "ms": pl.Float64, "candidates": pl.Int64}


class RerankSpec(Spec):
    """Rerank the top ``top_n`` candidates and keep the best ``keep``. Subclasses set ``kind``, implement
    :meth:`build` and name their :attr:`default_model`; an entry without ``kind`` is a ``biencoder``.

    A ``model`` left out is filled in with the kind's default before the spec is hashed, so ``{kind: biencoder}``
    and ``{kind: biencoder, model: all-MiniLM-L6-v2}`` are one spec (same config id, same stored results)."""

    kind: str
    model: str | None = Field(None, description="the reranker's model (default: the kind's own default model)")
    top_n: int = Field(50, gt=0)
    keep: int | None = Field(None, gt=0, description="default: top_n")
    #: the model of an entry that names none (None: this kind needs ``model``)
    default_model: ClassVar[str | None] = None

    @model_validator(mode="before")
    @classmethod
    def _fill_default_model(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("model") is None and cls.default_model is not None:
            data = {**data, "model": cls.default_model}
        return data

    @model_validator(mode="after")
    def _keep_within_top_n(self):
        if self.model is None:
            raise ValueError(f"a {self.kind} reranker needs a model (this kind has no default)")
        if self.keep is not None and self.keep > self.top_n:
            raise ValueError(f"keep ({self.keep}) cannot exceed top_n ({self.top_n})")
        return self

    def build(self, vector_cache) -> "Reranker":
        """The reranker this spec describes (loaded once per sweep and shared by the configs that use it)."""
        raise NotImplementedError


RERANKERS: Registry[RerankSpec] = Registry("reranker", RerankSpec, default="biencoder")


class Reranker(Protocol):
    name: str

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        """Batch work for a whole run (e.g. embedding every candidate once); may do nothing."""

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """Relevance of each of ``texts`` to ``query`` (higher is better)."""


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row scaled to unit L2 norm (zero rows stay zero)."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def rerank(run: pl.DataFrame, query_texts: dict[str, str], chunk_texts: dict[str, str], reranker: Reranker,
           top_n: int, keep: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rerank the best ``top_n`` chunks of each query by ``reranker`` and keep the best ``keep``.

    Parameters
    ----------
    run
        First-stage run (``RUN_SCHEMA``).
    query_texts, chunk_texts
        ``query_id -> text`` and ``chunk_id -> text`` (what the reranker reads; use the chunks' index texts,
        ``index_texts(chunks)``, to give it what the first stage indexed).
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
