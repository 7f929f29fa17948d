"""Answer graders: SQuAD v1.1 exact match and token F1, containment, abstention, answer-in-context.

Normalisation is the official SQuAD v1.1 ``normalize_answer``: lowercase, delete ASCII punctuation
(``string.punctuation``), replace the articles ``a|an|the`` (whole words) with a space, collapse whitespace.
With ``norm`` = that function and ``tok(s) = norm(s).split()``:

* ``exact_match(pred, golds)``  = max over golds of ``[norm(pred) == norm(gold)]``
* ``token_f1(pred, golds)``     = max over golds of ``2 P R / (P + R)`` with
  ``P = |tok(pred) ∩ tok(gold)| / |tok(pred)|``, ``R = |tok(pred) ∩ tok(gold)| / |tok(gold)|`` (multiset
  intersection; 0 when nothing is shared — the v1.1 script, so an empty prediction scores 0)
* ``contains(pred, golds)``     = any gold whose normalised tokens appear as a contiguous run inside the normalised
  prediction (token-boundary substring, so gold "10m" is not found in "10ms"; a gold that normalises to nothing,
  e.g. "The", never matches)
* ``is_insufficient(pred)``     = the abstention marker ``INSUFFICIENT_CONTEXT`` appears, case-insensitive, with
  ``_``, ``-``, spaces or nothing between the words, anywhere in the reply ("**Insufficient context.**" counts;
  "the context is insufficient" does not — the prompt asks for the literal marker)
* ``answer_in_context(texts, golds)`` = any chunk text ``t`` of the assembled context with ``contains(t, golds)``:
  the DPR-style top-k accuracy, no LLM. Each chunk's *text* is searched on its own, never the numbered prompt, so
  the ``[n]`` labels, separators and instruction are not evidence (gold "5" is not "found" in a label ``[5]``).

Every function taking ``golds`` raises ``ValueError`` on an empty list: unanswerable queries are graded by
:func:`grade` on abstention, never silently scored 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_DROP_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_INSUFFICIENT = re.compile(r"insufficient[\s_\-]*context", re.IGNORECASE)


def normalize_answer(s: str) -> str:
    """The official SQuAD v1.1 normalisation (lower, remove punctuation, remove articles, fix whitespace)."""
    s = s.lower().translate(_DROP_PUNCT)  # = "".join(ch for ch in s if ch not in string.punctuation), faster
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _golds(golds: Sequence[str]) -> list[str]:
    if isinstance(golds, str):
        raise TypeError("golds must be a list of strings, not one string")
    golds = list(golds)
    if not golds:
        raise ValueError("no gold answers to grade against (unanswerable queries are graded on abstention)")
    return golds


def _f1(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(pred: str, golds: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold, else 0.0."""
    return float(max(normalize_answer(pred) == normalize_answer(g) for g in _golds(golds)))


def token_f1(pred: str, golds: Sequence[str]) -> float:
    """SQuAD token F1, max over golds."""
    return max(_f1(pred, g) for g in _golds(golds))


def contains(text: str, golds: Sequence[str]) -> float:
    """1.0 if any normalised gold is a token-contiguous part of the normalised text."""
    hay = f" {normalize_answer(text)} "
    return float(any(n and f" {n} " in hay for n in (normalize_answer(g) for g in _golds(golds))))


def is_insufficient(pred: str) -> bool:
    """The reply contains the abstention marker (INSUFFICIENT_CONTEXT, tolerant to case and separators)."""
    return bool(_INSUFFICIENT.search(pred))


def answer_in_context(texts: Sequence[str] | str, golds: Sequence[str]) -> float:
    """DPR-style top-k accuracy: does one of the context's chunk texts contain a gold answer (normalised,
    token-contiguous)? Pass the chunk texts (``AssembledContext.texts``), not the numbered prompt: labels and
    separators must not count. A single string is one text."""
    texts = [texts] if isinstance(texts, str) else texts
    return contains_normalised([normalize_answer(t) for t in texts], normalised_golds(golds))


def normalised_golds(golds: Sequence[str]) -> list[str]:
    """The non-empty normalised golds (what :func:`contains` looks for); raises on an empty list like it."""
    return [n for n in (normalize_answer(g) for g in _golds(golds)) if n]


def contains_normalised(texts: Sequence[str], golds: Sequence[str]) -> float:
    """:func:`contains` over already-normalised texts and golds (the cached path): 1.0 if any gold is a
    token-contiguous part of any one text."""
    hays = [f" {t} " for t in texts]
    return float(any(f" {g} " in h for g in golds for h in hays))


@dataclass(frozen=True)
class Grade:
    """Scores of one reply. ``correct`` = ``(contains or em) and not insufficient`` for answerable queries
    (SQuAD-style short golds inside a chatty reply still count; EM alone would fail "The answer is 256MiB."; a reply
    that abstains is never correct for them), and ``insufficient`` for unanswerable ones, whose em/f1/contains are
    also 1.0 on abstention and 0.0 otherwise (the SQuAD v2 no-answer convention)."""

    em: float
    f1: float
    contains: float
    insufficient: bool
    correct: bool


def grade(pred: str, golds: Sequence[str]) -> Grade:
    """Grade one reply against its golds; an empty ``golds`` means the query is unanswerable."""
    abstained = is_insufficient(pred)
    if not list(golds):
        v = float(abstained)
        return Grade(v, v, v, abstained, abstained)
    em, f1, c = exact_match(pred, golds), token_f1(pred, golds), contains(pred, golds)
    return Grade(em, f1, c, abstained, bool(em or c) and not abstained)
