"""End-to-end answering: retrieved chunks -> LLM answers -> graded accuracy, the oracle test and the k sweep.

Plain functions over the stage tables (``dataset`` = :class:`ragbench.data.dataset.Dataset`, ``chunk_run`` =
:data:`ragbench.core.schemas.RUN_SCHEMA`, ``chunks`` = :data:`ragbench.core.schemas.CHUNK_SCHEMA`) and a
:class:`ragbench.generation.llm.client.ChatClient` (any OpenAI-compatible endpoint; the local llama-server by default).

Conventions
-----------
* **Queries**: every query of the (optionally seeded-sampled) dataset. A query with gold answers is *answerable*;
  one with an empty ``answers`` list is *unanswerable* and is correct iff the reply says INSUFFICIENT_CONTEXT
  (:func:`ragbench.generation.llm.graders.grade`). A dataset with no answer strings at all is refused (nothing to grade).
* **Correct** = ``contains or EM`` on the SQuAD-normalised strings, and no abstention. Containment is used, not EM
  alone, because chat models wrap short gold spans in sentences ("The default is 256MiB."); EM and F1 are reported
  too.
* **Context candidates**: the top ``max(4 k, 20)`` ranks of the run feed :func:`ragbench.generation.llm.context.build_context`,
  so near-duplicate removal can still fill ``k``.
* **Gold evidence** of a query (oracle arm B): its span texts (relevance > 0, overlapping spans merged) ordered by
  relevance then document and offset; the whole text of its relevant documents (qrels) when it has no spans; nothing
  for unanswerable queries (arm B then tests abstention on an empty context).
* **Gold in context** (answerable queries): a gold answer string is in the assembled context
  (``answer_in_context``) or a context chunk is relevant (overlaps a gold span; with qrels only, belongs to a
  relevant document). **Gold in pool**: the same over the top ``pool_depth`` ranks of the run (in-context implies
  in-pool). For unanswerable queries both hold vacuously (there is nothing to retrieve), so a hallucination with a
  distractor context is CONTEXT_DILUTION and one with an empty context a GENERATION_BUG.

Oracle verdicts (:func:`oracle_verdict`; the oracle arm is consulted first, as in the oracle test: if the model
fails even with only the gold evidence, better retrieval cannot help)::

    arm A correct                                   -> PASS
    arm A wrong, arm B wrong                        -> GENERATION_BUG
    arm A wrong, arm B right, gold in context       -> CONTEXT_DILUTION
    arm A wrong, arm B right, gold in pool only     -> RETRIEVAL_MISS_RANKING        (reachable by reranking)
    arm A wrong, arm B right, gold not in pool      -> RETRIEVAL_MISS_REPRESENTATION (chunking/embedding miss)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import polars as pl

from ragbench.data.dataset import Dataset
from ragbench.generation.llm.client import ChatClient
from ragbench.generation.llm.context import AssembledContext, ContextSpec, build_context
from ragbench.generation.llm.graders import answer_in_context, contains, grade

PASS = "PASS"
RETRIEVAL_MISS_RANKING = "RETRIEVAL_MISS_RANKING"
RETRIEVAL_MISS_REPRESENTATION = "RETRIEVAL_MISS_REPRESENTATION"
CONTEXT_DILUTION = "CONTEXT_DILUTION"
GENERATION_BUG = "GENERATION_BUG"
VERDICTS = (PASS, RETRIEVAL_MISS_RANKING, RETRIEVAL_MISS_REPRESENTATION, CONTEXT_DILUTION, GENERATION_BUG)
K_SWEEP = (1, 3, 5, 10, 20)

ANSWER_SCHEMA = {"query_id": pl.String, "query_class": pl.String, "answerable": pl.Boolean, "n_chunks": pl.Int32,
                 "chunk_ids": pl.List(pl.String), "context_tokens": pl.Int32, "prompt_tokens": pl.Int32,
                 "answer": pl.String, "em": pl.Float64, "f1": pl.Float64, "contains": pl.Float64,
                 "insufficient": pl.Boolean, "correct": pl.Boolean, "answer_in_context": pl.Float64,
                 "cached": pl.Boolean, "seconds": pl.Float64}
ORACLE_SCHEMA = {"query_id": pl.String, "query_class": pl.String, "answerable": pl.Boolean,
                 "a_answer": pl.String, "a_correct": pl.Boolean, "a_em": pl.Float64, "a_f1": pl.Float64,
                 "b_answer": pl.String, "b_correct": pl.Boolean, "b_em": pl.Float64, "b_f1": pl.Float64,
                 "answer_in_context": pl.Float64, "gold_in_context": pl.Boolean, "gold_in_pool": pl.Boolean,
                 "n_gold_passages": pl.Int32, "verdict": pl.String}


def oracle_verdict(arm_a_correct: bool, arm_b_correct: bool, gold_in_context: bool, gold_in_pool: bool) -> str:
    """The oracle-test verdict for one query (table in the module docstring)."""
    if arm_a_correct:
        return PASS
    if not arm_b_correct:
        return GENERATION_BUG
    if gold_in_context:
        return CONTEXT_DILUTION
    return RETRIEVAL_MISS_RANKING if gold_in_pool else RETRIEVAL_MISS_REPRESENTATION


# ---------------------------------------------------------------- inputs
@dataclass(frozen=True)
class _Query:
    query_id: str
    text: str
    query_class: str | None
    answers: tuple[str, ...]


def sample_queries(dataset: Dataset, sample: int | None = None, seed: int = 0) -> list[_Query]:
    """The dataset's queries (sorted by id), or a seeded sample of ``sample`` of them; refuses answer-less data."""
    q = dataset.queries.sort("query_id")
    if not q.height:
        raise ValueError(f"dataset {dataset.name!r} has no queries")
    if not any(len(a or []) for a in q["answers"].to_list()):
        raise ValueError(f"dataset {dataset.name!r} has no answer strings (queries.metadata.answers or SQuAD "
                         f"answers); end-to-end accuracy needs them")
    if sample is not None:
        if sample < 1:
            raise ValueError(f"sample must be >= 1, got {sample}")
        if sample < q.height:
            q = q.sample(n=sample, seed=seed).sort("query_id")
    return [_Query(r["query_id"], r["text"], r["query_class"], tuple(r["answers"] or ()))
            for r in q.iter_rows(named=True)]


def _ranked_chunks(chunk_run: pl.DataFrame, chunks: pl.DataFrame, query_ids: Sequence[str],
                   depth: int) -> dict[str, list[dict]]:
    """query_id -> its top-``depth`` chunks best-first, each {chunk_id, doc_id, start, end, text}."""
    missing_cols = {"query_id", "rank", "chunk_id"} - set(chunk_run.columns)
    if missing_cols:
        raise ValueError(f"run table lacks columns {sorted(missing_cols)}")
    run = (chunk_run.filter(pl.col("query_id").is_in(list(query_ids)) & (pl.col("rank") <= depth))
           .select("query_id", "rank", "chunk_id")
           .join(chunks.select("chunk_id", "doc_id", "start", "end", "text"), on="chunk_id", how="left")
           .sort(["query_id", "rank"]))
    bad = run.filter(pl.col("text").is_null())
    if bad.height:
        raise ValueError(f"run names {bad['chunk_id'].n_unique()} chunk id(s) absent from the chunks table, e.g. "
                         f"{bad['chunk_id'][0]!r}; the run and the chunks come from different chunkers")
    out: dict[str, list[dict]] = {q: [] for q in query_ids}
    for r in run.iter_rows(named=True):
        out[r["query_id"]].append(r)
    return out


def _candidate_depth(spec: ContextSpec) -> int:
    return max(4 * spec.k, 20)


def _answer(queries: list[_Query], ranked: dict[str, list[dict]], client: ChatClient,
            spec: ContextSpec, progress: Callable | None) -> tuple[pl.DataFrame, dict[str, AssembledContext]]:
    contexts = {q.query_id: build_context(q.text, [(c["chunk_id"], c["text"])
                                                   for c in ranked[q.query_id][:_candidate_depth(spec)]], spec)
                for q in queries}
    replies = client.complete_many([contexts[q.query_id].as_messages() for q in queries], progress=progress)
    rows = []
    for q, c in zip(queries, replies):
        ctx = contexts[q.query_id]
        g = grade(c.text, q.answers)
        rows.append({"query_id": q.query_id, "query_class": q.query_class, "answerable": bool(q.answers),
                     "n_chunks": len(ctx.chunk_ids), "chunk_ids": list(ctx.chunk_ids),
                     "context_tokens": ctx.context_tokens, "prompt_tokens": c.prompt_tokens, "answer": c.text,
                     "em": g.em, "f1": g.f1, "contains": g.contains, "insufficient": g.insufficient,
                     "correct": g.correct,
                     "answer_in_context": answer_in_context(ctx.context, q.answers) if q.answers else math.nan,
                     "cached": c.cached, "seconds": c.seconds})
    return pl.DataFrame(rows, schema=ANSWER_SCHEMA), contexts


# ---------------------------------------------------------------- public stages
def answer_queries(dataset: Dataset, chunk_run: pl.DataFrame, chunks: pl.DataFrame, client: ChatClient,
                   context_spec: ContextSpec, sample: int | None = None, seed: int = 0,
                   progress: Callable | None = None) -> pl.DataFrame:
    """Answer each (sampled) query from its retrieved context and grade it; one row per query (``ANSWER_SCHEMA``).

    ``prompt_tokens`` is the endpoint's count (null if it reports none); ``context_tokens`` the budget tokenizer's
    count of the chunk texts; ``answer_in_context`` is NaN for unanswerable queries.
    """
    queries = sample_queries(dataset, sample, seed)
    ranked = _ranked_chunks(chunk_run, chunks, [q.query_id for q in queries], _candidate_depth(context_spec))
    return _answer(queries, ranked, client, context_spec, progress)[0]


def context_hits(dataset: Dataset, chunk_run: pl.DataFrame, chunks: pl.DataFrame, context_spec: ContextSpec,
                 sample: int | None = None, seed: int = 0) -> pl.DataFrame:
    """Answer-in-context per query without any LLM (the DPR-style top-k accuracy, cheap enough for every config).

    Columns ``query_id, answerable, n_chunks, context_tokens, answer_in_context`` (NaN for unanswerable queries);
    the context is assembled exactly as :func:`answer_queries` would send it.
    """
    queries = sample_queries(dataset, sample, seed)
    ranked = _ranked_chunks(chunk_run, chunks, [q.query_id for q in queries], _candidate_depth(context_spec))
    rows = []
    for q in queries:
        ctx = build_context(q.text, [(c["chunk_id"], c["text"]) for c in ranked[q.query_id]], context_spec)
        rows.append({"query_id": q.query_id, "answerable": bool(q.answers), "n_chunks": len(ctx.chunk_ids),
                     "context_tokens": ctx.context_tokens,
                     "answer_in_context": answer_in_context(ctx.context, q.answers) if q.answers else math.nan})
    return pl.DataFrame(rows, schema={k: ANSWER_SCHEMA[k] for k in ("query_id", "answerable", "n_chunks",
                                                                  "context_tokens", "answer_in_context")})


def gold_evidence(dataset: Dataset, query_id: str) -> list[tuple[str, str]]:
    """``(passage_id, text)`` of a query's gold evidence: merged spans, else relevant whole documents, else []."""
    from ragbench.evaluation.spans import merge_spans

    texts = dict(zip(dataset.corpus["doc_id"].to_list(), dataset.corpus["text"].to_list()))
    sp = dataset.spans.filter((pl.col("query_id") == query_id) & (pl.col("relevance") > 0))
    if sp.height:
        sp = merge_spans(sp).sort(["relevance", "doc_id", "start"], descending=[True, False, False])
        return [(f"gold:{d}:{s}-{e}", texts[d][s:e]) for d, s, e in sp.select("doc_id", "start", "end").iter_rows()]
    qr = (dataset.qrels.filter((pl.col("query_id") == query_id) & (pl.col("relevance") > 0))
          .sort(["relevance", "doc_id"], descending=[True, False]))
    return [(f"gold:{d}", texts[d]) for d in qr["doc_id"].to_list()]


def _relevant_chunks(dataset: Dataset, chunks: pl.DataFrame, query_ids: Sequence[str]) -> dict[str, set[str]]:
    """query_id -> chunk ids overlapping its gold spans (or, without spans, chunks of its relevant documents)."""
    from ragbench.evaluation.spans import chunk_relevance

    out: dict[str, set[str]] = {q: set() for q in query_ids}
    sp = dataset.spans.filter(pl.col("query_id").is_in(list(query_ids)) & (pl.col("relevance") > 0))
    with_spans = set(sp["query_id"].to_list())
    if sp.height:
        for q, c in chunk_relevance(chunks, sp).select("query_id", "chunk_id").iter_rows():
            out[q].add(c)
    qr = dataset.qrels.filter(pl.col("query_id").is_in([q for q in query_ids if q not in with_spans])
                              & (pl.col("relevance") > 0))
    if qr.height:
        for q, c in qr.select("query_id", "doc_id").join(chunks.select("doc_id", "chunk_id"), on="doc_id").select(
                "query_id", "chunk_id").iter_rows():
            out[q].add(c)
    return out


def oracle_test(dataset: Dataset, chunk_run: pl.DataFrame, chunks: pl.DataFrame, client: ChatClient,
                context_spec: ContextSpec, pool_depth: int = 50, sample: int | None = None, seed: int = 0,
                progress: Callable | None = None) -> pl.DataFrame:
    """Arm A (retrieved context) vs arm B (gold evidence only) per query, with a verdict (``ORACLE_SCHEMA``).

    Arm B uses ``context_spec``'s instruction and prompt format, with all gold passages, no dedupe and no budget.
    See the module docstring for gold-in-context / gold-in-pool and the verdict rules.
    """
    if pool_depth < context_spec.k:
        raise ValueError(f"pool_depth ({pool_depth}) must be >= the context k ({context_spec.k})")
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, max(pool_depth, _candidate_depth(context_spec)))
    arm_a, ctx_a = _answer(queries, ranked, client, context_spec, progress)

    gold = {q.query_id: gold_evidence(dataset, q.query_id) if q.answers else [] for q in queries}
    ctx_b = {q.query_id: build_context(q.text, gold[q.query_id], replace(
        context_spec, k=max(len(gold[q.query_id]), 1), dedupe=False, token_budget=None, ordering="score"))
        for q in queries}
    replies_b = client.complete_many([ctx_b[q].as_messages() for q in qids], progress=progress)
    relevant = _relevant_chunks(dataset, chunks, qids)

    rows = []
    for q, a, b in zip(queries, arm_a.iter_rows(named=True), replies_b):
        gb = grade(b.text, q.answers)
        if q.answers:
            in_ctx = bool(a["answer_in_context"]) or bool(relevant[q.query_id] & set(ctx_a[q.query_id].chunk_ids))
            pool = ranked[q.query_id][:pool_depth]
            in_pool = in_ctx or any(c["chunk_id"] in relevant[q.query_id] for c in pool) or any(
                contains(c["text"], q.answers) for c in pool)
        else:
            in_ctx = in_pool = True  # vacuous: nothing to retrieve
        rows.append({"query_id": q.query_id, "query_class": q.query_class, "answerable": bool(q.answers),
                     "a_answer": a["answer"], "a_correct": a["correct"], "a_em": a["em"], "a_f1": a["f1"],
                     "b_answer": b.text, "b_correct": gb.correct, "b_em": gb.em, "b_f1": gb.f1,
                     "answer_in_context": a["answer_in_context"], "gold_in_context": in_ctx, "gold_in_pool": in_pool,
                     "n_gold_passages": len(gold[q.query_id]),
                     "verdict": oracle_verdict(a["correct"], gb.correct, in_ctx, in_pool)})
    return pl.DataFrame(rows, schema=ORACLE_SCHEMA)


# ---------------------------------------------------------------- summaries
def summarize_answers(table: pl.DataFrame) -> dict[str, float]:
    """Means for MLflow: accuracy (share correct), EM, F1, contains and abstention over all rows;
    answer_in_context over answerable rows (NaN when none)."""
    if not table.height:
        raise ValueError("no answers to summarise")
    aic = table.filter(pl.col("answerable"))["answer_in_context"]
    return {"answer_accuracy": float(table["correct"].mean()), "answer_em": float(table["em"].mean()),
            "answer_f1": float(table["f1"].mean()), "answer_contains": float(table["contains"].mean()),
            "answer_insufficient_rate": float(table["insufficient"].mean()),
            "answer_in_context": float(aic.mean()) if aic.len() else math.nan,
            "answer_n_queries": float(table.height)}


def verdict_counts(oracle: pl.DataFrame) -> dict[str, int]:
    """Count of each verdict (all five keys, zeros included)."""
    counts = dict(oracle.group_by("verdict").len().iter_rows())
    unknown = set(counts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdict(s) {sorted(unknown)}")
    return {v: int(counts.get(v, 0)) for v in VERDICTS}


# ---------------------------------------------------------------- k sweep
def _retrieval_recall(dataset: Dataset, chunk_run: pl.DataFrame, chunks: pl.DataFrame, query_ids: Sequence[str],
                      k: int) -> tuple[str, float]:
    """Mean retrieval recall of the top-k chunks over the labelled queries among ``query_ids``.

    ``span_recall@k`` (evidence characters covered, :func:`ragbench.evaluation.spans.span_metrics`) when the dataset has spans;
    otherwise document recall of the top-k chunks = |relevant docs among their docs| / |relevant docs|.
    """
    if dataset.spans.height:
        from ragbench.evaluation.spans import span_metrics

        pq = span_metrics(chunk_run, chunks, dataset.spans, [k], query_ids=list(query_ids))
        vals = pq.filter(pl.col("measure") == f"span_recall@{k}")["value"].drop_nans()
        return "span_recall", float(vals.mean()) if vals.len() else math.nan
    # the documents of the top-k chunks number at most k, so recall@k over them is their coverage
    from ragbench.core.schemas import canonical_order
    from ragbench.evaluation.judging import document_run
    from ragbench.evaluation.metrics import Measure, aggregate, evaluate_per_query

    docs = document_run(canonical_order(chunk_run).filter(pl.col("rank") <= k))  # the top k in the judged order
    mean = aggregate(evaluate_per_query(docs, dataset.qrels, list(query_ids), [Measure("recall", k)]))["mean"]
    return "doc_recall", float(mean[0]) if mean.len() and mean[0] is not None else math.nan


def k_sweep(dataset: Dataset, chunk_run: pl.DataFrame, chunks: pl.DataFrame, client: ChatClient,
            context_spec: ContextSpec, ks: Sequence[int] = K_SWEEP, sample: int | None = None, seed: int = 0,
            progress: Callable | None = None) -> pl.DataFrame:
    """End-to-end accuracy and retrieval recall side by side for each context size k.

    One row per k: ``accuracy``/``em``/``f1``/``contains`` means over the sampled queries, ``answer_in_context``
    over the answerable ones, ``mean_chunks`` actually used (the token budget may cut below k: set
    ``token_budget`` to fit the largest k), ``recall`` and its ``recall_measure`` (see :func:`_retrieval_recall`).
    """
    ks = sorted(set(int(k) for k in ks))
    if not ks or ks[0] < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, _candidate_depth(replace(context_spec, k=ks[-1])))
    rows = []
    for k in ks:
        table, _ = _answer(queries, ranked, client, replace(context_spec, k=k), progress)
        s = summarize_answers(table)
        measure, recall = _retrieval_recall(dataset, chunk_run, chunks, qids, k)
        rows.append({"k": k, "n_queries": table.height, "accuracy": s["answer_accuracy"], "em": s["answer_em"],
                     "f1": s["answer_f1"], "contains": s["answer_contains"],
                     "answer_in_context": s["answer_in_context"], "insufficient_rate": s["answer_insufficient_rate"],
                     "mean_chunks": float(table["n_chunks"].mean()),
                     "mean_context_tokens": float(table["context_tokens"].mean()),
                     "recall": recall, "recall_measure": measure})
    return pl.DataFrame(rows)
