"""The dataset section of a sweep config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from ragbench.core.spec import Spec

#: dataset format -> loader ``(DatasetSpec) -> Dataset``; one module per format registers itself
LOADERS: dict[str, Callable] = {}


def register_loader(fmt: str) -> Callable[[Callable], Callable]:
    """Decorator: make ``fn`` the loader of ``format: fmt``."""
    def add(fn: Callable) -> Callable:
        LOADERS[fmt] = fn
        return fn
    return add

class DatasetSpec(Spec):
    """Where the labelled data is. Relative paths are resolved against the config file's folder."""

    name: str | None = None
    format: str = Field("beir", description="a registered dataset format (beir, squad, ...)")
    path: Path
    split: str = "test"
    queries: Literal["in_qrels", "all"] = Field(
        "in_qrels", description="in_qrels: only queries judged in this split (BEIR convention; one judged only "
        "non-relevant is kept and counted as unlabelled); all: every query, unjudged ones counted as unlabelled")
    spans: bool = Field(True, description="load span labels when the dataset has them")
    squad_documents: Literal["paragraph", "article"] = "paragraph"
    max_queries: int | None = Field(None, gt=0, description="evaluate a seeded sample of this many queries")
    max_docs: int | None = Field(None, gt=0, description="keep all judged docs plus seeded distractors up to this many")
    seed: int = 0

    @field_validator("format")
    @classmethod
    def _registered(cls, v):
        if LOADERS and v not in LOADERS:
            raise ValueError(f"unknown dataset format {v!r}; known: {', '.join(sorted(LOADERS))}")
        return v
