"""HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"): the LLM writes a short
hypothetical passage answering the query, and the first stage searches the *passage* instead of the query.

Choices, made here once:

* the passage is embedded as a **document** (the embedder's passage prompt, ``embed_texts(..., "document")``): it
  is meant to look like a chunk, and is compared with chunks as chunks are compared with each other;
* the query vector is **not** averaged in (the paper averages several passages with the query; one greedy
  passage from a small local model keeps it cheap, and ``multi_query`` covers searching the query too);
* lexical first stages (BM25, hybrid's sparse half) search the passage text too;
* an empty reply falls back to the query itself (counted in ``rewrite_fallback_queries``).
"""

from __future__ import annotations

from typing import Literal

import polars as pl

from ragbench.retrieval.rewrite.base import REWRITERS, RewriteSpec, Variant


@REWRITERS.register
class HydeRewrite(RewriteSpec):
    kind: Literal["hyde"] = "hyde"
    PROMPTS = {
        "v1": "Write a short passage from a software product's documentation that answers the question below. "
              "Write only the passage.\n\nQuestion: {query}",
    }

    def variants(self, query: str, reply: str) -> list[Variant]:
        passage = reply.strip()
        return [Variant(passage, "document")] if passage else [Variant(query, "query")]

    def fuse(self, runs: list[pl.DataFrame], depth: int) -> pl.DataFrame:
        return runs[0]

    def describe(self) -> str:
        return "hyde"
