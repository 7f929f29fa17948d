"""Fixed windows of ``size`` tokens (or characters) advancing by ``size - overlap``."""

from __future__ import annotations

from typing import Literal

from ragbench.chunking.base import CHUNKERS, SizedChunkerSpec, Span, trim, unit_windows
from ragbench.core.models import load_tokenizer


def fixed_spans(text: str, size: int, overlap: int, unit: str, tokenizer: str) -> list[Span]:
    """Windows of ``size`` tokens (or characters) advancing by ``size - overlap``; the last window ends the text."""
    if unit == "chars":
        bounds = [(i, i + 1) for i in range(len(text))]
    else:
        bounds = [o for o in load_tokenizer(tokenizer).encode(text, add_special_tokens=False).offsets if o[1] > o[0]]
    return [span for s, e in unit_windows(bounds, size, size - overlap) if (span := trim(text, s, e))]


@CHUNKERS.register
class FixedChunker(SizedChunkerSpec):
    kind: Literal["fixed"] = "fixed"

    def spans(self, text: str) -> list[Span]:
        return fixed_spans(text, self.size, self.overlap, self.unit, self.tokenizer)
