"""Windows of consecutive sentences (rule-based sentence boundaries)."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from ragbench.chunking.base import CHUNKERS, ChunkerSpec, Span, trim, unit_windows

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*+] |\d+\. |#))")


def sentence_spans(text: str) -> list[Span]:
    """Sentence boundaries: ``.!?`` followed by space and a capital/digit, blank lines, and list/heading lines."""
    spans, s = [], 0
    for m in _SENTENCE_END.finditer(text):
        span = trim(text, s, m.start())
        if span:
            spans.append(span)
        s = m.end()
    span = trim(text, s, len(text))
    if span:
        spans.append(span)
    return spans


def sentence_window_spans(text: str, window: int, stride: int) -> list[Span]:
    """Windows of ``window`` consecutive sentences advancing by ``stride`` (``0`` = window)."""
    return unit_windows(sentence_spans(text), window, stride or window)


@CHUNKERS.register
class SentenceChunker(ChunkerSpec):
    kind: Literal["sentences"] = "sentences"
    window: int = Field(3, gt=0, description="sentences per chunk")
    stride: int = Field(0, ge=0, description="sentences to advance; 0 means window (no overlap)")

    @model_validator(mode="after")
    def _stride_within_window(self):
        if self.stride > self.window:
            raise ValueError(f"stride ({self.stride}) larger than window ({self.window}) would skip sentences")
        return self

    def spans(self, text: str) -> list[Span]:
        return sentence_window_spans(text, self.window, self.stride)

    def describe(self) -> str:
        return f"sent{self.window}s{self.stride or self.window}"

    def explain_cut(self) -> str:
        stride = self.stride or self.window
        return f"{self.window} sentences, " + ("no overlap" if stride >= self.window else f"stride {stride}")

    def tracking_params(self) -> dict[str, Any]:
        return {"chunk_size": self.window, "chunk_unit": "sentences",
                "chunk_overlap": max(self.window - (self.stride or self.window), 0)}
