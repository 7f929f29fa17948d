"""What a question's row says answers it, and where those strings occur.

:func:`answer_strings` gathers a query's answer strings from a loaded :class:`~ragbench.data.dataset.Dataset`: the
``answers`` of its query row (a questions file's ``answer`` column, BEIR's ``metadata.answers``, SQuAD's answer
texts) followed by the text of each of its evidence spans (a folder row's located ``quote``, a SQuAD answer, a BEIR
span), in that order, each once. :func:`answers_found` says which of them occur in a text, found as the quote
locator finds quotes (:mod:`ragbench.data.quotes`: both sides normalised, quotation marks around an answer dropped,
matches on word boundaries), so an answer found here is one the loader would have located there.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from ragbench.data.dataset import Dataset
from ragbench.data.quotes import QUOTE_MARKS, find_all, normalize

# the last dataset's table: a pool asks for every query of one dataset in turn
_CACHE: list = [None, {}]


def all_answer_strings(dataset: Dataset) -> dict[str, tuple[str, ...]]:
    """``query_id -> answer strings`` for every query of ``dataset`` (see :func:`answer_strings`)."""
    if _CACHE[0] is dataset:
        return _CACHE[1]
    out: dict[str, list[str]] = {}
    seen: dict[str, set[str]] = {}

    def add(qid: str, text: str | None) -> None:
        if not text or not text.strip():
            return
        key = normalize(text.strip(QUOTE_MARKS))[0]
        if key and key not in seen.setdefault(qid, set()):
            seen[qid].add(key)
            out.setdefault(qid, []).append(text.strip())

    for qid, answers in dataset.queries.select("query_id", "answers").iter_rows():
        for a in answers or []:
            add(qid, a)
    if dataset.spans.height:
        texts = dict(dataset.corpus.select("doc_id", "text").iter_rows())
        for qid, doc, start, end in dataset.spans.sort(["query_id", "doc_id", "start"]).select(
                "query_id", "doc_id", "start", "end").iter_rows():
            if doc in texts:
                add(qid, texts[doc][start:end])
    table = {q: tuple(v) for q, v in out.items()}
    _CACHE[:] = [dataset, table]
    return table


def answer_strings(dataset: Dataset, query_id: str) -> tuple[str, ...]:
    """The strings that answer ``query_id`` by its row: the query's ``answers`` then its evidence spans' texts
    (duplicates, compared normalised, kept once); ``()`` for a query with neither (document labels only)."""
    return all_answer_strings(dataset).get(str(query_id), ())


def answers_found(text: str, answers: Iterable[str]) -> list[str]:
    """The ``answers`` that occur in ``text`` (in the order given), matched as the quote locator matches a quote:
    :func:`~ragbench.data.quotes.normalize` on both sides (case, whitespace runs, typographic quotes and dashes,
    Markdown marks), quotation marks around an answer dropped, start and end on word boundaries."""
    haystack = normalize(text or "")[0]
    found = []
    for a in answers:
        needle = normalize(str(a).strip(QUOTE_MARKS))[0]
        if needle and needle in haystack and find_all(haystack, needle):
            found.append(a)
    return found


def answers_frame(dataset: Dataset) -> pl.DataFrame:
    """``query_id, answer`` rows: :func:`all_answer_strings` as a table (one row per answer string)."""
    rows = [(q, a) for q, answers in all_answer_strings(dataset).items() for a in answers]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "answer": pl.String}, orient="row")
