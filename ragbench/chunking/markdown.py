"""One chunk per Markdown heading section; sections longer than ``max_tokens`` are split recursively.

A section that is only its heading, or shorter than :data:`MIN_SECTION_TOKENS` tokens (a lone ``## SYNOPSIS``, a
one-line stub), is no chunk of its own: it joins the section that follows it (the last one joins the one before),
so the heading stays with the text it introduces. Spans are slices of the document, so offsets stay exact.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from ragbench.chunking.base import CHUNKERS, DEFAULT_TOKENIZER, ChunkerSpec, Span, trim
from ragbench.chunking.headings import heading_path_at, markdown_headings  # noqa: F401 (re-exported)
from ragbench.chunking.recursive import RecursiveChunker, recursive_spans

#: a section shorter than this many tokens (of the chunker's tokenizer) joins its neighbour
MIN_SECTION_TOKENS = 16


def _is_short(text: str, span: Span, count) -> bool:
    """Only a heading line, or fewer than :data:`MIN_SECTION_TOKENS` tokens."""
    body = text[span[0]:span[1]]
    heading_only = "\n" not in body.strip() and body.lstrip().startswith("#")
    return heading_only or count(body) < MIN_SECTION_TOKENS


def join_short_sections(text: str, sections: list[Span], count) -> list[Span]:
    """``sections`` (trimmed, in order) with each short one (:func:`_is_short`; ``count`` counts tokens) joined to
    the next section, a short last one to the previous: ``[start of the first, end of the last]`` of each run."""
    out: list[Span] = []
    pending: int | None = None  # start of short sections waiting for the next one
    for span in sections:
        start = span[0] if pending is None else pending
        if _is_short(text, span, count):
            pending = start
            continue
        out.append((start, span[1]))
        pending = None
    if pending is not None:  # short sections at the end: onto the section before, else alone
        end = sections[-1][1]
        out = out[:-1] + [(out[-1][0], end)] if out else [(pending, end)]
    return out


def markdown_spans(text: str, spec: "MarkdownChunker") -> list[Span]:
    """One chunk per heading section (heading line included), short sections joined to the next; long sections
    split recursively."""
    from ragbench.core.models import load_tokenizer

    tok = load_tokenizer(spec.tokenizer)
    count = lambda s: len(tok.encode(s, add_special_tokens=False).ids)  # noqa: E731
    starts = sorted({0} | {h[0] for h in markdown_headings(text)})
    sections = [trim(text, a, b) for a, b in zip(starts, starts[1:] + [len(text)])]
    out: list[Span] = []
    for sec in join_short_sections(text, [s for s in sections if s], count):
        if spec.max_tokens is None:
            out.append(sec)
            continue
        sub = RecursiveChunker(size=spec.max_tokens, overlap=0, tokenizer=spec.tokenizer)
        out.extend((sec[0] + a, sec[0] + b) for a, b in recursive_spans(text[sec[0]:sec[1]], sub))
    return out


@CHUNKERS.register
class MarkdownChunker(ChunkerSpec):
    #: 2: short and heading-only sections join the next section
    version: ClassVar[int] = 2

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
