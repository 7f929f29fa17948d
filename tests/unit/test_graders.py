"""Graders against the official SQuAD v1.1 evaluation script's behaviour, on hand-made cases.

Expected values are worked out by hand from the script's ``normalize_answer`` (lower -> remove punctuation ->
remove articles -> fix whitespace), ``exact_match_score``, ``f1_score`` and ``metric_max_over_ground_truths``.
"""

from __future__ import annotations

import pytest

from ragbench.generation.llm.graders import (
    answer_in_context,
    contains,
    exact_match,
    grade,
    is_insufficient,
    normalize_answer,
    token_f1,
)


@pytest.mark.parametrize("raw, norm", [
    ("The Cat!", "cat"),
    ("  An  apple,  a day ", "apple day"),
    ("the theory of the THE", "theory of"),          # articles are whole words: "theory" keeps its "the"
    ("Denver Broncos.", "denver broncos"),
    ("U.S.-based", "usbased"),                        # punctuation is deleted, not replaced by a space
    ("`queue.max_batch_bytes`", "queuemaxbatchbytes"),
    # punctuation goes BEFORE articles: "a-n" -> "an", an article, removed; "aan" is not an article
    ("Aan a-n", "aan"),
    ("", ""),
])
def test_normalize_answer_matches_squad_order(raw, norm):
    assert normalize_answer(raw) == norm


def test_exact_match_is_max_over_golds():
    assert exact_match("The Cat!", ["cat"]) == 1.0
    assert exact_match("a cat", ["dog", "the cat"]) == 1.0
    assert exact_match("cats", ["cat"]) == 0.0
    assert exact_match("", ["cat"]) == 0.0


def test_token_f1_hand_computed():
    # pred "the quick brown fox" -> [quick, brown, fox]; gold "quick fox jumps" -> [quick, fox, jumps]
    # common = 2, P = 2/3, R = 2/3, F1 = 2/3
    assert token_f1("the quick brown fox", ["quick fox jumps"]) == pytest.approx(2 / 3)
    # multiset intersection: "dog dog cat" vs "dog cat cat": common = min counts = 1 + 1 = 2; P = R = 2/3
    assert token_f1("dog dog cat", ["dog cat cat"]) == pytest.approx(2 / 3)
    # P = 1/1, R = 1/4 -> F1 = 2 * 1 * 0.25 / 1.25 = 0.4
    assert token_f1("Broncos", ["Denver Broncos won it"]) == pytest.approx(0.4)
    # max over golds: 0 vs 1
    assert token_f1("256MiB", ["10m", "256 MiB", "256MiB"]) == 1.0
    # nothing shared (and empty prediction) -> 0, as in the v1.1 script
    assert token_f1("horse", ["cat"]) == 0.0
    assert token_f1("", ["cat"]) == 0.0
    # a prediction made only of articles/punctuation normalises to nothing -> 0
    assert token_f1("The!", ["the"]) == 0.0


def test_contains_is_token_contiguous_after_normalisation():
    assert contains("The default is 256MiB.", ["256MiB"]) == 1.0
    assert contains("It is larger than `queue.max_message_bytes`", ["larger than `queue.max_message_bytes`"]) == 1.0
    assert contains("wait 10ms", ["10m"]) == 0.0                    # token boundary, not raw substring
    assert contains("fox brown quick", ["quick brown fox"]) == 0.0  # order matters
    assert contains("anything", ["The"]) == 0.0                      # gold normalising to nothing never matches
    assert contains("Run NIMBUSCTL node list now", ["x", "nimbusctl node list"]) == 1.0


def test_insufficient_context_detection_is_tolerant():
    for reply in ["INSUFFICIENT_CONTEXT", "insufficient_context.", "**Insufficient Context**",
                  "Answer: INSUFFICIENT-CONTEXT", "I'm sorry. INSUFFICIENT CONTEXT", "insufficientcontext"]:
        assert is_insufficient(reply), reply
    for reply in ["The context is insufficient.", "256MiB", "", "sufficient context"]:
        assert not is_insufficient(reply), reply


def test_answer_in_context():
    ctx = "[1] The default value is 256MiB.\n\n[2] Compaction runs nightly."
    assert answer_in_context(ctx, ["256 MiB", "256MiB"]) == 1.0
    assert answer_in_context(ctx, ["512MiB"]) == 0.0


def test_empty_golds_are_refused_not_scored():
    for fn in (exact_match, token_f1, contains):
        with pytest.raises(ValueError, match="no gold answers"):
            fn("x", [])
    with pytest.raises(TypeError, match="list of strings"):
        exact_match("cat", "cat")


def test_grade_answerable_and_unanswerable():
    g = grade("The answer is 256MiB.", ["256MiB"])
    assert (g.em, g.contains, g.correct, g.insufficient) == (0.0, 1.0, True, False)
    assert g.f1 == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))  # pred [answer, is, 256mib]: P=1/3, R=1 -> 0.5
    assert grade("256MiB", ["256MiB"]).em == 1.0
    wrong = grade("INSUFFICIENT_CONTEXT", ["256MiB"])
    assert not wrong.correct and wrong.insufficient and wrong.em == 0.0
    # an abstaining reply is never correct for an answerable query, even if it also names the answer
    assert not grade("256MiB? INSUFFICIENT_CONTEXT", ["256MiB"]).correct
    # unanswerable: correct iff it abstains; scores follow the SQuAD v2 no-answer convention
    ok = grade("insufficient context", [])
    assert ok.correct and (ok.em, ok.f1, ok.contains) == (1.0, 1.0, 1.0)
    bad = grade("It costs $500 a month.", [])
    assert not bad.correct and (bad.em, bad.f1, bad.contains) == (0.0, 0.0, 0.0)


def test_answer_in_context_reads_chunk_texts_not_labels():
    texts = ["The canal has locks.", "It was built long ago.", "A", "B", "Five keepers live there."]
    numbered = "\n\n".join(f"[{n}] {t}" for n, t in enumerate(texts, 1))
    assert contains(numbered, ["5"]) == 1.0                    # the label [5] would "contain" the answer
    assert answer_in_context(texts, ["5"]) == 0.0              # chunk texts only: it does not
    assert answer_in_context(texts + ["The canal has 5 locks."], ["5"]) == 1.0
    assert answer_in_context(["an answer split", "across chunks"], ["split across"]) == 0.0  # each text on its own
