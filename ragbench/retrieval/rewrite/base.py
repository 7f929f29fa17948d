"""Query rewriting: an LLM turns each query into the texts the first stage searches instead.

A rewrite kind is a :class:`RewriteSpec` registered in :data:`REWRITERS`. It says which chat messages to send for a
query (a fixed, versioned prompt: ``prompt: v1`` names an entry of the kind's ``PROMPTS``, so a new prompt is a new
name and a new config id), how to read the reply into :class:`Variant` s (a text and the side it is embedded as),
and how to fuse the runs of the variants into one run.

The LLM is not imported here (retrieval comes before generation in the layer order): the sweep injects it into
:class:`~ragbench.retrieval.base.RetrievalResources` as ``llm``, a zero-argument callable returning any object with
the :class:`QueryLLM` method (``ragbench.generation.llm.client.ChatClient`` is one). Its disk cache is keyed by
(model, messages, params), and the messages carry the prompt and the query, so a rewrite is fetched once per
(model, prompt, query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import polars as pl
from pydantic import Field, model_validator

from ragbench.core.registry import Registry
from ragbench.core.spec import Spec

Role = Literal["query", "document"]


class QueryLLM(Protocol):
    """What a rewrite needs from an LLM endpoint: cached chat completions, in input order."""

    model: str

    def complete_many(self, batch: Sequence[Sequence[Mapping[str, str]]], progress: Any = None,
                      max_tokens: int | None = None) -> list[Any]:
        """One completion per message list, each with ``text``, ``cached``, ``seconds`` and ``recorded_seconds``."""


@dataclass(frozen=True)
class Variant:
    """One text the first stage searches for a query, and the side its vector is embedded as (``query`` uses the
    embedder's query prompt, ``document`` its passage prompt)."""

    text: str
    role: Role


class RewriteSpec(Spec):
    """Base of every rewrite kind. Subclasses set ``kind`` and ``PROMPTS`` and implement :meth:`messages`,
    :meth:`variants` and :meth:`fuse`."""

    kind: str
    prompt: str = Field("v1", description="the name of the kind's fixed prompt (a changed prompt gets a new name)")
    max_tokens: int = Field(128, gt=0, description="longest LLM reply, in tokens")
    #: prompt name -> template with ``{query}`` (and the kind's own fields); never edited once released
    PROMPTS: ClassVar[dict[str, str]] = {}

    @model_validator(mode="after")
    def _known_prompt(self):
        if self.prompt not in self.PROMPTS:
            raise ValueError(f"unknown {self.kind} prompt {self.prompt!r}; known: {', '.join(sorted(self.PROMPTS))}")
        return self

    def messages(self, query: str) -> list[dict[str, str]]:
        """The chat messages sent for ``query``."""
        return [{"role": "user", "content": self.PROMPTS[self.prompt].format(query=query, **self.model_dump())}]

    def variants(self, query: str, reply: str) -> list[Variant]:
        """The texts searched for ``query`` given the LLM's ``reply`` (never empty: fall back to the query)."""
        raise NotImplementedError

    def fuse(self, runs: list[pl.DataFrame], depth: int) -> pl.DataFrame:
        """One run from the runs of variant 0, 1, ... (each keyed by the original query ids)."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short label part, e.g. ``mq3`` or ``hyde``."""
        return self.kind


REWRITERS: Registry[RewriteSpec] = Registry("query rewrite", RewriteSpec)
