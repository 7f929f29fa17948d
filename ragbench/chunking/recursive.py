"""LangChain's recursive splitter: paragraph -> line -> sentence -> word, to a length in tokens or characters."""

from __future__ import annotations

from typing import Literal

from ragbench.chunking.base import CHUNKERS, SizedChunkerSpec, Span
from ragbench.core.models import load_tokenizer


def recursive_spans(text: str, spec: "RecursiveChunker") -> list[Span]:
    """LangChain's ``RecursiveCharacterTextSplitter`` (separators tried in order), length in tokens or chars."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if spec.unit == "tokens":
        tok = load_tokenizer(spec.tokenizer)
        length = lambda s: len(tok.encode(s, add_special_tokens=False).ids)  # noqa: E731
    else:
        length = len
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=spec.size, chunk_overlap=spec.overlap, separators=list(spec.separators), length_function=length,
        keep_separator="end", add_start_index=True, strip_whitespace=True)
    spans, cursor = [], 0
    for piece in splitter.split_text(text):
        start = text.find(piece, cursor if text.startswith(piece, cursor) else max(0, cursor - len(piece)))
        if start < 0:
            start = text.find(piece)
        if start < 0:  # cannot happen with strip_whitespace pieces of the same text; refuse a wrong offset
            raise AssertionError(f"splitter returned text not found in the document: {piece[:60]!r}")
        spans.append((start, start + len(piece)))
        cursor = start + 1
    return spans


@CHUNKERS.register
class RecursiveChunker(SizedChunkerSpec):
    kind: Literal["recursive"] = "recursive"
    separators: tuple[str, ...] = ("\n\n", "\n", ". ", " ", "")

    def spans(self, text: str) -> list[Span]:
        return recursive_spans(text, self)
