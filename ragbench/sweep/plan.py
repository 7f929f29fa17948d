"""The sweep plan: what each chunker shares among its configs, and what each config needs.

The sweep's stages (:class:`~ragbench.sweep.work.StageWork`) build per chunker a :class:`ChunkerPlan` lazily
(chunks once, token counts and chunk statistics once per tokenizer, per-chunk context texts once per context
tokenizer, window statistics once per embedder, BM25 indexes once per parameter set, one collection per embedder)
and hand each config a :class:`ConfigInputs` with only its slice. Which configs run at all is decided before, by
:func:`ragbench.sweep.decide.decide`."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ragbench.config import SweepConfig
from ragbench.evaluation.ann import AnnFidelitySpec
from ragbench.evaluation.diagnostics import DiagnosticsSpec
from ragbench.evaluation.metrics import MetricsSpec
from ragbench.evaluation.query_classes import QueryClassSpec
from ragbench.generation.llm.context import ChunkTexts
from ragbench.generation.spec import GenerationSpec
from ragbench.retrieval import RetrievalResources


@dataclass(frozen=True)
class EvaluationSpec:
    """The slice of the sweep config that evaluating one config reads (``query_classes`` labels its per-query
    rows; ``holdout``: the dataset's held-out share, split with ``holdout_seed``; None evaluates every query as one
    set)."""

    metrics: MetricsSpec
    diagnostics: DiagnosticsSpec
    ann_fidelity: AnnFidelitySpec
    generation: GenerationSpec | None
    query_classes: QueryClassSpec | None = None
    holdout: float | None = None
    holdout_seed: int = 0

    @classmethod
    def of(cls, cfg: SweepConfig) -> "EvaluationSpec":
        return cls(cfg.metrics, cfg.diagnostics, cfg.ann_fidelity, cfg.generation, cfg.query_classes,
                   cfg.dataset.holdout_fraction, cfg.dataset.seed)

    def canonical(self) -> dict:
        """Every field's canonical dict: part of each config's evaluation key."""
        out = {"metrics": self.metrics.canonical(), "diagnostics": self.diagnostics.canonical(),
               "ann_fidelity": self.ann_fidelity.canonical(),
               "generation": self.generation.canonical() if self.generation else None,
               "query_classes": self.query_classes.canonical() if self.query_classes else None}
        if self.holdout:  # only when set: keys of sweeps without a split stay as they were
            out["holdout"] = {"share": self.holdout, "seed": self.holdout_seed}
        return out


@dataclass
class ChunkerPlan:
    """What one chunker's configs share, built once: its chunks, per-tokenizer token counts and chunk statistics,
    per context tokenizer the per-chunk texts of context assembly, per embedder its window statistics and the
    collection name (or the exception that building it raised)."""

    chunks: pl.DataFrame
    tokens: dict[str, tuple[dict[str, int], dict[str, float]]] = field(default_factory=dict)
    shape: dict[str, float] | None = None  # the tokenizer-independent chunk statistics, computed once
    context_texts: dict[str, ChunkTexts] = field(default_factory=dict)
    windows: dict[str, dict[str, float]] = field(default_factory=dict)
    embed_seconds: dict[str, float] = field(default_factory=dict)  # per embedder: estimated cost of its chunks
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
    context_texts: ChunkTexts | None = None  # per-chunk context work shared by the chunker's configs
    embed_seconds: float = 0.0  # estimated seconds to embed the chunks from scratch (ragbench.evaluation.cost)
