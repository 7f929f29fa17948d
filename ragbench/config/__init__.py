"""Sweep configuration: one YAML file, validated with pydantic before any heavy work (:func:`load_config`).

Every section's spec is defined beside the stage it configures and re-exported here for convenience.
"""

from ragbench.chunking import (
                               CHUNKERS,
                               ChunkerSpec,
                               FixedChunker,
                               MarkdownChunker,
                               RecursiveChunker,
                               SentenceChunker,
                               WholeDocChunker,
                               chunker_label,
)
from ragbench.config.labels import ConfigLabels
from ragbench.config.loader import load_config
from ragbench.config.sweep import OutputSpec, RunConfig, SweepConfig
from ragbench.data.spec import DatasetSpec
from ragbench.embedding.spec import EmbedderSpec
from ragbench.evaluation.ann import AnnFidelitySpec
from ragbench.evaluation.diagnostics import DiagnosticsSpec
from ragbench.evaluation.metrics import MetricsSpec
from ragbench.evaluation.query_classes import QueryClassSpec
from ragbench.generation.spec import ContextAssemblySpec, GenerationSpec, KSweepSpec, LocalServerSpec
from ragbench.index.spec import IndexSpec
from ragbench.retrieval import (
                               RERANKERS,
                               RETRIEVERS,
                               BM25Params,
                               BM25Retriever,
                               DenseParams,
                               DenseRetriever,
                               HybridBM25Params,
                               HybridRetriever,
                               ParentsSpec,
                               RerankSpec,
                               RetrieverSpec,
                               retriever_label,
)

__all__ = ["CHUNKERS", "RERANKERS", "RETRIEVERS", "AnnFidelitySpec", "BM25Params", "BM25Retriever", "ChunkerSpec",
           "ConfigLabels", "ContextAssemblySpec", "DatasetSpec", "DenseParams", "DenseRetriever", "DiagnosticsSpec",
           "EmbedderSpec",           "FixedChunker", "GenerationSpec", "HybridBM25Params", "HybridRetriever", "IndexSpec", "KSweepSpec",
           "LocalServerSpec", "MarkdownChunker", "MetricsSpec", "OutputSpec", "ParentsSpec", "QueryClassSpec",
           "RecursiveChunker", "RerankSpec", "RetrieverSpec", "RunConfig", "SentenceChunker", "SweepConfig",
           "WholeDocChunker", "chunker_label", "load_config", "retriever_label"]
