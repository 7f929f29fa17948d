"""The dataset section of a sweep config."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ragbench.core.spec import Spec

#: dataset format -> loader ``(DatasetSpec) -> Dataset``; one module per format registers itself
LOADERS: dict[str, Callable] = {}

#: fields only the folder format reads
_FOLDER_ONLY = ("questions", "include", "exclude")


def register_loader(fmt: str) -> Callable[[Callable], Callable]:
    """Decorator: make ``fn`` the loader of ``format: fmt``."""
    def add(fn: Callable) -> Callable:
        LOADERS[fmt] = fn
        return fn
    return add

class DatasetSpec(Spec):
    """Where the labelled data is. Relative paths are resolved against the config file's folder."""

    # added after configs were first hashed (they keep their dataset fingerprints)
    dumped_when_set: ClassVar[tuple[str, ...]] = ("questions", "include", "exclude", "holdout")

    name: str | None = None
    format: str = Field("beir", description="a registered dataset format (beir, squad, folder, ...)")
    path: Path
    split: str = "test"
    queries: Literal["in_qrels", "all"] = Field(
        "in_qrels", description="in_qrels: only queries judged in this split (BEIR convention; one judged only "
        "non-relevant is kept and counted as unlabelled); all: every query, unjudged ones counted as unlabelled. "
        "The folder format keeps every question unless in_qrels is set")
    spans: bool = Field(True, description="load span labels when the dataset has them")
    squad_documents: Literal["paragraph", "article"] = "paragraph"
    max_queries: int | None = Field(None, gt=0, description="evaluate a seeded sample of this many queries")
    max_docs: int | None = Field(None, gt=0, description="keep all judged docs plus seeded distractors up to this many")
    seed: int = 0
    questions: Path | None = Field(None, description="folder format: the questions file (CSV, JSONL or YAML), "
                                   "relative to path; default: questions.csv/.jsonl/.yaml in the folder, if any")
    include: tuple[str, ...] = Field((), description="folder format: glob patterns of the files to read (a pattern "
                                     "without '/' matches file names, one with '/' the path); default: every file")
    exclude: tuple[str, ...] = Field((), description="folder format: glob patterns of files to leave out (hidden "
                                     "files and the questions file always are)")
    holdout: float | None = Field(None, gt=0, lt=1, description="hold out this share of the labelled queries "
                                  "(seeded by seed, stratified by class): the sweep ranks on the rest and measures "
                                  "every config on the held-out set as heldout/<measure>")

    @field_validator("format")
    @classmethod
    def _registered(cls, v):
        if LOADERS and v not in LOADERS:
            raise ValueError(f"unknown dataset format {v!r}; known: {', '.join(sorted(LOADERS))}")
        return v

    @model_validator(mode="after")
    def _folder_fields(self):
        if self.format != "folder":
            given = [f for f in _FOLDER_ONLY if getattr(self, f) != type(self).model_fields[f].default]
            if given:
                raise ValueError(f"{', '.join(given)}: only the folder format reads "
                                 f"{'it' if len(given) == 1 else 'them'} (format is {self.format!r})")
        return self

