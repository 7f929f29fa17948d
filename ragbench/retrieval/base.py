"""First-stage retrieval: queries -> chunk rankings (a *run*), one module per retriever kind.

A run is a table with :data:`~ragbench.core.schemas.RUN_SCHEMA`: one row per (query, rank), ranks 1-based, best
first. Rankings are of chunks; :mod:`ragbench.evaluation.judging` maps them back to documents and spans.

A retriever kind is a spec registered in :data:`RETRIEVERS` that implements :meth:`RetrieverSpec.first_stage`;
query rewriting by an LLM (:mod:`.rewrite`), reranking, small-to-big and metadata filters are shared knobs of every
kind (see :mod:`.pipeline`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import polars as pl
from pydantic import Field

from ragbench.core.registry import Registry
from ragbench.core.schemas import RUN_SCHEMA
from ragbench.core.spec import Spec
from ragbench.data.dataset import Dataset
from ragbench.retrieval.parents import ParentsSpec
from ragbench.retrieval.rerank import RERANKERS
from ragbench.retrieval.rewrite import REWRITERS

logging.getLogger("bm25s").setLevel(logging.WARNING)  # its per-index DEBUG lines flood Prefect's console
# (bm25s resets it to DEBUG when imported: BM25Index sets it again after that)


@dataclass
class RetrievalResources:
    """What a chunker's configs share: its chunks, BM25 indexes by params, the dense collection, query vectors."""

    chunks: pl.DataFrame
    index: object | None = None
    collection: str | None = None
    hybrid_collection: str | None = None  # dense + Qdrant-BM25 sparse vectors, for engine: qdrant
    query_vectors: np.ndarray | None = None
    bm25: dict[str, Any] = field(default_factory=dict)
    vector_cache: object | None = None
    rerankers: dict[str, object] = field(default_factory=dict)
    #: the LLM of query rewrites: a zero-argument callable returning a :class:`~.rewrite.QueryLLM` (started on
    #: first use by the sweep); None when no endpoint was given
    llm: Callable[[], Any] | None = None
    #: query rewrites already fetched for this config: (rewrite spec id, query text) -> RewriteCall
    rewrites: dict[tuple[str, str], Any] = field(default_factory=dict)
    #: embedder spec id -> query text -> (ms to embed it uncached, its vector): serving latency
    #: (ragbench.evaluation.cost) embeds each query once per model in a sweep
    query_encodings: dict[str, dict[str, tuple[float, np.ndarray]]] = field(default_factory=dict)
    #: (collection, model key, query vectors' digest, EfSweep) -> its ANN fidelity table: a collection's table is
    #: the same for every config searching it (dense and hybrid), so a sweep measures it once
    ann_tables: dict[tuple, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Filters:
    """A metadata filter as each engine applies it: a BM25 weight mask and an index filter (None: no filter)."""

    bm25_mask: np.ndarray | None = None
    index_filter: object | None = None


@dataclass(frozen=True)
class DenseSearch:
    """The dense search a retriever runs: what ANN fidelity compares against exact search."""

    depth: int
    exact: bool
    hnsw_ef: int | None


class RetrieverSpec(Spec):
    """Base of every first-stage retriever spec. Subclasses set ``kind``, implement :meth:`first_stage` and
    :meth:`describe`, and register with ``@RETRIEVERS.register``."""

    kind: str
    name: str | None = None
    depth: int = Field(100, gt=0, description="chunks fetched per query")
    documents: int | None = Field(None, gt=0, description="fetch deeper (depth doubled, up to every chunk) until "
                                  "each query has this many distinct documents, so document measures at this "
                                  "cutoff compare chunkers at the same document depth")
    rewrite: REWRITERS.field | None = Field(None, description="rewrite each query with the LLM before the first "
                                            "stage: {kind: multi_query, n: 3} or {kind: hyde}")
    rerank: RERANKERS.field | None = None
    parents: ParentsSpec | None = None
    filter: dict[str, Any] | None = Field(None, description="metadata filter on the corpus' metadata fields, e.g. "
                                          "{tenant: public} or {doc_type: [api, reference]}; recall is reported "
                                          "with and without it")
    #: True when the retriever searches dense vectors: it is paired with every embedder of the sweep
    uses_embedder: ClassVar[bool] = False
    #: True when it needs the collection that also holds Qdrant's own BM25 sparse vectors
    uses_sparse_collection: ClassVar[bool] = False
    dumped_when_set: ClassVar[tuple[str, ...]] = ("documents", "rewrite")

    def first_stage(self, ds: Dataset, res: RetrievalResources, embedder, filters: Filters) -> pl.DataFrame:
        """The candidate run of every query of ``ds`` (before reranking), a filter applied inside each engine."""
        raise NotImplementedError

    def deeper(self, factor: int) -> "RetrieverSpec":
        """This retriever fetching ``factor`` times as many chunks (used to reach :attr:`documents`)."""
        return self.model_copy(update={"depth": self.depth * factor})

    def describe(self) -> str:
        """The automatic label of the first stage (knob suffixes are added by :attr:`label`)."""
        return self.kind

    def dense_search(self) -> DenseSearch | None:
        """The dense search this retriever runs, if any."""
        return None

    def explain_first_stage(self) -> str:
        """The first stage in words, for people (``BM25``, ``dense exact``, ``hybrid RRF``); default
        :meth:`describe`."""
        return self.describe()

    def bm25_params(self) -> Spec | None:
        """The bm25s index parameters (a ``BM25Params``) this retriever searches with (what the cost model sizes
        and the sweep builds once per chunker), None when it searches no bm25s index (default)."""
        return None

    def tracking_params(self) -> dict[str, Any]:
        """The first stage in the one vocabulary of MLflow's runs table: ``fusion``, ``bm25_k1``, ``bm25_b``,
        ``dense_search`` (``exact``/``hnsw``) and ``hnsw_ef``; None where it does not apply. The default reads
        :meth:`dense_search` and names no BM25 or fusion. Display and search only, never part of an id."""
        search = self.dense_search()
        return {"fusion": None, "bm25_k1": None, "bm25_b": None,
                "dense_search": None if search is None else "exact" if search.exact else "hnsw",
                "hnsw_ef": None if search is None or search.exact else search.hnsw_ef}

    def explain(self) -> str:
        """The retriever in words, knobs included (``dense exact + rerank MiniLM-L6-v2 top 50``). Display only:
        never part of an id or a stored name."""
        text = self.explain_first_stage()
        if self.rewrite:
            text = f"{self.rewrite.describe()} rewrites > {text}"
        if self.rerank:
            text += f" + rerank {self.rerank.model.split('/')[-1]} top {self.rerank.top_n}"
        if self.parents:
            text += f" + parent {self.parents.mode}s"
        if self.filter:
            text += " where " + ", ".join(f"{k}={v}" for k, v in self.filter.items())
        if self.documents:
            text += f" until {self.documents} documents"
        return text

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        base = self.describe()
        if self.rewrite:
            base = f"{self.rewrite.describe()} > {base}"
        if self.rerank:
            base += f" > rerank[{self.rerank.model.split('/')[-1]}@{self.rerank.top_n}]"
        if self.parents:
            base += f" > parents[{self.parents.mode}]"
        if self.filter:
            base += " filter[" + ",".join(f"{k}={v}" for k, v in self.filter.items()) + "]"
        if self.documents:
            base += f" docs[{self.documents}]"
        return base


RETRIEVERS: Registry[RetrieverSpec] = Registry("retriever", RetrieverSpec)


def retriever_label(spec: RetrieverSpec) -> str:
    return spec.label


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
