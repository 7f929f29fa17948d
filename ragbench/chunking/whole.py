"""One chunk per document: the whole text."""

from __future__ import annotations

from typing import Any, Literal

from ragbench.chunking.base import CHUNKERS, ChunkerSpec, Span


@CHUNKERS.register
class WholeDocChunker(ChunkerSpec):
    kind: Literal["whole"] = "whole"

    def explain_cut(self) -> str:
        return "whole document"

    def spans(self, text: str) -> list[Span]:
        return [(0, len(text))] if text else []

    def tracking_params(self) -> dict[str, Any]:
        return {"chunk_size": None, "chunk_unit": None, "chunk_overlap": 0}
