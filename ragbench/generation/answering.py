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
  so near-duplicate removal can still fill ``k``; a chunk longer than the budget left is cut (or dropped) by the
  context's ``overflow`` rule.
* **Gold evidence** of a query (oracle arm B): its gold *passages* (:mod:`ragbench.generation.oracle`: the
  sentences/paragraph holding its spans, or its judged documents around the best-matching sentence, bounded by the
  same token budget); nothing for unanswerable queries (arm B then tests abstention on an empty context).
* **Evidence in a chunk** (answerable queries): with span labels, the chunk's shown characters overlap a gold
  span; with document labels only, the chunk belongs to a judged document (unless the budget cut away every
  occurrence of the answer it held); either way, or a gold answer string is in the chunk's shown text
  (``answer_in_context``: chunk text only, never the ``[n]`` labels or the prompt).
* **Gold in context**: a shown chunk holds evidence. **Gold lost to the budget**: not in context, but one of the
  top-k chunks (after near-duplicate removal, before the budget) held evidence in its full text — the budget cut
  or dropped it. **Gold in pool**: in context, lost to the budget, or evidence in any of the top ``pool_depth``
  ranks of the run. For unanswerable queries, in context and in pool hold vacuously (there is nothing to
  retrieve), so a hallucination with a distractor context is CONTEXT_DILUTION and one with an empty context a
  GENERATION_BUG.

Oracle verdicts (:func:`oracle_verdict`; the oracle arm is consulted first, as in the oracle test: if the model
fails even with only the gold evidence, better retrieval cannot help)::

    arm A correct                                        -> PASS
    arm A wrong, arm B wrong                             -> GENERATION_BUG
    arm A wrong, arm B right, gold in context            -> CONTEXT_DILUTION
    arm A wrong, arm B right, gold lost to the budget    -> CONTEXT_BUDGET                (raise the budget, or chunk smaller)
    arm A wrong, arm B right, gold in pool only          -> RETRIEVAL_MISS_RANKING        (reachable by reranking)
    arm A wrong, arm B right, gold not in pool           -> RETRIEVAL_MISS_REPRESENTATION (chunking/embedding miss)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import polars as pl

from ragbench.data.dataset import Dataset
from ragbench.evaluation.means import query_mean
from ragbench.generation.llm.client import ChatClient
from ragbench.generation.llm.context import AssembledContext, ChunkTexts, ContextSpec, build_context
from ragbench.generation.llm.graders import contains_normalised, grade, normalised_golds, normalize_answer
from ragbench.generation.oracle import GoldPassages

PASS = "PASS"
RETRIEVAL_MISS_RANKING = "RETRIEVAL_MISS_RANKING"
RETRIEVAL_MISS_REPRESENTATION = "RETRIEVAL_MISS_REPRESENTATION"
CONTEXT_DILUTION = "CONTEXT_DILUTION"
CONTEXT_BUDGET = "CONTEXT_BUDGET"
GENERATION_BUG = "GENERATION_BUG"
VERDICTS = (PASS, RETRIEVAL_MISS_RANKING, RETRIEVAL_MISS_REPRESENTATION, CONTEXT_DILUTION, CONTEXT_BUDGET,
            GENERATION_BUG)
K_SWEEP = (1, 3, 5, 10, 20)

ANSWER_SCHEMA = {"query_id": pl.String, "query_class": pl.String, "answerable": pl.Boolean, "n_chunks": pl.Int32,
                 "chunk_ids": pl.List(pl.String), "context_tokens": pl.Int32, "prompt_tokens": pl.Int32,
                 "answer": pl.String, "em": pl.Float64, "f1": pl.Float64, "contains": pl.Float64,
                 "insufficient": pl.Boolean, "correct": pl.Boolean, "answer_in_context": pl.Float64,
                 "cached": pl.Boolean, "seconds": pl.Float64, "budget_cut": pl.Int32, "budget_dropped": pl.Int32}
ORACLE_SCHEMA = {"query_id": pl.String, "query_class": pl.String, "answerable": pl.Boolean,
                 "a_answer": pl.String, "a_correct": pl.Boolean, "a_em": pl.Float64, "a_f1": pl.Float64,
                 "b_answer": pl.String, "b_correct": pl.Boolean, "b_em": pl.Float64, "b_f1": pl.Float64,
                 "answer_in_context": pl.Float64, "gold_in_context": pl.Boolean, "gold_in_pool": pl.Boolean,
                 "gold_lost_to_budget": pl.Boolean, "n_gold_passages": pl.Int32, "verdict": pl.String}
HITS_SCHEMA = {"query_id": pl.String, "answerable": pl.Boolean, "n_chunks": pl.Int32, "context_tokens": pl.Int32,
               "answer_in_context": pl.Float64, "budget_cut": pl.Int32, "budget_dropped": pl.Int32,
               "gold_lost_to_budget": pl.Boolean}


def oracle_verdict(arm_a_correct: bool, arm_b_correct: bool, gold_in_context: bool, gold_in_pool: bool,
                   gold_lost_to_budget: bool = False) -> str:
    """The oracle-test verdict for one query (table in the module docstring)."""
    if arm_a_correct:
        return PASS
    if not arm_b_correct:
        return GENERATION_BUG
    if gold_in_context:
        return CONTEXT_DILUTION
    if gold_lost_to_budget:
        return CONTEXT_BUDGET
    return RETRIEVAL_MISS_RANKING if gold_in_pool else RETRIEVAL_MISS_REPRESENTATION


# ---------------------------------------------------------------- inputs
@dataclass(frozen=True, eq=False)
class Retrieved:
    """What one config retrieved for a dataset: the ``dataset`` (queries, labels, answers), its ``chunk_run``
    (``query_id, chunk_id, score, rank``) and the ``chunks`` table the run's chunk ids are rows of."""

    dataset: Dataset
    chunk_run: pl.DataFrame
    chunks: pl.DataFrame


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


class _Evidence:
    """Where the gold evidence of each query lies (spans by document, or judged documents), to judge contexts."""

    def __init__(self, dataset: Dataset, query_ids: Sequence[str], texts: ChunkTexts):
        self.texts = texts
        sp = dataset.spans.filter(pl.col("query_id").is_in(list(query_ids)) & (pl.col("relevance") > 0))
        self.spans: dict[str, dict[str, list[tuple[int, int]]]] = {}
        for q, d, s, e in sp.select("query_id", "doc_id", "start", "end").iter_rows():
            self.spans.setdefault(q, {}).setdefault(d, []).append((s, e))
        qr = dataset.qrels.filter(pl.col("query_id").is_in(list(query_ids)) & (pl.col("relevance") > 0))
        self.docs: dict[str, set[str]] = {}
        for q, d in qr.select("query_id", "doc_id").iter_rows():
            self.docs.setdefault(q, set()).add(d)

    def labelled(self, query_id: str, doc_id: str, start: int, end: int) -> bool:
        """Chunk ``doc[start:end]`` holds labelled evidence (span overlap; judged document without spans)."""
        spans = self.spans.get(query_id)
        if spans is not None:
            return any(s < end and start < e for s, e in spans.get(doc_id, ()))
        return doc_id in self.docs.get(query_id, ())

    def has_answer(self, chunk: dict, golds: list[str]) -> bool:
        return bool(golds) and bool(contains_normalised([self.texts.normalised(chunk["chunk_id"], chunk["text"])],
                                                        golds))

    def judge(self, query_id: str, golds: list[str], ctx: AssembledContext,
              rows: dict[str, dict]) -> tuple[float, bool, bool]:
        """``(answer_in_context, gold_in_context, gold_lost_to_budget)`` of an answerable query's context (the
        definitions are in the module docstring)."""
        cut = set(ctx.cut_ids)
        found, in_ctx = False, False
        for cid, shown in zip(ctx.chunk_ids, ctx.texts):
            r = rows[cid]
            # a piece cut at a word boundary can hold an answer only if its whole chunk does: normalise it only then
            answer_here = self.has_answer(r, golds) and (
                cid not in cut or bool(contains_normalised([normalize_answer(shown)], golds)))
            found |= answer_here
            lead = len(r["text"]) - len(r["text"].lstrip())
            start = r["start"] + lead
            labelled = self.labelled(query_id, r["doc_id"], start, start + len(shown))
            if labelled and query_id not in self.spans and cid in cut and not answer_here \
                    and self.has_answer(r, golds):
                labelled = False  # a judged document whose answer the cut removed
            in_ctx |= labelled or answer_here
        lost = not in_ctx and any(self.labelled(query_id, rows[c]["doc_id"], rows[c]["start"], rows[c]["end"])
                                  or self.has_answer(rows[c], golds) for c in ctx.considered_ids)
        return float(found), in_ctx, lost


def _assemble(queries: list[_Query], ranked: dict[str, list[dict]], spec: ContextSpec,
              texts: ChunkTexts) -> dict[str, AssembledContext]:
    depth = _candidate_depth(spec)
    return {q.query_id: build_context(q.text, [(c["chunk_id"], c["text"]) for c in ranked[q.query_id][:depth]],
                                      spec, texts) for q in queries}


def _texts(spec: ContextSpec, texts: ChunkTexts | None) -> ChunkTexts:
    return texts if texts is not None else ChunkTexts(spec.tokenizer, spec.shingle_size)


def _answer(queries: list[_Query], ranked: dict[str, list[dict]], client: ChatClient, spec: ContextSpec,
            progress: Callable | None, evidence: _Evidence) -> tuple[pl.DataFrame, dict[str, AssembledContext]]:
    contexts = _assemble(queries, ranked, spec, evidence.texts)
    replies = client.complete_many([contexts[q.query_id].as_messages() for q in queries], progress=progress)
    rows = []
    for q, c in zip(queries, replies):
        ctx = contexts[q.query_id]
        g = grade(c.text, q.answers)
        aic = math.nan
        if q.answers:
            by_id = {r["chunk_id"]: r for r in ranked[q.query_id]}
            aic = evidence.judge(q.query_id, normalised_golds(q.answers), ctx, by_id)[0]
        rows.append({"query_id": q.query_id, "query_class": q.query_class, "answerable": bool(q.answers),
                     "n_chunks": len(ctx.chunk_ids), "chunk_ids": list(ctx.chunk_ids),
                     "context_tokens": ctx.context_tokens, "prompt_tokens": c.prompt_tokens, "answer": c.text,
                     "em": g.em, "f1": g.f1, "contains": g.contains, "insufficient": g.insufficient,
                     "correct": g.correct, "answer_in_context": aic, "cached": c.cached, "seconds": c.seconds,
                     "budget_cut": len(ctx.cut_ids), "budget_dropped": len(ctx.dropped_ids)})
    return pl.DataFrame(rows, schema=ANSWER_SCHEMA), contexts


# ---------------------------------------------------------------- public stages
def answer_queries(retrieved: Retrieved, client: ChatClient, context_spec: ContextSpec, sample: int | None = None,
                   seed: int = 0, progress: Callable | None = None, texts: ChunkTexts | None = None) -> pl.DataFrame:
    """Answer each (sampled) query from its retrieved context and grade it; one row per query (``ANSWER_SCHEMA``).

    ``prompt_tokens`` is the endpoint's count (null if it reports none); ``context_tokens`` the budget tokenizer's
    count of the chunk texts; ``answer_in_context`` is NaN for unanswerable queries; ``budget_cut`` /
    ``budget_dropped`` count the top-k chunks the budget cut or left out. ``texts`` caches per-chunk work for
    ``chunks`` across calls.
    """
    dataset, chunk_run, chunks = retrieved.dataset, retrieved.chunk_run, retrieved.chunks
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, _candidate_depth(context_spec))
    return _answer(queries, ranked, client, context_spec, progress,
                   _Evidence(dataset, qids, _texts(context_spec, texts)))[0]


def context_hits(retrieved: Retrieved, context_spec: ContextSpec, sample: int | None = None, seed: int = 0,
                 texts: ChunkTexts | None = None) -> pl.DataFrame:
    """Answer-in-context per query without any LLM (the DPR-style top-k accuracy, cheap enough for every config).

    Columns :data:`HITS_SCHEMA`: ``answer_in_context`` (NaN for unanswerable queries) on the chunk texts of the
    context assembled exactly as :func:`answer_queries` would send it, the chunks the budget cut or dropped, and
    whether gold evidence was retrieved into the top k but lost to the budget (module docstring). Linear in the
    context size: per-chunk work is done once per chunk through ``texts``.
    """
    dataset, chunk_run, chunks = retrieved.dataset, retrieved.chunk_run, retrieved.chunks
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, _candidate_depth(context_spec))
    evidence = _Evidence(dataset, qids, _texts(context_spec, texts))
    contexts = _assemble(queries, ranked, context_spec, evidence.texts)
    rows = []
    for q in queries:
        ctx = contexts[q.query_id]
        aic, lost = math.nan, False
        if q.answers:
            by_id = {r["chunk_id"]: r for r in ranked[q.query_id]}
            aic, _, lost = evidence.judge(q.query_id, normalised_golds(q.answers), ctx, by_id)
        rows.append({"query_id": q.query_id, "answerable": bool(q.answers), "n_chunks": len(ctx.chunk_ids),
                     "context_tokens": ctx.context_tokens, "answer_in_context": aic,
                     "budget_cut": len(ctx.cut_ids), "budget_dropped": len(ctx.dropped_ids),
                     "gold_lost_to_budget": lost})
    return pl.DataFrame(rows, schema=HITS_SCHEMA)


def gold_evidence(dataset: Dataset, query_id: str, token_budget: int | None = None,
                  tokenizer: str = "all-MiniLM-L6-v2") -> list[tuple[str, str]]:
    """``(passage_id, text)`` of a query's gold passages under ``token_budget`` (the oracle arm's context; the rule
    is :mod:`ragbench.generation.oracle`'s); [] for an unanswerable or unknown query."""
    q = dataset.queries.filter(pl.col("query_id") == query_id)
    if not q.height:
        return []
    row = q.row(0, named=True)
    return GoldPassages(dataset, token_budget, tokenizer).for_query(query_id, row["text"], row["answers"] or ())


def oracle_test(retrieved: Retrieved, client: ChatClient, context_spec: ContextSpec, pool_depth: int = 50,
                sample: int | None = None, seed: int = 0, progress: Callable | None = None,
                texts: ChunkTexts | None = None) -> pl.DataFrame:
    """Arm A (retrieved context) vs arm B (gold passages only) per query, with a verdict (``ORACLE_SCHEMA``).

    Arm B uses ``context_spec``'s instruction and prompt format with the query's gold passages
    (:mod:`ragbench.generation.oracle`, bounded by ``context_spec.token_budget``), no dedupe. See the module
    docstring for gold-in-context, lost-to-budget, gold-in-pool and the verdict rules.
    """
    dataset, chunk_run, chunks = retrieved.dataset, retrieved.chunk_run, retrieved.chunks
    if pool_depth < context_spec.k:
        raise ValueError(f"pool_depth ({pool_depth}) must be >= the context k ({context_spec.k})")
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, max(pool_depth, _candidate_depth(context_spec)))
    evidence = _Evidence(dataset, qids, _texts(context_spec, texts))
    arm_a, ctx_a = _answer(queries, ranked, client, context_spec, progress, evidence)

    passages = GoldPassages(dataset, context_spec.token_budget, context_spec.tokenizer)
    gold = {q.query_id: passages.for_query(q.query_id, q.text, q.answers) for q in queries}
    ctx_b = {q.query_id: build_context(q.text, gold[q.query_id], replace(
        context_spec, k=max(len(gold[q.query_id]), 1), dedupe=False, token_budget=None, ordering="score"))
        for q in queries}
    replies_b = client.complete_many([ctx_b[q].as_messages() for q in qids], progress=progress)

    rows = []
    for q, a, b in zip(queries, arm_a.iter_rows(named=True), replies_b):
        gb = grade(b.text, q.answers)
        lost = False
        if q.answers:
            golds = normalised_golds(q.answers)
            by_id = {r["chunk_id"]: r for r in ranked[q.query_id]}
            _, in_ctx, lost = evidence.judge(q.query_id, golds, ctx_a[q.query_id], by_id)
            in_pool = in_ctx or lost or any(
                evidence.labelled(q.query_id, c["doc_id"], c["start"], c["end"]) or evidence.has_answer(c, golds)
                for c in ranked[q.query_id][:pool_depth])
        else:
            in_ctx = in_pool = True  # vacuous: nothing to retrieve
        rows.append({"query_id": q.query_id, "query_class": q.query_class, "answerable": bool(q.answers),
                     "a_answer": a["answer"], "a_correct": a["correct"], "a_em": a["em"], "a_f1": a["f1"],
                     "b_answer": b.text, "b_correct": gb.correct, "b_em": gb.em, "b_f1": gb.f1,
                     "answer_in_context": a["answer_in_context"], "gold_in_context": in_ctx, "gold_in_pool": in_pool,
                     "gold_lost_to_budget": lost, "n_gold_passages": len(gold[q.query_id]),
                     "verdict": oracle_verdict(a["correct"], gb.correct, in_ctx, in_pool, lost)})
    return pl.DataFrame(rows, schema=ORACLE_SCHEMA)


# ---------------------------------------------------------------- summaries
def summarize_answers(table: pl.DataFrame) -> dict[str, float]:
    """Means for MLflow: accuracy (share correct), EM, F1, contains and abstention over all rows;
    answer_in_context over answerable rows (NaN when none)."""
    if not table.height:
        raise ValueError("no answers to summarise")
    aic = table.filter(pl.col("answerable"))["answer_in_context"]
    return {"answer_accuracy": query_mean(table["correct"]), "answer_em": query_mean(table["em"]),
            "answer_f1": query_mean(table["f1"]), "answer_contains": query_mean(table["contains"]),
            "answer_insufficient_rate": query_mean(table["insufficient"]), "answer_in_context": query_mean(aic),
            "answer_n_queries": float(table.height)}


def verdict_counts(oracle: pl.DataFrame) -> dict[str, int]:
    """Count of each verdict (every key of :data:`VERDICTS`, zeros included)."""
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
        return "span_recall", query_mean(vals)
    # the documents of the top-k chunks number at most k, so recall@k over them is their coverage
    from ragbench.core.schemas import canonical_order
    from ragbench.evaluation.judging import document_run
    from ragbench.evaluation.metrics import Measure, aggregate, evaluate_per_query

    docs = document_run(canonical_order(chunk_run).filter(pl.col("rank") <= k))  # the top k in the judged order
    mean = aggregate(evaluate_per_query(docs, dataset.qrels, list(query_ids), [Measure("recall", k)]))["mean"]
    return "doc_recall", float(mean[0]) if mean.len() and mean[0] is not None else math.nan


def k_sweep(retrieved: Retrieved, client: ChatClient, context_spec: ContextSpec, ks: Sequence[int] = K_SWEEP,
            sample: int | None = None, seed: int = 0, progress: Callable | None = None) -> pl.DataFrame:
    """End-to-end accuracy and retrieval recall side by side for each context size k.

    One row per k: ``accuracy``/``em``/``f1``/``contains`` means over the sampled queries, ``answer_in_context``
    over the answerable ones, ``mean_chunks`` actually used (the token budget may cut below k: set
    ``token_budget`` to fit the largest k), ``recall`` and its ``recall_measure`` (see :func:`_retrieval_recall`).
    """
    dataset, chunk_run, chunks = retrieved.dataset, retrieved.chunk_run, retrieved.chunks
    ks = sorted(set(int(k) for k in ks))
    if not ks or ks[0] < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    queries = sample_queries(dataset, sample, seed)
    qids = [q.query_id for q in queries]
    ranked = _ranked_chunks(chunk_run, chunks, qids, _candidate_depth(replace(context_spec, k=ks[-1])))
    evidence = _Evidence(dataset, qids, ChunkTexts(context_spec.tokenizer, context_spec.shingle_size))
    rows = []
    for k in ks:
        table, _ = _answer(queries, ranked, client, replace(context_spec, k=k), progress, evidence)
        s = summarize_answers(table)
        measure, recall = _retrieval_recall(dataset, chunk_run, chunks, qids, k)
        rows.append({"k": k, "n_queries": table.height, "accuracy": s["answer_accuracy"], "em": s["answer_em"],
                     "f1": s["answer_f1"], "contains": s["answer_contains"],
                     "answer_in_context": s["answer_in_context"], "insufficient_rate": s["answer_insufficient_rate"],
                     "mean_chunks": float(table["n_chunks"].mean()),
                     "mean_context_tokens": float(table["context_tokens"].mean()),
                     "recall": recall, "recall_measure": measure})
    return pl.DataFrame(rows)
