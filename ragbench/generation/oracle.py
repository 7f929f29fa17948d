"""The oracle arm's context: each query's gold evidence *in its passage*, bounded by the context's token budget.

The oracle test (:func:`ragbench.generation.answering.oracle_test`) asks whether the reader can answer from the
gold evidence alone. The evidence must be something a reader can use: a bare answer span (``[1] Manning``) is
not — it states nothing about the question — so a reader that cannot answer from it says nothing about retrieval.

Rule (:func:`GoldPassages.for_query`), with ``budget`` the context's ``token_budget`` (None: unbounded):

* **Span labels** (the query has spans with relevance > 0): merged spans are grouped by the *paragraph* holding
  them (a paragraph is a run of text between blank lines; a SQuAD article is its paragraphs joined by blank
  lines). Each group gives one passage: first the *sentences* covering its spans (the smallest unit a reader can
  use), then widened one whole sentence at a time inside the paragraph — the preceding sentence first (it holds
  what "it" and "its" refer to), then the following, alternating — while the total of all passages fits the
  budget; so the whole paragraph when it fits. Groups are taken by relevance, then document and offset; a group
  whose covering sentences no longer fit is left out, and a first group that alone exceeds the budget is cut to
  the budget's tokens centred on its spans.
* **Document labels** (no spans; qrels with relevance > 0): each judged document, by relevance then id, gives one
  passage around its *best-matching sentence* — the first sentence containing a gold answer string, else the
  sentence sharing the most query words (each weighted by ``log(1 + n / df)`` over the document's n sentences;
  ties go to the earlier sentence) — widened sentence by sentence over the whole document in the same way (so the
  whole document when it fits).
* **Unanswerable** queries (no answer strings) get no evidence: the oracle arm then tests abstention.

Tokens are counted with the context tokenizer, per sentence (a passage counts as the sum of its sentences,
which is exact for whitespace-separated sentences under WordPiece tokenizers). Passage ids are
``gold:<doc_id>:<start>-<end>`` in document character offsets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

import polars as pl

from ragbench.chunking.sentences import sentence_spans
from ragbench.core.models import count_tokens, load_tokenizer
from ragbench.data.dataset import Dataset
from ragbench.generation.llm.graders import normalize_answer

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_WORD = re.compile(r"\w+")


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` of the paragraphs of ``text``: runs between blank lines (whitespace-only ones skipped)."""
    out, s = [], 0
    for m in [*_PARAGRAPH_BREAK.finditer(text), None]:
        e = m.start() if m else len(text)
        if text[s:e].strip():
            out.append((s, e))
        s = m.end() if m else s
    return out


class _Unit:
    """A document region cut into sentences with their token counts, and the window [lo, hi] chosen so far."""

    def __init__(self, doc_id: str, text: str, region: tuple[int, int], sents: list[tuple[int, int]],
                 tokens: list[int], lo: int, hi: int):
        self.doc_id, self.text, self.region, self.sents, self.tokens = doc_id, text, region, sents, tokens
        self.lo, self.hi = lo, hi
        self.focus = sents[lo][0], sents[hi][1]  # what must stay in the passage (its spans)
        self.cut: tuple[int, int] | None = None  # a character window when even [lo, hi] exceeded the budget

    @property
    def n_tokens(self) -> int:
        return sum(self.tokens[self.lo:self.hi + 1])

    def span(self) -> tuple[int, int]:
        return self.cut or (self.sents[self.lo][0], self.sents[self.hi][1])


class GoldPassages:
    """Builds oracle passages for the queries of one dataset (module docstring: the rule)."""

    def __init__(self, dataset: Dataset, token_budget: int | None, tokenizer: str = "all-MiniLM-L6-v2"):
        from ragbench.evaluation.spans import merge_spans

        self.budget, self.tokenizer = token_budget, tokenizer
        self.texts = dict(zip(dataset.corpus["doc_id"].to_list(), dataset.corpus["text"].to_list()))
        sp = dataset.spans.filter(pl.col("relevance") > 0)
        sp = merge_spans(sp).sort(["query_id", "relevance", "doc_id", "start"],
                                  descending=[False, True, False, False]) if sp.height else sp
        self.spans: dict[str, list[tuple[str, int, int]]] = {}
        for q, d, s, e in sp.select("query_id", "doc_id", "start", "end").iter_rows():
            self.spans.setdefault(q, []).append((d, s, e))
        qr = dataset.qrels.filter(pl.col("relevance") > 0).sort(["query_id", "relevance", "doc_id"],
                                                                 descending=[False, True, False])
        self.docs: dict[str, list[str]] = {}
        for q, d in qr.select("query_id", "doc_id").iter_rows():
            self.docs.setdefault(q, []).append(d)
        self._sentences: dict[tuple[str, int, int], tuple[list[tuple[int, int]], list[int]]] = {}

    # ------------------------------------------------------------ public
    def for_query(self, query_id: str, question: str, answers: Sequence[str]) -> list[tuple[str, str]]:
        """``(passage_id, text)`` of the query's oracle passages, in evidence order ([] when unanswerable)."""
        if not answers:
            return []
        if query_id in self.spans:
            units = self._span_units(self.spans[query_id])
        else:
            units = [self._document_unit(d, question, answers) for d in self.docs.get(query_id, [])]
        units = self._fit(units)
        out = []
        for u in units:
            s, e = u.span()
            out.append((f"gold:{u.doc_id}:{s}-{e}", self.texts[u.doc_id][s:e]))
        return out

    # ------------------------------------------------------------ units
    def _region(self, doc_id: str, start: int, end: int) -> tuple[list[tuple[int, int]], list[int]]:
        """Sentences of ``doc[start:end]`` in document offsets, and their token counts (memoised)."""
        key = (doc_id, start, end)
        if key not in self._sentences:
            text = self.texts[doc_id]
            sents = [(start + s, start + e) for s, e in sentence_spans(text[start:end])] or [(start, end)]
            self._sentences[key] = sents, count_tokens([text[s:e] for s, e in sents], self.tokenizer)
        return self._sentences[key]

    def _span_units(self, spans: list[tuple[str, int, int]]) -> list[_Unit]:
        groups: dict[tuple[str, int, int], list[tuple[int, int]]] = {}
        for d, s, e in spans:
            para = next(((ps, pe) for ps, pe in paragraph_spans(self.texts[d]) if ps <= s < pe),
                        (0, len(self.texts[d])))
            groups.setdefault((d, *para), []).append((s, e))
        units = []
        for (d, ps, pe), members in groups.items():
            sents, tokens = self._region(d, ps, pe)
            lo_c, hi_c = min(s for s, _ in members), max(e for _, e in members)
            hit = [i for i, (s, e) in enumerate(sents) if s < hi_c and lo_c < e] or [0]
            u = _Unit(d, self.texts[d], (ps, pe), sents, tokens, hit[0], hit[-1])
            u.focus = lo_c, hi_c
            units.append(u)
        return units

    def _document_unit(self, doc_id: str, question: str, answers: Sequence[str]) -> _Unit:
        text = self.texts[doc_id]
        sents, tokens = self._region(doc_id, 0, len(text))
        norm = [normalize_answer(text[s:e]) for s, e in sents]
        golds = [g for g in (normalize_answer(a) for a in answers) if g]
        best = next((i for i, n in enumerate(norm) if any(f" {g} " in f" {n} " for g in golds)), None)
        if best is None:
            words = [set(_WORD.findall(n)) for n in norm]
            df: dict[str, int] = {}
            for ws in words:
                for w in ws:
                    df[w] = df.get(w, 0) + 1
            q = set(_WORD.findall(normalize_answer(question)))
            score = [sum(math.log(1 + len(sents) / df[w]) for w in q & ws) for ws in words]
            best = max(range(len(sents)), key=lambda i: (score[i], -i))
        return _Unit(doc_id, text, (0, len(text)), sents, tokens, best, best)

    # ------------------------------------------------------------ the budget
    def _fit(self, units: list[_Unit]) -> list[_Unit]:
        """Keep the units whose minimal window fits, then widen them in order while the total fits."""
        if self.budget is None:  # the whole paragraph, or the judged document as it is
            for u in units:
                u.cut = u.region
            return units
        kept: list[_Unit] = []
        total = 0
        for u in units:
            n = u.n_tokens
            if total + n <= self.budget:
                kept.append(u)
                total += n
            elif not kept:  # even the first passage's sentences are too long: a window of the budget's tokens
                u.cut = self._window(u, self.budget)
                return [u]
        for u in kept:
            grow_left = True
            while True:
                options = [("lo", u.lo - 1), ("hi", u.hi + 1)] if grow_left else [("hi", u.hi + 1), ("lo", u.lo - 1)]
                for side, i in options:
                    if 0 <= i < len(u.sents) and total + u.tokens[i] <= self.budget:
                        setattr(u, side, i)
                        total += u.tokens[i]
                        grow_left = side == "hi"  # alternate sides
                        break
                else:
                    break
        return kept

    def _window(self, u: _Unit, budget: int) -> tuple[int, int]:
        """A character window of at most ``budget`` tokens of the unit's sentences, centred on its focus."""
        start, end = u.sents[u.lo][0], u.sents[u.hi][1]
        offsets = _offsets(u.text[start:end], self.tokenizer)
        f_lo, f_hi = u.focus[0] - start, u.focus[1] - start
        inside = [i for i, (s, e) in enumerate(offsets) if s < f_hi and f_lo < e] or [0]
        mid = (inside[0] + inside[-1]) // 2
        first = max(0, min(mid - budget // 2, len(offsets) - budget))
        last = min(len(offsets), first + budget) - 1
        return start + offsets[first][0], start + offsets[last][1]


@lru_cache(maxsize=256)
def _offsets(text: str, tokenizer: str) -> tuple[tuple[int, int], ...]:
    return tuple(load_tokenizer(tokenizer).encode(text, add_special_tokens=False).offsets)
