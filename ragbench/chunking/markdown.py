"""One chunk per Markdown heading section; sections longer than ``max_tokens`` are split recursively."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ragbench.chunking.base import CHUNKERS, DEFAULT_TOKENIZER, ChunkerSpec, Span, trim
from ragbench.chunking.headings import heading_path_at, markdown_headings  # noqa: F401 (re-exported)
from ragbench.chunking.recursive import RecursiveChunker, recursive_spans


def markdown_spans(text: str, spec: "MarkdownChunker") -> list[Span]:
    """One chunk per heading section (heading line included); long sections split recursively."""
    starts = sorted({0} | {h[0] for h in markdown_headings(text)})
    sections = [trim(text, a, b) for a, b in zip(starts, starts[1:] + [len(text)])]
    out: list[Span] = []
    for sec in filter(None, sections):
        if spec.max_tokens is None:
            out.append(sec)
            continue
        sub = RecursiveChunker(size=spec.max_tokens, overlap=0, tokenizer=spec.tokenizer)
        out.extend((sec[0] + a, sec[0] + b) for a, b in recursive_spans(text[sec[0]:sec[1]], sub))
    return out


@CHUNKERS.register
class MarkdownChunker(ChunkerSpec):
    kind: Literal["markdown"] = "markdown"
    max_tokens: int | None = Field(None, gt=0, description="split sections longer than this recursively")
    tokenizer: str = DEFAULT_TOKENIZER

    def spans(self, text: str) -> list[Span]:
        return markdown_spans(text, self)

    def describe(self) -> str:
        return f"markdown{self.max_tokens or ''}"

    def explain_cut(self) -> str:
        return "markdown" + (f" ≤{self.max_tokens} tok" if self.max_tokens else " sections")

    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer

    def tracking_params(self) -> dict[str, Any]:
        return {"chunk_size": self.max_tokens, "chunk_unit": "tokens" if self.max_tokens else None,
                "chunk_overlap": 0}
