"""Qdrant collection parameters of a sweep."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ragbench.core.spec import Spec


class IndexSpec(Spec):
    """Qdrant collection parameters. ``full_scan_threshold_kb`` below which Qdrant searches brute force."""

    distance: Literal["cosine", "dot", "euclid"] = "cosine"
    hnsw_m: int = Field(16, gt=0)
    ef_construct: int = Field(100, gt=0)
    full_scan_threshold_kb: int = Field(10_000, ge=0)
