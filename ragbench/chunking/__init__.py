"""Chunking: one module per strategy, each registering its spec in :data:`CHUNKERS` on import.

Importing this package imports every module in it, so a new strategy is one new file here (or any module that
calls ``@CHUNKERS.register`` before the config is loaded).
"""

from ragbench.chunking.base import (
                                    CHUNK_SCHEMA,
                                    CHUNKERS,
                                    ChunkerSpec,
                                    SizedChunkerSpec,
                                    Span,
                                    chunk_corpus,
                                    chunk_corpus_incremental,
                                    chunker_label,
                                    contextual_prefix,
                                    contextual_text,
                                    share_corpus_text,
                                    spans_for,
                                    trim,
)
from ragbench.core.registry import import_submodules

import_submodules(__name__)

from ragbench.chunking.fixed import FixedChunker, fixed_spans  # noqa: E402
from ragbench.chunking.markdown import MarkdownChunker, heading_path_at, markdown_headings, markdown_spans  # noqa: E402
from ragbench.chunking.recursive import RecursiveChunker, recursive_spans  # noqa: E402
from ragbench.chunking.sentences import SentenceChunker, sentence_spans, sentence_window_spans  # noqa: E402
from ragbench.chunking.whole import WholeDocChunker  # noqa: E402

__all__ = ["CHUNK_SCHEMA", "CHUNKERS", "ChunkerSpec", "SizedChunkerSpec", "Span", "chunk_corpus", "chunker_label",
           "contextual_prefix", "contextual_text", "share_corpus_text", "spans_for", "trim", "FixedChunker",
           "MarkdownChunker", "RecursiveChunker", "chunk_corpus_incremental",
           "SentenceChunker", "WholeDocChunker", "fixed_spans", "heading_path_at", "markdown_headings",
           "markdown_spans", "recursive_spans", "sentence_spans", "sentence_window_spans"]
