"""Second-stage rerankers: one module per kind, each registering its spec in :data:`RERANKERS` on import."""

from ragbench.core.registry import import_submodules
from ragbench.retrieval.rerank.base import LATENCY_SCHEMA, RERANKERS, Reranker, RerankSpec, rerank, unit_rows

import_submodules(__name__)

from ragbench.retrieval.rerank.biencoder import BiEncoderRerank, BiEncoderRescorer  # noqa: E402
from ragbench.retrieval.rerank.crossencoder import CrossEncoderRerank, CrossEncoderReranker  # noqa: E402

__all__ = ["LATENCY_SCHEMA", "RERANKERS", "Reranker", "RerankSpec", "rerank", "unit_rows", "BiEncoderRerank",
           "BiEncoderRescorer", "CrossEncoderRerank", "CrossEncoderReranker"]
