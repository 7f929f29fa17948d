"""Context assembly on hand-made chunks: numbering, ordering, near-duplicate removal, token budget."""

from __future__ import annotations

import pytest

from ragbench.core.models import count_tokens
from ragbench.generation.llm.context import (
    DEFAULT_INSTRUCTION,
    ContextSpec,
    build_context,
    dedupe,
    jaccard,
    order,
    shingles,
)

# five words of common English = five WordPiece tokens of all-MiniLM-L6-v2 (checked in the first test)
C = [("c1", "one two three four five"), ("c2", "red green blue black white"), ("c3", "cat dog cow pig hen"),
     ("c4", "north south east west up"), ("c5", "monday tuesday friday sunday june")]


def test_token_counts_of_the_fixture():
    assert count_tokens([t for _, t in C], "all-MiniLM-L6-v2") == [5, 5, 5, 5, 5]


def test_token_counts_across_encode_batches(monkeypatch):
    """count_tokens encodes in batches (bounded memory): every text is counted once, in order, across batches."""
    from ragbench.core import models

    texts = [t for _, t in C] + ["one", "one two", "", "red green blue"]
    monkeypatch.setattr(models, "COUNT_BATCH", 3)
    assert count_tokens(texts, "all-MiniLM-L6-v2") == [5, 5, 5, 5, 5, 1, 2, 0, 3]


def test_numbering_and_prompt_layout():
    ctx = build_context("  What colour?  ", C[:2], ContextSpec(k=5, token_budget=None))
    assert ctx.context == "[1] one two three four five\n\n[2] red green blue black white"
    assert ctx.chunk_ids == ("c1", "c2")
    assert ctx.context_tokens == 10
    (msg,) = ctx.messages
    assert msg["role"] == "user"
    assert msg["content"] == f"{DEFAULT_INSTRUCTION}\n\nContext:\n{ctx.context}\n\nQuestion: What colour?\nAnswer:"
    assert ctx.as_messages() == [msg] and ctx.as_messages()[0] is not msg   # a copy to send


def test_orderings():
    assert order([1, 2, 3, 4, 5], "score") == [1, 2, 3, 4, 5]
    assert order([1, 2, 3, 4, 5], "best_last") == [5, 4, 3, 2, 1]
    # best at both edges, weakest in the middle
    assert order([1, 2, 3, 4, 5], "edges") == [1, 3, 5, 4, 2]
    assert order([1, 2, 3, 4], "edges") == [1, 3, 4, 2]
    assert order([1], "edges") == [1]
    ctx = build_context("q", C, ContextSpec(k=5, ordering="edges", token_budget=None))
    assert ctx.chunk_ids == ("c1", "c3", "c5", "c4", "c2")
    assert ctx.context.startswith("[1] one two") and ctx.context.endswith("[5] red green blue black white")
    assert build_context("q", C, ContextSpec(k=3, ordering="best_last", token_budget=None)).chunk_ids == \
        ("c3", "c2", "c1")


def test_shingles_and_jaccard():
    assert shingles("A b c d e f", 5) == frozenset({("a", "b", "c", "d", "e"), ("b", "c", "d", "e", "f")})
    assert shingles("Too short!", 5) == frozenset({("too", "short")})
    assert shingles("", 5) == frozenset()
    assert jaccard(frozenset({1, 2, 3}), frozenset({2, 3, 4})) == pytest.approx(2 / 4)
    assert jaccard(frozenset(), frozenset()) == 0.0


def test_near_duplicates_are_dropped_keeping_the_higher_ranked():
    base = " ".join(f"w{i}" for i in range(20))                  # 16 shingles
    near = base + " w20"                                          # 17 shingles, 16 shared: J = 16/17 = 0.94
    half = " ".join(f"w{i}" for i in range(10, 30))               # shares w10..w19: 6 shingles of 16+16-6=26 -> 0.23
    assert dedupe([base, near, half], 0.8) == [0, 2]
    assert dedupe([base, near, half], 0.95) == [0, 1, 2]          # 0.94 < 0.95: kept
    chunks = [("a", base), ("b", near), ("c", half)]
    ctx = build_context("q", chunks, ContextSpec(k=2, token_budget=None))
    assert ctx.chunk_ids == ("a", "c") and ctx.n_duplicates == 1  # dedupe happens before top-k, so k is filled
    assert build_context("q", chunks, ContextSpec(k=2, dedupe=False, token_budget=None)).chunk_ids == ("a", "b")


def test_budget_cuts_the_overflowing_chunk_to_fit_then_stops():
    ctx = build_context("q", C, ContextSpec(k=5, token_budget=12))   # 5 + 5 fit; c3 is cut to the 2 tokens left
    assert ctx.chunk_ids == ("c1", "c2", "c3") and ctx.texts[2] == "cat dog" and ctx.context_tokens == 12
    assert ctx.cut_ids == ("c3",) and ctx.dropped_ids == ("c4", "c5") and ctx.n_over_budget == 2
    assert ctx.considered_ids == ("c1", "c2", "c3", "c4", "c5")
    assert ctx.context.endswith("[3] cat dog")
    exact = build_context("q", C, ContextSpec(k=5, token_budget=15))
    assert exact.chunk_ids == ("c1", "c2", "c3") and exact.cut_ids == () and exact.n_over_budget == 2
    # a first chunk longer than the whole budget (a whole article) is cut, not dropped: the context is never empty
    long = [("article", "one two three four five six seven eight nine ten"), ("small", "cat")]
    ctx = build_context("q", long, ContextSpec(k=5, token_budget=6))
    assert ctx.chunk_ids == ("article",) and ctx.texts == ("one two three four five six",)
    assert ctx.dropped_ids == ("small",) and not ctx.notes
    # budget is applied in rank order, then the survivors are reordered for presentation
    assert build_context("q", C, ContextSpec(k=5, token_budget=15, ordering="best_last")).chunk_ids == \
        ("c3", "c2", "c1")


def test_cut_never_splits_a_word_into_pieces():
    # "unbelievably" is 5 word pieces: a budget ending inside it backs off to the previous word
    ctx = build_context("q", [("a", "green unbelievably tall trees")], ContextSpec(k=1, token_budget=3))
    assert ctx.texts == ("green",) and ctx.cut_ids == ("a",)


def test_drop_mode_skips_the_overflowing_chunk_and_tries_the_next():
    mixed = [("big", "one two three four five six seven eight nine ten"), ("small", "cat"), ("c1", C[0][1])]
    ctx = build_context("q", mixed, ContextSpec(k=5, token_budget=6, overflow="drop"))
    assert ctx.chunk_ids == ("small", "c1") and ctx.dropped_ids == ("big",) and ctx.cut_ids == ()
    assert ctx.context_tokens == 6 and ctx.n_over_budget == 1
    only_big = build_context("q", mixed[:1], ContextSpec(k=5, token_budget=6, overflow="drop"))
    assert only_big.chunk_ids == () and only_big.context == "" and only_big.notes   # said, not silent
    with pytest.raises(ValueError, match="overflow"):
        ContextSpec(overflow="truncate")


def test_k_and_custom_instruction():
    ctx = build_context("Who?", C, ContextSpec(k=1, token_budget=None, instruction="Be brief."))
    assert ctx.chunk_ids == ("c1",) and ctx.n_candidates == 5
    assert ctx.messages[0]["content"].startswith("Be brief.\n\nContext:\n[1] one two three four five")


def test_bad_specs_and_inputs_are_refused():
    with pytest.raises(ValueError, match="k must be >= 1"):
        ContextSpec(k=0)
    with pytest.raises(ValueError, match="ordering"):
        ContextSpec(ordering="random")
    with pytest.raises(ValueError, match="dedupe_threshold"):
        ContextSpec(dedupe_threshold=0)
    with pytest.raises(ValueError, match="token_budget"):
        ContextSpec(token_budget=0)
    with pytest.raises(ValueError, match="empty question"):
        build_context("  ", C, ContextSpec())
