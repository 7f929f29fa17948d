"""Prompt and context assembly: retrieved chunks -> numbered context -> chat messages.

Steps, on the chunks of one query given best-first (rank order):

1. **Near-duplicate removal** (``dedupe``): a chunk is dropped when the Jaccard similarity of its word 5-shingle set
   with that of any higher-ranked kept chunk is >= ``dedupe_threshold`` (0.8). Words are lowercased ``\\w+`` runs;
   a text of fewer than 5 words is one shingle (all its words). Overlapping chunkers produce such near-copies,
   which waste the budget and over-weight one passage.
2. **Top k**: the first ``k`` kept chunks.
3. **Token budget** (``token_budget``): chunk texts are counted with
   :func:`ragbench.core.models.count_tokens` under ``tokenizer`` (an embedding model's tokenizer: an approximation of the
   generator's, typically within ~15%); chunks are taken in rank order while the running total fits, and the first
   chunk that does not fit **and every chunk after it** are cut whole (no partial chunks, so the context is always
   a rank prefix and k and budget compose predictably; a single chunk larger than the budget leaves the context
   empty — raise the budget). Numbering, separators, instruction and question are not counted.
4. **Ordering** for presentation: ``score`` = best first; ``edges`` = best at both ends, weakest in the middle
   (1st, 3rd, 5th, ... then ..., 6th, 4th, 2nd: the "lost in the middle" mitigation of Liu et al. 2023);
   ``best_last`` = weakest first, best right before the question.
5. **Numbering** ``[1] text`` in presentation order, chunks separated by a blank line.

The prompt is one user message (every chat template has a user role; several small models ignore or lack a system
role)::

    {instruction}

    Context:
    [1] ...

    [2] ...

    Question: {question}
    Answer:
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

DEFAULT_INSTRUCTION = ("Answer the question using ONLY the context below. If the context does not contain the "
                       "answer, reply exactly: INSUFFICIENT_CONTEXT")
Ordering = Literal["score", "edges", "best_last"]
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ContextSpec:
    """Knobs of context assembly (see the module docstring for each step)."""

    k: int = 5
    ordering: Ordering = "score"
    dedupe: bool = True
    dedupe_threshold: float = 0.8
    shingle_size: int = 5
    token_budget: int | None = 1500
    tokenizer: str = "all-MiniLM-L6-v2"
    instruction: str = DEFAULT_INSTRUCTION

    def __post_init__(self):
        if self.k < 1:
            raise ValueError(f"context k must be >= 1, got {self.k}")
        if self.ordering not in ("score", "edges", "best_last"):
            raise ValueError(f"context ordering must be score, edges or best_last, got {self.ordering!r}")
        if not 0 < self.dedupe_threshold <= 1:
            raise ValueError(f"dedupe_threshold must be in (0, 1], got {self.dedupe_threshold}")
        if self.shingle_size < 1:
            raise ValueError(f"shingle_size must be >= 1, got {self.shingle_size}")
        if self.token_budget is not None and self.token_budget < 1:
            raise ValueError(f"token_budget must be >= 1 or None, got {self.token_budget}")
        if not self.instruction.strip():
            raise ValueError("the instruction is empty")


@dataclass(frozen=True)
class AssembledContext:
    """The prompt for one query. ``chunk_ids`` in presentation order ([1] first); ``messages`` ready to send."""

    messages: tuple[dict[str, str], ...]
    chunk_ids: tuple[str, ...]
    context: str
    context_tokens: int
    n_candidates: int
    n_duplicates: int = 0
    n_over_budget: int = 0
    notes: tuple[str, ...] = field(default=())

    def as_messages(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.messages]


def shingles(text: str, size: int = 5) -> frozenset[tuple[str, ...]]:
    """Word ``size``-shingles of the lowercased ``\\w+`` words; a shorter text is one shingle."""
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + size]) for i in range(len(words) - size + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a ∩ b| / |a ∪ b|; 0 for two empty sets."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def dedupe(texts: Sequence[str], threshold: float = 0.8, size: int = 5) -> list[int]:
    """Indices of the texts kept: each is dropped if its shingle Jaccard with an earlier kept one is >= threshold."""
    kept: list[int] = []
    sets: list[frozenset] = []
    for i, t in enumerate(texts):
        s = shingles(t, size)
        if any(jaccard(s, k) >= threshold for k in sets):
            continue
        kept.append(i)
        sets.append(s)
    return kept


def order(items: Sequence, ordering: Ordering) -> list:
    """Reorder best-first ``items`` for presentation (see the module docstring)."""
    items = list(items)
    if ordering == "score":
        return items
    if ordering == "best_last":
        return items[::-1]
    if ordering == "edges":
        return items[0::2] + items[1::2][::-1]
    raise ValueError(f"unknown ordering {ordering!r}")


def format_prompt(question: str, numbered_context: str, instruction: str) -> str:
    return f"{instruction}\n\nContext:\n{numbered_context}\n\nQuestion: {question}\nAnswer:"


def build_context(question: str, chunks: Sequence[tuple[str, str]], spec: ContextSpec) -> AssembledContext:
    """Assemble the prompt for ``question`` from ``(chunk_id, text)`` pairs given best-first."""
    if not question.strip():
        raise ValueError("empty question")
    ids = [c[0] for c in chunks]
    texts = [c[1] for c in chunks]
    keep = dedupe(texts, spec.dedupe_threshold, spec.shingle_size) if spec.dedupe else list(range(len(texts)))
    n_dup = len(texts) - len(keep)
    keep = keep[: spec.k]
    used_tokens = 0
    n_over = 0
    if keep:
        from ragbench.core.models import count_tokens  # lazy: loads a tokenizer

        fit = 0
        for n in count_tokens([texts[i] for i in keep], spec.tokenizer):
            if spec.token_budget is not None and used_tokens + n > spec.token_budget:
                break
            used_tokens += n
            fit += 1
        n_over = len(keep) - fit
        keep = keep[:fit]
    shown = order(keep, spec.ordering)
    body = "\n\n".join(f"[{n}] {texts[i].strip()}" for n, i in enumerate(shown, 1))
    notes = ("every retrieved chunk was over the token budget",) if n_over and not shown else ()
    prompt = format_prompt(question.strip(), body, spec.instruction)
    return AssembledContext(messages=({"role": "user", "content": prompt},), chunk_ids=tuple(ids[i] for i in shown),
                            context=body, context_tokens=used_tokens, n_candidates=len(chunks), n_duplicates=n_dup,
                            n_over_budget=n_over, notes=notes)
