"""The sweep plan: what each chunker shares among its configs, and what each config needs.

The orchestrator walks chunkers in config order; for each it builds a :class:`ChunkerPlan` lazily (chunks once,
token counts and chunk statistics once per tokenizer, BM25 indexes once per parameter set, one collection per
embedder) and hands each config a :class:`ConfigInputs` with only its slice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ragbench.config import SweepConfig
from ragbench.evaluation.ann import AnnFidelitySpec
from ragbench.evaluation.diagnostics import DiagnosticsSpec
from ragbench.evaluation.metrics import MetricsSpec
from ragbench.generation.spec import GenerationSpec
from ragbench.retrieval import RetrievalResources


@dataclass(frozen=True)
class EvaluationSpec:
    """The slice of the sweep config that evaluating one config reads (``holdout``: the dataset's held-out share,
    split with ``holdout_seed``; None evaluates every query as one set)."""

    metrics: MetricsSpec
    diagnostics: DiagnosticsSpec
    ann_fidelity: AnnFidelitySpec
    generation: GenerationSpec | None
    holdout: float | None = None
    holdout_seed: int = 0

    @classmethod
    def of(cls, cfg: SweepConfig) -> "EvaluationSpec":
        return cls(cfg.metrics, cfg.diagnostics, cfg.ann_fidelity, cfg.generation, cfg.dataset.holdout,
                   cfg.dataset.seed)


@dataclass
class ChunkerPlan:
    """What one chunker's configs share, built once: its chunks, per-tokenizer token counts and chunk statistics,
    and, per embedder, the collection name (or the exception that building it raised)."""

    chunks: pl.DataFrame
    tokens: dict[str, tuple[dict[str, int], dict[str, float]]] = field(default_factory=dict)
    bm25: dict[str, object] = field(default_factory=dict)
    collections: dict[str, str | Exception] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigInputs:
    """What the retrieve/evaluate step of one config needs."""

    resources: RetrievalResources
    tokenizer: str
    token_counts: dict[str, int]
    chunk_stats: dict[str, float]
    generator: object | None = None
