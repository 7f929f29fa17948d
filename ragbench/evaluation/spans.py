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
``|A ∩ B| = |A| + |B| - |A ∪ B|`` for two unions ``A`` and ``B``. Every query of a call is scored at once: each
query's intervals move to their own stretch of a longer line (:func:`union_lengths`), so one sort serves them all
rather than a Python loop over queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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


def _indexed(table: pl.DataFrame, qindex: Mapping[str, int]) -> pl.DataFrame:
    """The rows of the reported queries, with ``qi``: each query's place in ``qindex``."""
    return (table.filter(pl.col("query_id").is_in(list(qindex)))
            .with_columns(pl.col("query_id").replace_strict(dict(qindex), return_dtype=pl.Int64).alias("qi")))


@dataclass(frozen=True)
class _Evidence:
    """The reported queries (``ids``, their index ``qindex``) and their merged evidence on the global line:
    ``group`` (query index), ``starts``, ``ends`` per span; per query ``length`` = |E| and ``spans`` = merged spans
    (0: unlabelled)."""

    ids: list[str]
    qindex: dict[str, int]
    group: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    length: np.ndarray
    spans: np.ndarray

    @classmethod
    def of(cls, merged: pl.DataFrame, bases: pl.DataFrame, ids: list[str]) -> "_Evidence":
        qindex = {q: i for i, q in enumerate(ids)}
        ev = _indexed(merged.join(bases, on="doc_id", how="left"), qindex)
        group = ev["qi"].to_numpy().astype(np.int64)
        starts = (ev["start"] + ev["base"]).to_numpy().astype(np.int64)
        ends = (ev["end"] + ev["base"]).to_numpy().astype(np.int64)
        n = len(ids)
        return cls(ids, qindex, group, starts, ends, union_lengths(group, starts, ends, n),
                   np.bincount(group, minlength=n))


def _ranked_rows(ranked: pl.DataFrame, qindex: Mapping[str, int], *extra: str) -> pl.DataFrame:
    """The ranked rows of the reported queries, with ``qi`` (query index) and ``pos`` (1-based place in the
    canonical order), ordered by (query, place)."""
    return (_indexed(ranked, qindex).sort(["qi", "rank"])
            .with_columns((pl.int_range(pl.len()).over("qi") + 1).alias("pos"))
            .select("qi", "pos", "gs", "ge", *extra))


def union_lengths(group: np.ndarray, starts: np.ndarray, ends: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group ``g < n_groups``: the number of positions covered by the union of its ``[starts, ends)``.

    All groups at once: group ``g`` is moved to its own stretch ``[g * L, (g + 1) * L)`` of one line (``L`` past
    every end), so a single :func:`merge_intervals` never joins two groups."""
    out = np.zeros(n_groups, dtype=np.int64)
    if len(starts) == 0:
        return out
    stretch = int(np.max(ends)) + 1
    offset = np.asarray(group, dtype=np.int64) * stretch
    s, e = merge_intervals(np.asarray(starts, dtype=np.int64) + offset, np.asarray(ends, dtype=np.int64) + offset)
    np.add.at(out, s // stretch, e - s)
    return out


def _overlap(evidence: _Evidence, group: np.ndarray, starts: np.ndarray, ends: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Per query: ``|E ∩ R|`` and ``|R|`` for its evidence ``E`` and the union ``R`` of its ``[starts, ends)``,
    by ``|E ∩ R| = |E| + |R| - |E ∪ R|``."""
    n = len(evidence.ids)
    r_len = union_lengths(group, starts, ends, n)
    union = union_lengths(np.r_[evidence.group, group], np.r_[evidence.starts, starts], np.r_[evidence.ends, ends],
                          n)
    return evidence.length + r_len - union, r_len


def _query_ids(query_ids: Sequence[str] | None, chunk_run: pl.DataFrame, spans: pl.DataFrame) -> list[str]:
    if query_ids is not None:
        return list(query_ids)
    return sorted(set(chunk_run["query_id"].to_list()) | set(spans["query_id"].to_list()))


def _positive(values: Sequence[int], what: str) -> list[int]:
    vals = list(values)
    if not vals or any(not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v <= 0 for v in vals):
        raise ValueError(f"{what} must be a non-empty list of positive integers, got {vals!r}")
    return vals


def _long(evidence: _Evidence, names: list[str], columns: Mapping[str, np.ndarray]) -> pl.DataFrame:
    """Per-query rows (``query_id, measure, value``), query by query, measures in the order of ``names``; NaN for
    every measure of a query without evidence."""
    values = np.column_stack([np.asarray(columns[name], dtype=np.float64) for name in names])
    values[evidence.spans == 0] = math.nan
    return pl.DataFrame({"query_id": np.repeat(np.asarray(evidence.ids, dtype=object), len(names)).tolist(),
                         "measure": names * len(evidence.ids), "value": values.reshape(-1)}, schema=PER_QUERY_SCHEMA)


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
    default the union of the run's and the spans' queries. See the module docstring for the formulas; every query
    is computed at once (:func:`union_lengths`).
    """
    cutoffs = _positive(cutoffs, "cutoffs")
    c = _chunk_table(chunks)
    ev = merge_spans(spans)
    bases = _bases(c, ev)
    evidence = _Evidence.of(ev, bases, _query_ids(query_ids, chunk_run, spans))
    run = _ranked_rows(_ranked(chunk_run, c, bases), evidence.qindex).filter(pl.col("pos") <= max(cutoffs))
    rq, pos, gs, ge = (run[col].to_numpy().astype(np.int64) for col in ("qi", "pos", "gs", "ge"))
    first_holder = _first_holder(evidence, rq, pos, gs, ge)
    n = len(evidence.ids)
    columns: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for k in cutoffs:
            top = pos <= k
            inter, r_len = _overlap(evidence, rq[top], gs[top], ge[top])
            columns[f"span_recall@{k}"] = inter / evidence.length
            columns[f"span_precision@{k}"] = np.where(r_len > 0, inter / r_len, 0.0)
            columns[f"span_iou@{k}"] = inter / (evidence.length + r_len - inter)
            held = np.bincount(evidence.group, weights=(first_holder <= k).astype(np.float64), minlength=n)
            columns[f"span_contained@{k}"] = held / evidence.spans
        if reachable:
            line = c.join(bases, on="doc_id", how="left")
            covered = _coverage((line["start"] + line["base"]).to_numpy(), (line["end"] + line["base"]).to_numpy())
            reach = np.zeros(n, dtype=np.int64)
            np.add.at(reach, evidence.group, covered(evidence.ends) - covered(evidence.starts))
            columns[SPAN_REACHABLE] = reach / evidence.length
    names = [f"{m}@{k}" for m in SPAN_MEASURES for k in cutoffs] + ([SPAN_REACHABLE] if reachable else [])
    return _long(evidence, names, columns)


def _first_holder(evidence: _Evidence, rq: np.ndarray, pos: np.ndarray, gs: np.ndarray, ge: np.ndarray
                  ) -> np.ndarray:
    """Per merged evidence span: the first place in its query's ranking of a chunk that holds it whole
    (``inf`` when none does)."""
    spans = pl.DataFrame({"qi": evidence.group, "i": np.arange(len(evidence.group)), "es": evidence.starts,
                          "ee": evidence.ends})
    chunks = pl.DataFrame({"qi": rq, "pos": pos, "gs": gs, "ge": ge})
    held = (spans.join(chunks, on="qi").filter((pl.col("gs") <= pl.col("es")) & (pl.col("ee") <= pl.col("ge")))
            .group_by("i").agg(pl.col("pos").min()))
    first = np.full(len(evidence.group), np.inf)
    first[held["i"].to_numpy()] = held["pos"].to_numpy()
    return first


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
    ranked = _ranked(chunk_run, c, bases)
    missing = [i for i in ranked["chunk_id"].unique().to_list() if i not in token_counts]
    if missing:
        raise ValueError(f"token_counts lacks {len(missing)} ranked chunk id(s), e.g. {missing[:3]}")
    if any(int(token_counts[i]) < 0 for i in ranked["chunk_id"].unique().to_list()):
        raise ValueError("token_counts holds a negative count")
    evidence = _Evidence.of(ev, bases, _query_ids(query_ids, chunk_run, spans))
    run = _ranked_rows(ranked.with_columns(pl.col("chunk_id").replace_strict(dict(token_counts), default=None,
                                                                             return_dtype=pl.Int64).alias("tokens")),
                       evidence.qindex, "tokens", "chunk_id")
    run = run.with_columns(pl.col("tokens").cum_sum().over("qi").alias("cum"))
    cut_at = _token_cutter(chunks, tokenizer) if tokenizer else None
    columns: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for n in budgets:
            whole = run.filter(pl.col("cum") <= n)  # a prefix of each ranking: token counts are >= 0
            used = whole.group_by("qi").agg(pl.col("cum").max().alias("used"))
            # the first chunk past the budget, cut to what is left of it (nothing when the budget is used up)
            cut = (run.filter(pl.col("cum") > n).group_by("qi").agg(pl.all().first())
                   .join(used, on="qi", how="left")
                   .with_columns((n - pl.col("used").fill_null(0)).alias("left"))
                   .filter(pl.col("left") > 0).sort("qi"))
            keep = _kept_characters(cut, cut_at)
            cq, cs = cut["qi"].to_numpy()[keep > 0], cut["gs"].to_numpy()[keep > 0]
            group = np.r_[whole["qi"].to_numpy(), cq].astype(np.int64)
            inter, _ = _overlap(evidence, group, np.r_[whole["gs"].to_numpy(), cs].astype(np.int64),
                                np.r_[whole["ge"].to_numpy(), cs + keep[keep > 0]].astype(np.int64))
            columns[f"evidence_recall@{n}tok"] = inter / evidence.length
            columns[f"chunks_in_budget@{n}tok"] = np.bincount(group, minlength=len(evidence.ids)).astype(np.float64)
    names = [f"{m}@{n}tok" for m in ("evidence_recall", "chunks_in_budget") for n in budgets]
    return _long(evidence, names, columns)


def _kept_characters(cut: pl.DataFrame, cut_at) -> np.ndarray:
    """Characters kept of each cut chunk (rows ``gs, ge, tokens, chunk_id, left``): ``floor(len * left / tokens)``,
    or up to the end of its ``left``-th token with ``cut_at``."""
    if cut_at is not None:
        return np.array([cut_at(cid, left) for cid, left in zip(cut["chunk_id"], cut["left"])], dtype=np.int64)
    return ((cut["ge"] - cut["gs"]) * cut["left"] // cut["tokens"]).to_numpy().astype(np.int64)


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
