"""Span-aware judging: a chunk run scored against character-span labels, so every chunker meets the same ground truth.

Inputs are the stage tables: ``chunk_run`` (:data:`ragbench.core.schemas.RUN_SCHEMA`), ``chunks``
(:data:`ragbench.core.schemas.CHUNK_SCHEMA`, offsets ``[start, end)`` into the document) and ``spans``
(:data:`ragbench.data.dataset.SPANS_SCHEMA`). Evidence is the spans with relevance > 0; overlapping spans of one
(query, doc) are first merged into their union with the maximum relevance (what
:func:`ragbench.data.dataset.validate_spans` already does for loaded datasets), so no character is counted twice.

**Order.** Runs are judged in :func:`~ragbench.core.schemas.canonical_order` (trec_eval's rule: score descending,
compared as 32-bit floats, ties by ``chunk_id`` descending); "top-k" and "in rank order" below mean that order.

Character sets are unions of intervals. For one query, ``E`` = its evidence characters (all docs), ``R_k`` = the
characters of its top-k chunks (overlapping chunks counted once), ``|.|`` = number of characters:

* ``span_recall@k``    = |E ∩ R_k| / |E|
* ``span_precision@k`` = |E ∩ R_k| / |R_k|           (0 when nothing was retrieved)
* ``span_iou@k``       = |E ∩ R_k| / |E ∪ R_k|       (Chroma's chunking evaluation, in characters, over all docs)
* ``span_contained@k`` = share of the (merged) gold spans lying wholly inside a single top-k chunk
* ``span_recall_max``  = |E ∩ C| / |E| with ``C`` = the characters of **all** chunks of the chunk table: the most
  ``span_recall@k`` (and ``evidence_recall@{N}tok``) can reach under this chunker, whatever is retrieved.

**Spans no chunk can cover.** Chunkers leave characters out: the markdown and recursive chunkers cut at paragraph
breaks and no chunk holds the ``\n\n`` between two paragraphs, so a gold span that crosses a section boundary is
never covered whole (on the demo set, 8 spans under markdown-256, 7 under recursive-128; q25 can reach
368/370 = 0.9946). Gold spans are judged as labelled -- never trimmed, so every chunker is scored against the same
characters -- and ``span_recall_max`` reports, per query and config, the ceiling the chunker leaves; a span recall
is read against it (``span_recall@k / span_recall_max`` is the share of the reachable evidence retrieved).

Budget-matched (:func:`budget_metrics`): the context is filled with chunks in rank order until ``N`` tokens are used;
the first chunk that does not fit whole is **cut**, as a context assembler would, keeping only its first
``remaining`` tokens — by default the first ``floor(len(chunk) * remaining / tokens(chunk))`` characters (tokens ≈
proportional to characters), or exactly up to the end offset of its ``remaining``-th token when a ``tokenizer`` is
given. Nothing after the cut enters the context.

* ``evidence_recall@{N}tok``  = |E ∩ context_N| / |E|
* ``chunks_in_budget@{N}tok`` = number of chunks with at least one character in the context (the cut one included)

A query without evidence gets NaN for every measure (excluded from means and counted as unlabelled by
:func:`ragbench.evaluation.metrics.aggregate`), never 0 or 1. A labelled query absent from the run retrieved nothing: 0.

Interval arithmetic runs on one global character line: document ``d`` occupies ``[base_d, base_d + extent_d]``
with a one-character gap between documents, so per-document unions become 1-D unions, and
``|A ∩ B| = |A| + |B| - |A ∪ B|`` for two unions ``A`` and ``B``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl

from ragbench.core.schemas import canonical_order
from ragbench.evaluation.measures.judged import COVERAGE_MEASURES
from ragbench.evaluation.metrics import PER_QUERY_SCHEMA, Measure, evaluate_per_query

SPAN_MEASURES = ("span_recall", "span_precision", "span_iou", "span_contained")
#: Per query: the span recall the chunk table allows at most (see the module docstring).
SPAN_REACHABLE = "span_recall_max"
#: Prefixes of the span family: every per-query measure computed from span labels (span_*, evidence_recall@,
#: chunks_in_budget@, the chunk-level rank measures chunk_*). Their unlabelled queries are those without evidence.
SPAN_FAMILY_PREFIXES = ("span_", "evidence_recall", "chunks_in_budget", "chunk_")


def is_span_measure(measure: str) -> bool:
    """Whether ``measure`` (a key or an @ spelling) belongs to the span family (:data:`SPAN_FAMILY_PREFIXES`)."""
    return measure.startswith(SPAN_FAMILY_PREFIXES)


def without_evidence(per_query: pl.DataFrame) -> int | None:
    """The one count of queries without evidence (no gold span with relevance > 0), the ``n_unlabelled`` of every
    span-family measure: the queries whose ``span_recall_max`` is NaN (|E| = 0, see the module docstring) in the
    per-query rows (``query_id, measure, value``); None when no span measure was computed. ``configs``,
    ``config_metrics``, the report and MLflow all read it from here."""
    rows = per_query.filter(pl.col("measure") == SPAN_REACHABLE)
    if rows.is_empty():
        return None
    return int(rows.filter(pl.col("value").is_nan())["query_id"].n_unique())


RELEVANCE_SCHEMA = {"query_id": pl.String, "chunk_id": pl.String, "overlap_chars": pl.Int64,
                    "contains_span": pl.Boolean, "relevance": pl.Int32}


# ---------------------------------------------------------------- interval helpers
def union_length(starts: np.ndarray, ends: np.ndarray) -> int:
    """Number of integer positions covered by the union of ``[starts[i], ends[i])``."""
    if len(starts) == 0:
        return 0
    s, e = merge_intervals(starts, ends)
    return int((e - s).sum())


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint intervals covering the same positions (touching intervals are joined)."""
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if len(starts) == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return s[first], reach[last]


def merge_spans(spans: pl.DataFrame) -> pl.DataFrame:
    """Evidence spans (relevance > 0), overlapping ones of one (query, doc) merged: union range, max relevance."""
    _require(spans, ("query_id", "doc_id", "start", "end", "relevance"), "spans")
    ev = spans.filter(pl.col("relevance") > 0).sort(["query_id", "doc_id", "start", "end"])
    if ev.is_empty():
        return ev.select("query_id", "doc_id", "start", "end", "relevance")
    keys = ["query_id", "doc_id"]
    # a span starts a new group when it begins after everything before it (same query and doc) has ended
    reach = pl.col("end").cum_max().shift(1).over(keys)
    group = (reach.is_null() | (pl.col("start") > reach)).cast(pl.Int64).cum_sum()
    return (ev.with_columns(group.alias("_g"))
            .group_by([*keys, "_g"], maintain_order=True)
            .agg(pl.col("start").min(), pl.col("end").max(), pl.col("relevance").max())
            .drop("_g"))


def _require(df: pl.DataFrame, cols: Sequence[str], what: str) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} table lacks column(s) {', '.join(missing)} (has {', '.join(df.columns)})")


def _chunk_table(chunks: pl.DataFrame) -> pl.DataFrame:
    _require(chunks, ("chunk_id", "doc_id", "start", "end"), "chunks")
    out = chunks.select("chunk_id", "doc_id", "start", "end").unique("chunk_id", keep="first", maintain_order=True)
    bad = out.filter(pl.col("start") >= pl.col("end"))
    if bad.height:
        raise ValueError(f"chunk {bad['chunk_id'][0]!r} has an empty or inverted range "
                         f"[{bad['start'][0]}, {bad['end'][0]})")
    return out


def _bases(chunks: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """``doc_id -> base``: where each document starts on the global character line."""
    ext = (pl.concat([chunks.select("doc_id", "end"), spans.select("doc_id", "end")])
           .group_by("doc_id").agg(pl.col("end").max()).sort("doc_id"))
    return ext.select("doc_id", ((pl.col("end") + 1).cum_sum() - (pl.col("end") + 1)).alias("base"))


def _ranked(chunk_run: pl.DataFrame, chunks: pl.DataFrame, bases: pl.DataFrame) -> pl.DataFrame:
    """The run joined to the chunk offsets on the global line, ordered by (query, rank)."""
    _require(chunk_run, ("query_id", "rank", "chunk_id"), "run")
    run = canonical_order(chunk_run).select("query_id", "rank", "chunk_id")
    run = run.join(chunks, on="chunk_id", how="left")
    missing = run.filter(pl.col("doc_id").is_null())
    if missing.height:
        ids = missing["chunk_id"].unique().to_list()
        raise ValueError(f"run names {len(ids)} chunk id(s) absent from the chunks table, e.g. {ids[:3]}; "
                         f"the run and the chunks come from different chunkers")
    return (run.join(bases, on="doc_id", how="left")
            .with_columns((pl.col("start") + pl.col("base")).alias("gs"), (pl.col("end") + pl.col("base")).alias("ge"))
            .sort(["query_id", "rank"]))


def _evidence(spans: pl.DataFrame, bases: pl.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """query_id -> (global starts, global ends) of its merged evidence spans."""
    out = {}
    ev = spans.join(bases, on="doc_id", how="left")
    for q, s, e in (ev.group_by("query_id", maintain_order=True)
                    .agg((pl.col("start") + pl.col("base")), (pl.col("end") + pl.col("base"))).iter_rows()):
        out[q] = (np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64))
    return out


def _per_query_runs(ranked: pl.DataFrame, cols: Sequence[str]) -> dict[str, tuple[np.ndarray, ...]]:
    out = {}
    for row in ranked.group_by("query_id", maintain_order=True).agg(*cols).iter_rows():
        out[row[0]] = tuple(np.asarray(v) for v in row[1:])
    return out


def _query_ids(query_ids: Sequence[str] | None, chunk_run: pl.DataFrame, spans: pl.DataFrame) -> list[str]:
    if query_ids is not None:
        return list(query_ids)
    return sorted(set(chunk_run["query_id"].to_list()) | set(spans["query_id"].to_list()))


def _positive(values: Sequence[int], what: str) -> list[int]:
    vals = list(values)
    if not vals or any(not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0 for v in vals):
        raise ValueError(f"{what} must be a non-empty list of positive integers, got {vals!r}")
    return vals


def _table(rows_q: list[str], rows_m: list[str], rows_v: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"query_id": rows_q, "measure": rows_m, "value": rows_v}, schema=PER_QUERY_SCHEMA)


def _coverage(starts: np.ndarray, ends: np.ndarray):
    """``x -> |[0, x) ∩ union of [starts, ends)|`` for many ``x`` at once (exact, by prefix sums)."""
    ms, me = merge_intervals(starts, ends)
    before = np.r_[0, np.cumsum(me - ms)[:-1]] if len(ms) else np.zeros(0, dtype=np.int64)

    def covered(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.int64)
        if len(ms) == 0:
            return np.zeros_like(x)
        i = np.searchsorted(ms, x, side="right") - 1
        inside = np.clip(x - ms[np.maximum(i, 0)], 0, (me - ms)[np.maximum(i, 0)])
        return np.where(i >= 0, before[np.maximum(i, 0)] + inside, 0)

    return covered


# ---------------------------------------------------------------- chunk relevance
def chunk_relevance(chunks: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Chunks that overlap a gold span of a query in the same document (only those; others are irrelevant).

    Returns :data:`RELEVANCE_SCHEMA` rows: ``overlap_chars`` = characters of the chunk inside the query's evidence;
    ``contains_span`` = the chunk holds at least one (merged) span whole; ``relevance`` = the maximum relevance of
    the spans it overlaps.
    """
    c = _chunk_table(chunks)
    ev = merge_spans(spans)
    pairs = (ev.join(c, on="doc_id", how="inner", suffix="_c")
             .with_columns((pl.min_horizontal("end", "end_c") - pl.max_horizontal("start", "start_c"))
                           .alias("overlap"))
             .filter(pl.col("overlap") > 0))
    return (pairs.group_by(["query_id", "chunk_id"], maintain_order=True)
            .agg(pl.col("overlap").sum().alias("overlap_chars"),
                 ((pl.col("start_c") <= pl.col("start")) & (pl.col("end") <= pl.col("end_c"))).any()
                 .alias("contains_span"),
                 pl.col("relevance").max())
            .sort(["query_id", "chunk_id"])
            .cast(RELEVANCE_SCHEMA))


# ---------------------------------------------------------------- span metrics
def span_metrics(chunk_run: pl.DataFrame, chunks: pl.DataFrame, spans: pl.DataFrame, cutoffs: Sequence[int], *,
                 query_ids: Sequence[str] | None = None, reachable: bool = True) -> pl.DataFrame:
    """Per-query ``span_recall@k``, ``span_precision@k``, ``span_iou@k``, ``span_contained@k`` (long format), and
    ``span_recall_max`` (the ceiling the chunk table leaves; omitted with ``reachable=False``).

    ``query_ids``: the queries to report (pass every query of the dataset so unlabelled ones are counted); by
    default the union of the run's and the spans' queries. See the module docstring for the formulas.
    """
    cutoffs = _positive(cutoffs, "cutoffs")
    c = _chunk_table(chunks)
    ev = merge_spans(spans)
    bases = _bases(c, ev)
    evidence = _evidence(ev, bases)
    runs = _per_query_runs(_ranked(chunk_run, c, bases), ("gs", "ge"))
    if reachable:
        line = c.join(bases, on="doc_id", how="left")
        covered = _coverage((line["start"] + line["base"]).to_numpy(), (line["end"] + line["base"]).to_numpy())
    rows_q, rows_m, rows_v = [], [], []
    empty = np.zeros(0, dtype=np.int64)
    for q in _query_ids(query_ids, chunk_run, spans):
        values: dict[str, list[float]] = {m: [] for m in SPAN_MEASURES}
        if q not in evidence:
            for m in SPAN_MEASURES:
                values[m] = [math.nan] * len(cutoffs)
        else:
            es, ee = evidence[q]
            e_len = int((ee - es).sum())  # merged: disjoint
            rs_all, re_all = runs.get(q, (empty, empty))
            for k in cutoffs:
                rs, re_ = rs_all[:k], re_all[:k]
                r_len = union_length(rs, re_)
                union = union_length(np.r_[es, rs], np.r_[ee, re_])
                inter = e_len + r_len - union
                values["span_recall"].append(inter / e_len)
                values["span_precision"].append(inter / r_len if r_len else 0.0)
                values["span_iou"].append(inter / union)
                inside = (rs[None, :] <= es[:, None]) & (ee[:, None] <= re_[None, :])
                values["span_contained"].append(float(inside.any(axis=1).mean()) if len(rs) else 0.0)
        for m in SPAN_MEASURES:
            for k, v in zip(cutoffs, values[m]):
                rows_q.append(q)
                rows_m.append(f"{m}@{k}")
                rows_v.append(v)
        if reachable:
            if q in evidence:
                es, ee = evidence[q]
                best = float((covered(ee) - covered(es)).sum()) / float((ee - es).sum())
            else:
                best = math.nan
            rows_q.append(q)
            rows_m.append(SPAN_REACHABLE)
            rows_v.append(best)
    return _table(rows_q, rows_m, rows_v)


# ---------------------------------------------------------------- budget-matched metrics
def budget_metrics(chunk_run: pl.DataFrame, chunks: pl.DataFrame, spans: pl.DataFrame, budgets: Sequence[int],
                   token_counts: Mapping[str, int], *, query_ids: Sequence[str] | None = None,
                   tokenizer: str | None = None) -> pl.DataFrame:
    """Per-query ``evidence_recall@{N}tok`` and ``chunks_in_budget@{N}tok`` for each context budget ``N``.

    ``token_counts`` maps every ranked chunk id to its token count (``models.count_tokens`` of the chunk text with
    the embedder's tokenizer). The chunk that does not fit whole is cut to the remaining budget: proportionally in
    characters, or exactly at a token boundary when ``tokenizer`` (a model name for ``models.load_tokenizer``) is
    given. See the module docstring.
    """
    budgets = _positive(budgets, "budgets")
    c = _chunk_table(chunks)
    ev = merge_spans(spans)
    bases = _bases(c, ev)
    evidence = _evidence(ev, bases)
    ranked = _ranked(chunk_run, c, bases)
    missing = [i for i in ranked["chunk_id"].unique().to_list() if i not in token_counts]
    if missing:
        raise ValueError(f"token_counts lacks {len(missing)} ranked chunk id(s), e.g. {missing[:3]}")
    if any(int(token_counts[i]) < 0 for i in ranked["chunk_id"].unique().to_list()):
        raise ValueError("token_counts holds a negative count")
    ranked = ranked.with_columns(pl.col("chunk_id").replace_strict(dict(token_counts), default=None,
                                                                   return_dtype=pl.Int64).alias("tokens"))
    runs = _per_query_runs(ranked, ("gs", "ge", "tokens", "chunk_id", "start", "doc_id"))
    cut_at = _token_cutter(chunks, tokenizer) if tokenizer else None
    rows_q, rows_m, rows_v = [], [], []
    empty = np.zeros(0, dtype=np.int64)
    for q in _query_ids(query_ids, chunk_run, spans):
        recall, count = [], []
        if q not in evidence:
            recall = count = [math.nan] * len(budgets)
        else:
            es, ee = evidence[q]
            e_len = int((ee - es).sum())
            gs, ge, tokens, cids = runs[q][:4] if q in runs else (empty, empty, empty, [])
            cum = np.cumsum(tokens)
            for n in budgets:
                whole = int(np.searchsorted(cum, n, side="right"))  # chunks whose running total stays <= n
                cs, ce = gs[:whole], ge[:whole]
                remaining = n - (int(cum[whole - 1]) if whole else 0)
                if whole < len(gs) and remaining > 0:
                    t = int(tokens[whole])
                    keep = cut_at(cids[whole], remaining) if cut_at else (ge[whole] - gs[whole]) * remaining // t
                    if keep > 0:
                        cs, ce = np.r_[cs, gs[whole]], np.r_[ce, gs[whole] + keep]
                ctx_len = union_length(cs, ce)
                inter = e_len + ctx_len - union_length(np.r_[es, cs], np.r_[ee, ce])
                recall.append(inter / e_len)
                count.append(float(len(cs)))
        for name, vals in (("evidence_recall", recall), ("chunks_in_budget", count)):
            for n, v in zip(budgets, vals):
                rows_q.append(q)
                rows_m.append(f"{name}@{n}tok")
                rows_v.append(v)
    return _table(rows_q, rows_m, rows_v)


def _token_cutter(chunks: pl.DataFrame, tokenizer: str):
    """``(chunk_id, n) -> characters`` of the chunk's text up to the end of its ``n``-th token."""
    from ragbench.core.models import load_tokenizer  # noqa: PLC0415 (only when exact cutting is asked for)

    tok = load_tokenizer(tokenizer)
    texts = dict(zip(chunks["chunk_id"], chunks["text"]))

    def cut(chunk_id: str, n: int) -> int:
        text = texts[chunk_id]
        offsets = [o for o in tok.encode(text, add_special_tokens=False).offsets if o[1] > o[0]]
        return len(text) if n >= len(offsets) else offsets[n - 1][1]

    return cut


# ---------------------------------------------------------------- chunk-level rank metrics
def chunk_level_run_metrics(chunk_run: pl.DataFrame, chunks: pl.DataFrame, spans: pl.DataFrame,
                            measures: Sequence[Measure], *, query_ids: Sequence[str] | None = None) -> pl.DataFrame:
    """Rank metrics where the judged items are chunks, relevant when they overlap evidence (:func:`chunk_relevance`).

    Computed by :func:`ragbench.evaluation.metrics.evaluate_per_query` on a chunk-level qrels table; measure names get a
    ``chunk_`` prefix (``chunk_ndcg@10``). Chunks are judged in :func:`~ragbench.core.schemas.canonical_order` (ties
    by ``doc_id``, then ``chunk_id``, descending). Note the ideal ranking holds every relevant chunk, so a chunker that
    spreads the evidence over more (e.g. overlapping) chunks has more to recall.
    """
    rel = chunk_relevance(chunks, spans).select("query_id", pl.col("chunk_id").alias("doc_id"), "relevance")
    _require(chunk_run, ("query_id", "rank", "chunk_id"), "run")
    # judged in canonical order; the ranks carry it (no score column, so it is not re-sorted by chunk id alone)
    run = canonical_order(chunk_run).select("query_id", "rank", pl.col("chunk_id").alias("doc_id"))
    measures = [m for m in measures if m.name not in COVERAGE_MEASURES]  # chunks carry no judgments of their own
    out = evaluate_per_query(run, rel, _query_ids(query_ids, chunk_run, spans), measures)
    # a query with evidence that no chunk touches retrieved nothing relevant: 0, never unlabelled (one count of
    # queries without evidence for the whole span family, :func:`without_evidence`)
    evidence = spans.filter(pl.col("relevance") > 0)["query_id"].unique()
    value = pl.when(pl.col("value").is_nan() & pl.col("query_id").is_in(evidence.implode())).then(0.0)
    return out.with_columns(("chunk_" + pl.col("measure")).alias("measure"), value.otherwise(pl.col("value"))
                            .alias("value"))
