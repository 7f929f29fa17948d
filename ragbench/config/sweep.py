"""The sweep config: what to compare (chunkers x embedders x retrievers) on which data, measured how.

A BM25 retriever depends on the chunker only, so it is paired with each chunker once. Every expanded configuration
gets a stable id: the hash of its canonical spec. Each section's spec lives with its stage (chunkers in
:mod:`ragbench.chunking`, retrievers in :mod:`ragbench.retrieval`, ...); this module only assembles them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SerializeAsAny, field_validator, model_validator

from ragbench.chunking import CHUNKERS, ChunkerSpec
from ragbench.config.labels import ConfigLabels
from ragbench.core.durations import parse_duration
from ragbench.core.hashing import stable_hash
from ragbench.core.spec import Spec
from ragbench.data.spec import DatasetSpec
from ragbench.embedding.spec import EmbedderSpec
from ragbench.evaluation.ann import AnnFidelitySpec
from ragbench.evaluation.diagnostics import DiagnosticsSpec
from ragbench.evaluation.metrics import MetricsSpec
from ragbench.evaluation.query_classes import QueryClassSpec
from ragbench.generation.spec import GenerationSpec
from ragbench.index.spec import IndexSpec
from ragbench.retrieval import RETRIEVERS, RetrieverSpec


class OutputSpec(Spec):
    home: Path | None = Field(None, description="local folder for caches, DuckDB, embedded Qdrant and MLflow, "
                                                "used when neither --home nor $RAGBENCH_HOME names one (default: "
                                                "./.ragbench)")
    mlflow_tracking_uri: str | None = Field(None, description="used when $MLFLOW_TRACKING_URI is not set "
                                                              "(default: SQLite under the home)")
    experiment: str | None = None
    mlflow: bool = True


class SearchSpec(Spec):
    """How the sweep walks its grid: every config (``grid``), or a screen first (``screen``)."""

    strategy: Literal["grid", "screen"] = Field(
        "grid", description="grid: evaluate every config; screen: first evaluate each chunker x model pair on a "
                            "pooled sub-corpus (the judged documents plus the cheap retrievers' top documents) and "
                            "do not embed in full a pair significantly worse than the screen's leader")
    depth: int = Field(10, ge=1, description="documents each cheap retriever (BM25 per chunker, a static model) "
                                            "adds to the screen's pool per query (the pool, and so the screen's "
                                            "encoding, grows with queries x depth)")
    alpha: float = Field(0.05, gt=0, lt=1, description="a pair is screened out when its Holm-adjusted one-sided "
                                                       "p-value (H1: it scores below the leader + margin) is below "
                                                       "this: the chance it allows of screening out the best "
                                                       "pair")
    margin: float = Field(0.0, ge=0, description="the smallest gain in the primary measure worth a full embed: "
                                                 "the leader is the cheapest pair (estimated seconds of its full "
                                                 "embed) within this of "
                                                 "the best screen score, and a pair is also screened out when it "
                                                 "significantly falls short of the leader + margin (it cannot beat "
                                                 "it by this much; ties go). 0: only pairs significantly worse")


class SweepConfig(Spec):
    name: str
    dataset: SerializeAsAny[DatasetSpec]  # dumped with its format's own fields
    chunkers: tuple[CHUNKERS.field, ...] = Field(..., min_length=1)
    embedders: tuple[EmbedderSpec, ...] = ()
    retrievers: tuple[RETRIEVERS.field, ...] = Field(..., min_length=1)
    index: IndexSpec = IndexSpec()
    metrics: MetricsSpec = MetricsSpec()
    ann_fidelity: AnnFidelitySpec = AnnFidelitySpec()
    diagnostics: DiagnosticsSpec = DiagnosticsSpec()
    query_classes: QueryClassSpec = QueryClassSpec()
    generation: GenerationSpec | None = None
    output: OutputSpec = OutputSpec()
    budget: str | None = Field(None, description="stop starting expensive stages that would end after this much time "
                                           "(8h, 90m, 120s); the configs left are marked over_budget and the next "
                                           "run continues (--budget wins)")
    search: SearchSpec = Field(SearchSpec(), description="grid (every config) or screen (pairs significantly "
                                                         "worse than the leader on a pooled sub-corpus are not "
                                                         "embedded in full; recorded as screened_out)")

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_is_a_duration(cls, budget: object) -> str | None:
        if budget is not None:
            budget = str(budget)  # a bare number (budget: 90) is refused as --budget 90 is: no unit
            parse_duration(budget)  # one message for the file and --budget
        return budget

    @model_validator(mode="after")
    def _dense_needs_embedder(self):
        if any(r.uses_embedder for r in self.retrievers) and not self.embedders:
            raise ValueError("a dense or hybrid retriever needs at least one entry under 'embedders'")
        return self

    def canonical(self) -> dict[str, Any]:
        # where results go, the time budget, the search strategy and the device an embedder runs on do not change
        # what a config's measurement means (screening changes which configs run): stored results are reused
        return self.model_dump(mode="json", exclude={"output": True, "budget": True, "search": True,
                                                    "embedders": {"__all__": {"device"}}})

    def expand(self) -> list["RunConfig"]:
        """The sweep grid. Dense retrievers pair with every embedder; BM25 with none."""
        configs: list[RunConfig] = []
        for chunker in self.chunkers:
            for retriever in self.retrievers:
                embedders = self.embedders if retriever.uses_embedder else (None,)
                for embedder in embedders:
                    configs.append(RunConfig(chunker, embedder, retriever, self.index if embedder else None))
        seen: dict[str, RunConfig] = {}
        for c in configs:
            seen.setdefault(c.config_id, c)
        return list(seen.values())


@dataclass(frozen=True)
class RunConfig:
    """One point of the sweep grid."""

    chunker: ChunkerSpec
    embedder: EmbedderSpec | None
    retriever: RetrieverSpec
    index: IndexSpec | None

    def spec(self) -> dict[str, Any]:
        return {
            "chunker": self.chunker.canonical(),
            "embedder": self.embedder.canonical() if self.embedder else None,
            "retriever": self.retriever.canonical(),
            "index": self.index.canonical() if self.index else None,
        }

    @property
    def config_id(self) -> str:
        return stable_hash(self.spec())

    @property
    def labels(self) -> ConfigLabels:
        """The chunker, model and retriever in words, for display (:mod:`ragbench.config.labels`); the stored
        identity stays :attr:`name` and :attr:`config_id`."""
        return ConfigLabels.of(self.chunker, self.embedder, self.retriever)

    @property
    def name(self) -> str:
        parts = [self.chunker.label]
        if self.embedder:
            parts.append(self.embedder.label)
        parts.append(self.retriever.label)
        return " | ".join(parts)
