"""Multi-query rewriting: the LLM writes ``n`` full questions for a (short) query; the original and each rewrite
are searched, and the runs are fused by reciprocal rank fusion (:func:`ragbench.retrieval.fusion.rrf`, k = 60,
equal weights, the original query first).

The reply is read one rewrite per line (list markers like ``1.``, ``-``, ``*`` and surrounding quotes stripped);
empty lines, lines equal to the query (case-insensitive) and repeats are dropped, and at most ``n`` are kept. A
reply with no usable line leaves the query searched alone (counted in ``rewrite_fallback_queries``).
"""

from __future__ import annotations

import re
from typing import Literal

import polars as pl
from pydantic import Field

from ragbench.retrieval.fusion import rrf
from ragbench.retrieval.rewrite.base import REWRITERS, RewriteSpec, Variant

_MARKER = re.compile(r"^\s*(?:[-*•]|\(?\d+[.):]|Q\d*[.):])\s*")


@REWRITERS.register
class MultiQueryRewrite(RewriteSpec):
    kind: Literal["multi_query"] = "multi_query"
    n: int = Field(3, gt=0, le=10, description="rewrites asked for (the original query is searched too)")
    PROMPTS = {
        "v1": "Rewrite the search query below as {n} different, complete questions that a user of a software "
              "product's documentation might ask. Spell out what any identifier, error code, flag or setting name "
              "refers to, and keep it verbatim. Write one question per line, with no numbering and nothing "
              "else.\n\nSearch query: {query}",
    }

    def variants(self, query: str, reply: str) -> list[Variant]:
        seen, out = {query.strip().lower()}, [Variant(query, "query")]
        for line in reply.splitlines():
            text = _MARKER.sub("", line).strip().strip('"').strip()
            if text and text.lower() not in seen:
                seen.add(text.lower())
                out.append(Variant(text, "query"))
            if len(out) > self.n:
                break
        return out

    def fuse(self, runs: list[pl.DataFrame], depth: int) -> pl.DataFrame:
        return rrf(runs, depth=depth)

    def describe(self) -> str:
        return f"mq{self.n}"
