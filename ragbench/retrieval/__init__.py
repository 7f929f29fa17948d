"""Retrieval: first-stage retrievers (one module per kind, each registering its spec in :data:`RETRIEVERS` on
import), fusion, reranking (:mod:`.rerank`), small-to-big (:mod:`.parents`) and one config's pipeline
(:mod:`.pipeline`)."""

from ragbench.core.registry import import_submodules
from ragbench.core.schemas import RUN_SCHEMA
from ragbench.retrieval.base import (
                                     RETRIEVERS,
                                     DenseSearch,
                                     Filters,
                                     RetrievalResources,
                                     RetrievalResult,
                                     RetrieverSpec,
                                     retriever_label,
                                     run_from_hits,
)

import_submodules(__name__)

from ragbench.retrieval.bm25 import BM25Index, BM25Params, BM25Retriever  # noqa: E402
from ragbench.retrieval.dense import DenseParams, DenseRetriever  # noqa: E402
from ragbench.retrieval.hybrid import HybridBM25Params, HybridRetriever  # noqa: E402
from ragbench.retrieval.parents import ParentsSpec  # noqa: E402
from ragbench.retrieval.pipeline import RetrievalOutput, retrieve  # noqa: E402
from ragbench.retrieval.rerank import RERANKERS, RerankSpec  # noqa: E402

__all__ = ["RUN_SCHEMA", "RETRIEVERS", "RERANKERS", "DenseSearch", "Filters", "RetrievalResources",
           "RetrievalResult", "RetrieverSpec", "RerankSpec", "retriever_label", "run_from_hits",
           "BM25Index", "BM25Params", "BM25Retriever", "DenseParams", "DenseRetriever", "HybridBM25Params",
           "HybridRetriever", "ParentsSpec", "RetrievalOutput", "retrieve"]
