"""The end-to-end diagnosis on long SQuAD-style articles (tests/fixtures/squad_long.json, 600-660 MiniLM tokens
each): the oracle arm gets gold passages a reader can use, the budget cuts long chunks and gets its own verdict,
and answer-in-context reads chunk text only.

The reader is a deterministic stub standing in for a strong reader: it knows the gold answers and replies with
one exactly when the context holds it in a passage about the question — the sentence holding the answer, or a
neighbour in the same chunk, shares a word with the question — else it abstains. Like a real reader, it needs the
words around an answer: a bare answer span is not enough.
"""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl
import pytest
from conftest import ROOT

from ragbench.chunking import chunk_corpus
from ragbench.config import BM25Retriever, DatasetSpec, SentenceChunker, WholeDocChunker
from ragbench.core.models import count_tokens
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.generation.answering import (
    CONTEXT_BUDGET,
    GENERATION_BUG,
    PASS,
    Retrieved,
    context_hits,
    gold_evidence,
    oracle_test,
)
from ragbench.generation.llm.client import Completion
from ragbench.generation.llm.context import ChunkTexts, ContextSpec, build_context
from ragbench.generation.llm.graders import answer_in_context, contains, grade
from ragbench.generation.oracle import GoldPassages, paragraph_spans
from ragbench.generation.spec import GenerationSpec
from ragbench.generation.stage import answer_in_context_metrics
from ragbench.retrieval import BM25Index, run_from_hits

LONG = ROOT / "tests" / "fixtures" / "squad_long.json"
TOK = "all-MiniLM-L6-v2"
_STOP = {"the", "a", "an", "of", "to", "in", "on", "was", "is", "what", "which", "who", "where", "when", "how",
         "does", "did", "do", "for", "many", "much", "have", "its", "by", "from", "with", "and", "that", "at"}


def _stems(text: str) -> set[str]:
    return {w[:5] for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP}


class StrongReader:
    """A stub chat client (module docstring): right when the answer is in context with words of the question."""

    def __init__(self, dataset):
        self.golds = {r["text"]: r["answers"] for r in dataset.queries.iter_rows(named=True)}
        self.prompts: list[str] = []

    def complete_many(self, batch, progress=None):
        return [self._reply(m[-1]["content"]) for m in batch]

    def _reply(self, prompt: str) -> Completion:
        self.prompts.append(prompt)
        context = prompt.split("Context:\n", 1)[1].rsplit("\n\nQuestion: ", 1)[0]
        question = prompt.rsplit("Question: ", 1)[1].rsplit("\nAnswer:", 1)[0]
        q = _stems(question)
        text = "INSUFFICIENT_CONTEXT"
        for chunk in (re.sub(r"^\[\d+\] ", "", c) for c in context.split("\n\n") if c.strip()):
            sents = re.split(r"(?<=[.!?])\s+", chunk)
            for i, sent in enumerate(sents):
                gold = next((g for g in self.golds.get(question, []) if contains(sent, [g])), None)
                if gold and any(q & _stems(n) for n in sents[max(0, i - 1):i + 2]):
                    text = f"The answer is {gold}."
        return Completion(text, "stop", None, None, False, 0.0)


@pytest.fixture(scope="module")
def long_ds():
    return load_dataset(DatasetSpec(path=LONG, format="squad", squad_documents="article", queries="all"))


def _bm25(ds, chunker):
    chunks = chunk_corpus(ds, chunker)
    hits = BM25Index(BM25Retriever(), index_texts(chunks).to_list()).search(ds.queries["text"].to_list(), depth=20)
    return chunks, run_from_hits(ds.queries["query_id"].to_list(), chunks, hits.ids, hits.scores)


def _handmade_run(query_id: str, chunk_ids: list[str], chunks: pl.DataFrame) -> pl.DataFrame:
    doc = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    return pl.DataFrame({"query_id": [query_id] * len(chunk_ids), "rank": list(range(1, len(chunk_ids) + 1)),
                         "chunk_id": chunk_ids, "doc_id": [doc[c] for c in chunk_ids],
                         "score": [float(-i) for i in range(len(chunk_ids))]},
                        schema={"query_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String, "doc_id": pl.String,
                                "score": pl.Float64})


def _one(ds, query_id):
    return replace(ds, queries=ds.queries.filter(pl.col("query_id") == query_id))


def test_the_articles_are_long(long_ds):
    tokens = count_tokens(long_ds.corpus["text"].to_list(), TOK)
    assert len(tokens) == 5 and min(tokens) > 2 * 256   # every article is over twice MiniLM's window


# ---------------------------------------------------------------- 1. the oracle is an oracle
def test_span_oracle_is_the_paragraph_holding_the_span_bounded_by_the_budget(long_ds):
    text = dict(zip(long_ds.corpus["doc_id"], long_ds.corpus["text"]))["kessler-reservoir"]
    paragraphs = [text[s:e] for s, e in paragraph_spans(text)]
    canal = next(p for p in paragraphs if "5 locks" in p)
    # unbounded, or a budget the paragraph fits: the whole paragraph, never the bare answer "5"
    for budget in (None, 400, 60):
        (pid, passage), = gold_evidence(long_ds, "sl-004", budget, TOK)
        assert passage == canal and pid.startswith("gold:kessler-reservoir:")
    # a tighter budget: the sentence holding the span, widened by whole sentences while it fits
    (_, passage), = gold_evidence(long_ds, "sl-004", 40, TOK)
    assert "the canal has 5 locks in total." in passage and passage in canal and passage != canal
    assert count_tokens([passage], TOK)[0] <= 40 and passage.endswith(".")
    # tighter than the sentence itself: a token window centred on the span
    (_, passage), = gold_evidence(long_ds, "sl-004", 8, TOK)
    assert " 5 " in f" {passage} " and count_tokens([passage], TOK)[0] <= 8
    assert gold_evidence(long_ds, "no-such-query") == []


def test_document_oracle_is_the_judged_document_cut_around_the_best_sentence(long_ds):
    docs = replace(long_ds, spans=long_ds.spans.clear())           # SciFact-style: document labels only
    article = dict(zip(docs.corpus["doc_id"], docs.corpus["text"]))["kessler-reservoir"]
    (pid, whole), = gold_evidence(docs, "sl-005", None, TOK)
    assert whole == article and pid == f"gold:kessler-reservoir:0-{len(article)}"
    (_, passage), = gold_evidence(docs, "sl-005", 80, TOK)            # the answer sits in the last paragraph
    assert "brown trout" in passage and passage in article and count_tokens([passage], TOK)[0] <= 80
    # no answer string in any sentence: the sentence sharing the most (rare) query words
    gp = GoldPassages(docs, 40, TOK)
    (_, passage), = gp.for_query("sl-004", "How many locks does the canal below the reservoir have?", ["zzz"])
    assert "locks" in passage
    assert gp.for_query("sl-004", "anything", []) == []                 # unanswerable: no evidence


@pytest.mark.parametrize("labels", ["spans", "documents"])
def test_oracle_arm_of_a_reader_is_right_far_more_often_than_the_retrieval_arm(long_ds, labels):
    ds = long_ds if labels == "spans" else replace(long_ds, spans=long_ds.spans.clear())
    chunks, run = _bm25(ds, WholeDocChunker())
    spec = ContextSpec(k=2, token_budget=150)
    reader = StrongReader(ds)
    oracle = oracle_test(Retrieved(ds, run, chunks), reader, spec, pool_depth=5)
    n, a, b = oracle.height, int(oracle["a_correct"].sum()), int(oracle["b_correct"].sum())
    assert n == 26 and b >= 0.9 * n and b - a >= 0.3 * n, (a, b)
    assert (oracle["n_gold_passages"] >= 1).all()
    assert not (oracle["verdict"] == GENERATION_BUG).any()       # the reader can use what the oracle gives it
    # whole articles cut to 150 tokens: the misses are the budget's, not retrieval's (BM25 ranks the article first)
    assert (oracle["verdict"] == CONTEXT_BUDGET).sum() >= (n - a) // 2
    # the old oracle (the bare answer span as the whole context) is useless to the same reader
    bare = [reader._reply(build_context(q, [("gold", t)], ContextSpec(k=1, token_budget=None)).messages[0]["content"])
            for q, t in [("Who led the construction of the Kessler dam?", "Miriam Teague"),
                         ("In what year was the Kessler Reservoir created?", "1911"),
                         ("How many locks does the canal below the reservoir have?", "5")]]
    assert [grade(c.text, ["x"]).insufficient for c in bare] == [True, True, True]


# ---------------------------------------------------------------- 2. budget-aware verdicts
def test_a_long_top_article_is_cut_and_its_lost_answer_is_a_budget_verdict(long_ds):
    chunks, _ = _bm25(long_ds, WholeDocChunker())
    ids = dict(zip(chunks["doc_id"], chunks["chunk_id"]))
    reader = StrongReader(long_ds)
    spec = ContextSpec(k=2, token_budget=300)
    # the right article ranked first, but its answer (last paragraph) lies beyond the budget: not a ranking miss
    late = oracle_test(Retrieved(_one(long_ds, "sl-005"), _handmade_run("sl-005", [ids["kessler-reservoir"]], chunks),
                       chunks), reader, spec, pool_depth=2).row(0, named=True)
    assert late["gold_lost_to_budget"] and not late["gold_in_context"] and late["verdict"] == CONTEXT_BUDGET
    # the same article answers an early question from the part that was kept
    early = oracle_test(Retrieved(_one(long_ds, "sl-001"), _handmade_run("sl-001", [ids["kessler-reservoir"]], chunks),
                        chunks), reader, spec, pool_depth=2).row(0, named=True)
    assert early["gold_in_context"] and not early["gold_lost_to_budget"] and early["verdict"] == PASS
    # the right article ranked second behind a long one that fills the budget: dropped, a budget verdict too
    second = _handmade_run("sl-010", [ids["kessler-reservoir"], ids["order-of-the-lantern"]], chunks)
    row = oracle_test(Retrieved(_one(long_ds, "sl-010"), second, chunks), reader, spec, pool_depth=2).row(0, named=True)
    assert row["gold_lost_to_budget"] and row["verdict"] == CONTEXT_BUDGET
    hits = context_hits(Retrieved(_one(long_ds, "sl-010"), second, chunks), spec).row(0, named=True)
    assert (hits["n_chunks"], hits["budget_cut"], hits["budget_dropped"]) == (1, 1, 1) and hits["gold_lost_to_budget"]


def test_drop_mode_empties_contexts_and_they_are_counted(long_ds):
    chunks, run = _bm25(long_ds, WholeDocChunker())
    drop = GenerationSpec(context={"k": 2, "token_budget": 300, "overflow": "drop"})
    m = answer_in_context_metrics(long_ds, run, chunks, drop)
    assert m["empty_contexts@2"] == 26                          # every article is longer than 300 tokens
    assert m["answer_in_context@2"] == 0 and m["gold_lost_to_budget@2"] > 0.9
    cut = answer_in_context_metrics(long_ds, run, chunks, GenerationSpec(context={"k": 2, "token_budget": 300}))
    assert cut["empty_contexts@2"] == 0 and 0 < cut["answer_in_context@2"] < 1
    assert cut["gold_lost_to_budget@2"] == pytest.approx(1 - cut["answer_in_context@2"], abs=0.1)


# ---------------------------------------------------------------- 3. answer-in-context reads chunk text only
def test_a_chunk_label_is_not_evidence(long_ds):
    chunks, _ = _bm25(long_ds, SentenceChunker(window=2))
    others = chunks.filter(pl.col("doc_id") != "kessler-reservoir")["chunk_id"].head(5).to_list()
    run = _handmade_run("sl-004", others, chunks)                # gold "5"; five chunks, the last labelled [5]
    ds = _one(long_ds, "sl-004")
    spec = ContextSpec(k=5, token_budget=None)
    hit = context_hits(Retrieved(ds, run, chunks), spec).row(0, named=True)
    assert hit["n_chunks"] == 5 and hit["answer_in_context"] == 0.0
    texts = dict(zip(chunks["chunk_id"], chunks["text"]))
    ctx = build_context("q", [(c, texts[c]) for c in others], spec)
    assert "[5] " in ctx.context and answer_in_context(ctx.texts, ["5"]) == 0.0
    oracle = oracle_test(Retrieved(ds, run, chunks), StrongReader(long_ds), spec, pool_depth=5).row(0, named=True)
    assert not oracle["gold_in_context"] and oracle["answer_in_context"] == 0.0
    # positive control: the chunk that does say "5 locks" at rank 5 is found
    canal = chunks.filter(pl.col("text").str.contains("5 locks"))["chunk_id"][0]
    found = context_hits(Retrieved(ds, _handmade_run("sl-004", others[:4] + [canal], chunks), chunks), spec)
    assert found["answer_in_context"][0] == 1.0


def test_per_chunk_work_is_shared_across_calls(long_ds):
    chunks, run = _bm25(long_ds, SentenceChunker(window=2))
    spec = ContextSpec(k=3, token_budget=200)
    texts = ChunkTexts(TOK)
    first = context_hits(Retrieved(long_ds, run, chunks), spec, texts=texts)
    counted, normalised = len(texts._tokens), len(texts._normalised)
    assert 0 < counted <= chunks.height and normalised > 0
    again = context_hits(Retrieved(long_ds, run, chunks), spec, texts=texts)
    assert (len(texts._tokens), len(texts._normalised)) == (counted, normalised)   # nothing recomputed
    assert first.equals(again) and first.equals(context_hits(Retrieved(long_ds, run, chunks), spec))
    with pytest.raises(ValueError, match="tokenizer"):
        context_hits(Retrieved(long_ds, run, chunks), spec, texts=ChunkTexts("static-retrieval-m2v"))
