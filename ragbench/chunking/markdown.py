"""One chunk per Markdown heading section; sections longer than ``max_tokens`` are split recursively."""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Literal

from pydantic import Field

from ragbench.chunking.base import CHUNKERS, DEFAULT_TOKENIZER, ChunkerSpec, Span, trim
from ragbench.chunking.recursive import RecursiveChunker, recursive_spans

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, title)`` of each ATX heading outside fenced code blocks."""
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    return [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING.finditer(text)
            if not any(a <= m.start() < b for a, b in fenced)]


def heading_path_at(headings: list[tuple[int, int, str]], offset: int) -> list[str]:
    """The breadcrumb (outermost first) of headings in force at ``offset``."""
    stack: list[tuple[int, str]] = []
    for pos, level, title in headings[:bisect_right([h[0] for h in headings], offset)]:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
    return [t for _, t in stack]


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

    @property
    def tokenizer_name(self) -> str | None:
        return self.tokenizer
