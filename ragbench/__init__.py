"""ragbench: batch evaluation of RAG retrieval configurations on your own labelled queries.

Data flows one way, one subpackage per stage::

    data -> chunking -> embedding -> index -> retrieval -> evaluation -> (generation) -> results -> reporting
         -> promotion;   core (shared plumbing), config (the sweep file), sweep (the orchestration), cli

A notebook needs only this module::

    import ragbench
    cfg = ragbench.load_config("configs/demo.yaml")
    result = ragbench.run_sweep(cfg, ragbench.Settings.from_env(home="/tmp/rb"))
    ragbench.publish_sweep(result.sweep_id, ragbench.Settings.from_env(home="/tmp/rb"))  # report, MLflow summary
    ds = ragbench.load_dataset(cfg.dataset)

Names are imported on first use, so ``import ragbench`` stays cheap (MLflow and torch load only when needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "Settings": "ragbench.core.settings",
    "RagbenchError": "ragbench.core.errors",
    "load_config": "ragbench.config",
    "SweepConfig": "ragbench.config",
    "RunConfig": "ragbench.config",
    "Dataset": "ragbench.data.dataset",
    "load_dataset": "ragbench.data",
    "CHUNKERS": "ragbench.chunking",
    "ChunkerSpec": "ragbench.chunking",
    "chunk_corpus": "ragbench.chunking",
    "RETRIEVERS": "ragbench.retrieval",
    "RERANKERS": "ragbench.retrieval",
    "RetrieverSpec": "ragbench.retrieval",
    "RetrievalResources": "ragbench.retrieval",
    "retrieve": "ragbench.retrieval",
    "RANK_MEASURES": "ragbench.evaluation.measures",
    "rank_measure": "ragbench.evaluation.measures",
    "evaluate_per_query": "ragbench.evaluation.metrics",
    "compare_configs": "ragbench.evaluation.comparison",
    "run_sweep": "ragbench.sweep",
    "publish_sweep": "ragbench.sweep",
    "up_to_date": "ragbench.sweep",
    "SweepResult": "ragbench.results.outcomes",
    "ConfigResult": "ragbench.results.outcomes",
    "ConfigOutcome": "ragbench.results.outcomes",
    "ResultStore": "ragbench.results.store",
    "ProductionRetriever": "ragbench.promotion.serving",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'ragbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ragbench.chunking import CHUNKERS, ChunkerSpec, chunk_corpus
    from ragbench.config import RunConfig, SweepConfig, load_config
    from ragbench.core.errors import RagbenchError
    from ragbench.core.settings import Settings
    from ragbench.data import Dataset, load_dataset
    from ragbench.evaluation.measures import RANK_MEASURES, rank_measure
    from ragbench.evaluation.metrics import evaluate_per_query
    from ragbench.evaluation.comparison import compare_configs
    from ragbench.promotion.serving import ProductionRetriever
    from ragbench.results.outcomes import ConfigOutcome, ConfigResult, SweepResult
    from ragbench.results.store import ResultStore
    from ragbench.retrieval import RERANKERS, RETRIEVERS, RetrievalResources, RetrieverSpec, retrieve
    from ragbench.sweep import publish_sweep, run_sweep
