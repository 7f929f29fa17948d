"""The dataset section of a sweep config."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ragbench.core.spec import Spec



class DatasetSpec(Spec):
    """Where the labelled data is. Relative paths are resolved against the config file's folder."""

    name: str | None = None
    format: Literal["beir", "squad"] = "beir"
    path: Path
    split: str = "test"
    queries: Literal["in_qrels", "all"] = Field(
        "in_qrels", description="in_qrels: only queries judged in this split (BEIR convention); all: every query, "
        "unjudged ones counted as unlabelled")
    spans: bool = Field(True, description="load span labels when the dataset has them")
    squad_documents: Literal["paragraph", "article"] = "paragraph"
    max_queries: int | None = Field(None, gt=0, description="evaluate a seeded sample of this many queries")
    max_docs: int | None = Field(None, gt=0, description="keep all judged docs plus seeded distractors up to this many")
    seed: int = 0
