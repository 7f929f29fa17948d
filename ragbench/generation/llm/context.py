"""Prompt and context assembly: retrieved chunks -> numbered context -> chat messages.

Steps, on the chunks of one query given best-first (rank order):

1. **Near-duplicate removal** (``dedupe``): a chunk is dropped when the Jaccard similarity of its word 5-shingle set
   with that of any higher-ranked kept chunk is >= ``dedupe_threshold`` (0.8). Words are lowercased ``\\w+`` runs;
   a text of fewer than 5 words is one shingle (all its words). Overlapping chunkers produce such near-copies,
   which waste the budget and over-weight one passage. Candidates are read only until ``k`` are kept.
2. **Top k**: the first ``k`` kept chunks (the *considered* chunks).
3. **Token budget** (``token_budget``): chunk texts are counted with
   :func:`ragbench.core.models.count_tokens` under ``tokenizer`` (an embedding model's tokenizer: an approximation of the
   generator's, typically within ~15%) and taken in rank order while the running total fits. A chunk longer than
   the budget still left is handled by ``overflow``:

   * ``cut`` (default): it is cut to the remaining tokens (at the end of the last whole word that fits) and shown;
     the budget is then full and every later chunk is dropped. A long first chunk (a whole article) therefore
     still gives the reader the start of the article instead of an empty context.
   * ``drop``: it is left out and the next chunks are tried (a later, shorter chunk may still fit).

   Numbering, separators, instruction and question are not counted.
4. **Ordering** for presentation: ``score`` = best first; ``edges`` = best at both ends, weakest in the middle
   (1st, 3rd, 5th, ... then ..., 6th, 4th, 2nd: the "lost in the middle" mitigation of Liu et al. 2023);
   ``best_last`` = weakest first, best right before the question.
5. **Numbering** ``[1] text`` in presentation order, chunks separated by a blank line.

:class:`AssembledContext` keeps the shown texts apart from the numbered context (``texts``), so evidence checks
(answer-in-context) read chunk text only: the ``[n]`` labels, separators and prompt never count as evidence.
Per-chunk work (token counts, shingles, normalised texts) goes through a :class:`ChunkTexts` cache, computed once
per chunk and shared by every query and every config of a chunker.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

DEFAULT_INSTRUCTION = ("Answer the question using ONLY the context below. If the context does not contain the "
                       "answer, reply exactly: INSUFFICIENT_CONTEXT")
Ordering = Literal["score", "edges", "best_last"]
Overflow = Literal["cut", "drop"]
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
    overflow: Overflow = "cut"

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
        if self.overflow not in ("cut", "drop"):
            raise ValueError(f"context overflow must be cut or drop, got {self.overflow!r}")


@dataclass(frozen=True)
class AssembledContext:
    """The prompt for one query. ``chunk_ids`` in presentation order ([1] first) with ``texts`` the text shown for
    each (stripped; shorter than the chunk when cut); ``messages`` ready to send.

    ``considered_ids`` are the top-k kept chunks in rank order before the budget; of those, ``cut_ids`` were shown
    cut and ``dropped_ids`` (``n_over_budget`` of them) not shown at all. ``n_duplicates`` counts the near-copies
    skipped while filling k."""

    messages: tuple[dict[str, str], ...]
    chunk_ids: tuple[str, ...]
    context: str
    context_tokens: int
    n_candidates: int
    n_duplicates: int = 0
    n_over_budget: int = 0
    notes: tuple[str, ...] = field(default=())
    texts: tuple[str, ...] = field(default=())
    considered_ids: tuple[str, ...] = field(default=())
    cut_ids: tuple[str, ...] = field(default=())
    dropped_ids: tuple[str, ...] = field(default=())

    def as_messages(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.messages]


class ChunkTexts:
    """Per-chunk values that context assembly and evidence checks need, computed at most once per chunk id: token
    counts and token offsets under ``tokenizer``, word shingle sets, the Jaccard similarity of a pair, and
    SQuAD-normalised texts.

    One instance serves every query and every config of one chunk table (a chunk id always names the same text
    there), which makes answer-in-context linear in the context size instead of re-tokenising and re-normalising
    the same long chunks for every query. ``token_counts`` seeds the counts (the sweep counts each chunker's chunks
    once per tokenizer).
    """

    def __init__(self, tokenizer: str = "all-MiniLM-L6-v2", shingle_size: int = 5,
                 token_counts: Mapping[str, int] | None = None):
        self.tokenizer, self.shingle_size = tokenizer, shingle_size
        self._tokens: dict[str, int] = dict(token_counts or {})
        self._shingles: dict[str, frozenset] = {}
        self._normalised: dict[str, str] = {}
        self._offsets: dict[str, list[tuple[int, int]]] = {}
        self._jaccard: dict[tuple[str, str], float] = {}

    def tokens(self, chunks: Sequence[tuple[str, str]]) -> list[int]:
        """Token counts of ``(chunk_id, text)`` pairs; the missing ones are counted in one batch."""
        missing = {cid: text for cid, text in chunks if cid not in self._tokens}
        if missing:
            from ragbench.core.models import count_tokens  # lazy: loads a tokenizer

            self._tokens.update(zip(missing, count_tokens(list(missing.values()), self.tokenizer)))
        return [self._tokens[cid] for cid, _ in chunks]

    def shingles(self, chunk_id: str, text: str) -> frozenset:
        s = self._shingles.get(chunk_id)
        if s is None:
            s = self._shingles[chunk_id] = shingles(text, self.shingle_size)
        return s

    def jaccard(self, a: tuple[str, str], b: tuple[str, str]) -> float:
        """:func:`jaccard` of the shingles of two ``(chunk_id, text)`` chunks, memoised per pair."""
        key = (a[0], b[0]) if a[0] <= b[0] else (b[0], a[0])
        j = self._jaccard.get(key)
        if j is None:
            j = self._jaccard[key] = jaccard(self.shingles(*a), self.shingles(*b))
        return j

    def offsets(self, chunk_id: str, text: str) -> list[tuple[int, int]]:
        """Character offsets of the tokens of ``text.strip()`` (what :func:`cut_to_tokens` cuts), memoised."""
        o = self._offsets.get(chunk_id)
        if o is None:
            from ragbench.core.models import load_tokenizer  # lazy: loads a tokenizer

            o = self._offsets[chunk_id] = load_tokenizer(self.tokenizer).encode(
                text.strip(), add_special_tokens=False).offsets
        return o

    def normalised(self, chunk_id: str, text: str) -> str:
        """``normalize_answer(text)`` (:mod:`ragbench.generation.llm.graders`), memoised."""
        n = self._normalised.get(chunk_id)
        if n is None:
            from ragbench.generation.llm.graders import normalize_answer

            n = self._normalised[chunk_id] = normalize_answer(text)
        return n

    def check(self, spec: ContextSpec) -> None:
        if (self.tokenizer, self.shingle_size) != (spec.tokenizer, spec.shingle_size):
            raise ValueError(f"ChunkTexts counts with tokenizer {self.tokenizer!r} (shingles of "
                             f"{self.shingle_size}) but the context spec uses {spec.tokenizer!r} ({spec.shingle_size})")


def shingles(text: str, size: int = 5) -> frozenset[tuple[str, ...]]:
    """Word ``size``-shingles of the lowercased ``\\w+`` words; a shorter text is one shingle."""
    words = _WORD.findall(text.lower())
    if len(words) <= size:
        return frozenset([tuple(words)]) if words else frozenset()
    return frozenset(tuple(words[i:i + size]) for i in range(len(words) - size + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    """|a ∩ b| / |a ∪ b|; 0 for two empty sets."""
    inter = len(a & b) if len(a) <= len(b) else len(b & a)
    union = len(a) + len(b) - inter
    return inter / union if union else 0.0


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


def cut_to_tokens(text: str, n_tokens: int, tokenizer: str,
                  offsets: Sequence[tuple[int, int]] | None = None) -> str:
    """The start of ``text`` holding at most ``n_tokens`` tokens, ending at the end of the last whole word that fits
    (a word split into word pieces is not cut inside; a first word longer than the budget is cut at its tokens).
    ``offsets``: the tokens' character offsets in ``text``, when already known."""
    if n_tokens <= 0:
        return ""
    if offsets is None:
        from ragbench.core.models import load_tokenizer  # lazy: loads a tokenizer

        offsets = load_tokenizer(tokenizer).encode(text, add_special_tokens=False).offsets
    if len(offsets) <= n_tokens:
        return text
    end = offsets[n_tokens - 1][1]
    if end < len(text) and text[end].isalnum() and text[end - 1].isalnum():  # mid-word: back to its start
        space = text.rfind(" ", 0, end)
        end = space if space > 0 else end
    return text[:end].rstrip()


def build_context(question: str, chunks: Sequence[tuple[str, str]], spec: ContextSpec,
                  texts: ChunkTexts | None = None) -> AssembledContext:
    """Assemble the prompt for ``question`` from ``(chunk_id, text)`` pairs given best-first (steps in the module
    docstring). ``texts`` caches per-chunk work across calls; it must use ``spec``'s tokenizer."""
    if not question.strip():
        raise ValueError("empty question")
    if texts is None:
        texts = ChunkTexts(spec.tokenizer, spec.shingle_size)
    texts.check(spec)
    keep: list[int] = []
    n_dup = 0
    for i, chunk in enumerate(chunks):
        if len(keep) == spec.k:
            break
        if spec.dedupe and any(texts.jaccard(chunk, chunks[j]) >= spec.dedupe_threshold for j in keep):
            n_dup += 1
            continue
        keep.append(i)
    shown: list[tuple[int, str]] = []
    cut: list[int] = []
    dropped: list[int] = []
    used = 0
    counts = texts.tokens([chunks[i] for i in keep]) if keep else []
    for i, n in zip(keep, counts):
        text = chunks[i][1].strip()
        if spec.token_budget is None or used + n <= spec.token_budget:
            shown.append((i, text))
            used += n
            continue
        room = spec.token_budget - used
        piece = cut_to_tokens(text, room, spec.tokenizer, texts.offsets(*chunks[i])) \
            if spec.overflow == "cut" else ""
        if piece:
            shown.append((i, piece))
            cut.append(i)
            used = spec.token_budget  # full: later chunks are dropped
        else:
            dropped.append(i)
    presented = order(shown, spec.ordering)
    body = "\n\n".join(f"[{n}] {t}" for n, (_, t) in enumerate(presented, 1))
    notes = ("every retrieved chunk was over the token budget",) if dropped and not shown else ()
    prompt = format_prompt(question.strip(), body, spec.instruction)
    ids = [c[0] for c in chunks]
    return AssembledContext(
        messages=({"role": "user", "content": prompt},), chunk_ids=tuple(ids[i] for i, _ in presented),
        context=body, context_tokens=used, n_candidates=len(chunks), n_duplicates=n_dup,
        n_over_budget=len(dropped), notes=notes, texts=tuple(t for _, t in presented),
        considered_ids=tuple(ids[i] for i in keep), cut_ids=tuple(ids[i] for i in cut),
        dropped_ids=tuple(ids[i] for i in dropped))
