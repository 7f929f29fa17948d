"""Screening before the full embed (``search: {strategy: screen}`` in the sweep file).

Each chunker x model pair is first evaluated on one pooled sub-corpus: the judged documents of the tuning queries
plus, for every query, the top ``depth`` documents of each cheap retriever (BM25 over each chunker's chunks, and
every static Model2Vec embedder of the sweep over each chunker's chunks: no transformer encoding). On that pool a
pair's chunks are embedded through the sweep's vector cache (a pair that survives reuses those vectors in its full
embed), searched exactly (cosine, in memory; past the sweep's depth in chunks until each query names as many
documents as the primary's cutoff, so a fine chunker is compared at the same document depth as a coarse one) and
judged like the sweep judges (the primary measure per query).

The decision (:func:`screen_pairs`): the leader is the pair with the best mean; every other pair is compared with
it by the project's paired randomization test on the same queries, one-sided (H1: the pair is below the leader),
Holm-adjusted across the pairs. A pair whose
adjusted p-value is below ``alpha`` and whose mean is lower is screened out: its configs are recorded with status
``screened_out`` (not failed; a later sweep without the screen evaluates them). With ``search.margin`` m > 0 the
test is of the pair's values less m against the leader's (an indifference zone): a pair is screened out when it
significantly falls short of the leader + m, i.e. it cannot beat the leader by m or more; the leader is then the
cheapest pair (:func:`pair_costs`: the estimated seconds of what its full embed leaves to encode) whose mean is
within m of the best. BM25 configs always run.
When the screen cannot be computed (e.g. a primary measure the screen cannot measure) it is logged and every pair runs.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from ragbench.config import RunConfig
from ragbench.config.labels import LABEL_SEPARATOR, pair_label
from ragbench.core.cache import ChunkCache, EmbedStats, VectorCache
from ragbench.core.measure_keys import measure_key, measure_key_expr
from ragbench.core.models import resolve_model
from ragbench.core.progress import log
from ragbench.core.schemas import index_texts
from ragbench.embedding.embed import embed_texts
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.means import query_mean
from ragbench.evaluation.metrics import document_cutoff
from ragbench.evaluation.paired_tests import holm_correction, pair_seed, paired_randomization_test, required_resamples
from ragbench.reporting.screening import priced
from ragbench.results.outcomes import SCREENED_OUT
from ragbench.results.store_screening import SCREENING_COLUMNS
from ragbench.retrieval.base import run_from_hits
from ragbench.retrieval.bm25 import BM25Index, BM25Retriever
from ragbench.retrieval.rerank.base import unit_rows
from ragbench.sweep.estimate import Rates, encode_seconds
from ragbench.sweep.evaluate import tuning_part
from ragbench.sweep.plan import EvaluationSpec
from ragbench.sweep.stages import chunk_stage, evaluate_stage

Pair = tuple[int, str]  # (chunker index, embedder spec id)

#: the screen's paired test: one-sided, H1 the pair scores below the leader (+ margin) (:func:`screen_pairs`)
SCREEN_ALTERNATIVE = "less"


@dataclass(frozen=True)
class PairScreen:
    """One chunker x model pair on the screen: its mean primary value over the tuning queries, and against the
    leader (``delta`` = its mean minus the leader's, the paired test's ``p`` and its Holm-adjusted ``p_holm``; None
    for the leader itself). ``kept``: it runs in full."""

    chunker: str
    model: str
    mean: float
    delta: float | None
    p: float | None
    p_holm: float | None
    kept: bool

    @property
    def label(self) -> str:
        return pair_label(self.chunker, self.model)


@dataclass(frozen=True)
class Screen:
    """What the screen decided: per pair (:class:`PairScreen`, keyed by :data:`Pair`), the leader, the pooled
    sub-corpus (documents, chunks summed over the chunkers), the margin, and what each pair's full embed was priced
    at (``costs`` in ``cost_unit``) when the leader was chosen."""

    pairs: dict[Pair, PairScreen]
    leader: Pair
    n_docs: int
    n_chunks: int
    margin: float = 0.0
    costs: dict[Pair, float] = field(default_factory=dict)  # each pair's full embed, priced (:func:`pair_costs`)
    cost_unit: str | None = None

    def reason(self, pair: Pair) -> str:
        """The stored error of a screened-out config: :data:`SCREENED_OUT` and the evidence."""
        s, lead = self.pairs[pair], self.pairs[self.leader]
        versus = f"{lead.label} + {self.margin:g}" if self.margin else lead.label
        return (f"{SCREENED_OUT} (Δ {s.delta:+.3f}, p {s.p:.3g}, Holm p {s.p_holm:.3g} vs {versus}; "
                f"screen of {self.n_docs} documents, {self.n_chunks} chunks)")

    def table(self, n_queries: int, alpha: float) -> pl.DataFrame:
        """One row per pair, as the ``screening`` table stores it (:mod:`ragbench.results.store_screening`)."""
        rows = [{"chunker": s.chunker, "model": s.model, "mean": s.mean, "delta": s.delta, "p": s.p,
                 "p_holm": s.p_holm, "kept": s.kept, "leader": pair == self.leader, "n_docs": self.n_docs,
                 "n_chunks": self.n_chunks, "n_queries": n_queries, "alpha": alpha, "margin": self.margin,
                 "full_embed_cost": self.costs.get(pair), "cost_unit": self.cost_unit,
                 "alternative": SCREEN_ALTERNATIVE}
                for pair, s in self.pairs.items()]
        return pl.DataFrame(rows, schema=SCREENING_COLUMNS)

    def summary(self) -> str:
        kept = [s.label for s in self.pairs.values() if s.kept]
        out = [s.label for s in self.pairs.values() if not s.kept]
        return (f"screen: {len(self.pairs)} pairs on a pooled sub-corpus of {self.n_docs} documents "
                f"({self.n_chunks} chunks), leader {self.pairs[self.leader].label}: "
                f"kept {LABEL_SEPARATOR.join(kept) or 'none'}; screened out {LABEL_SEPARATOR.join(out) or 'none'}")


def pool_documents(judged, runs, depth: int) -> set[str]:
    """The screen's pool: the ``judged`` document ids, plus each document run of ``runs`` (``query_id, rank,
    doc_id``) cut to its top ``depth`` documents per query."""
    pool = set(judged)
    for run in runs:
        pool.update(run.filter(pl.col("rank") <= depth)["doc_id"].to_list())
    return pool


def screen_pairs(values: dict[Pair, np.ndarray], labels: dict[Pair, tuple[str, str]], alpha: float,
                 seed: int = 0, shallow: frozenset = frozenset(), margin: float = 0.0,
                 costs: dict[Pair, float] | None = None) -> tuple[dict[Pair, PairScreen], Pair]:
    """The decision on per-query ``values`` (one array per pair, aligned by query, NaN = unlabelled).

    The rule: the leader is the best mean (ties: the first pair); each other pair gets the one-sided paired
    randomization test against the leader (:func:`~ragbench.evaluation.paired_tests.paired_randomization_test`,
    ``alternative="less"``, resamples for a Holm family of that size) of its values less ``margin`` (m), the
    p-values are Holm-adjusted across the pairs,
    and a pair is kept unless its adjusted p is below ``alpha`` and its difference from the leader
    (Δ = its mean − the leader's) is below m. m = 0: screened out = significantly worse than the leader; m > 0 (an
    indifference zone, H0: Δ = m): also a pair that significantly falls short of beating the leader by m — a tie
    with the leader goes, and on the screen's evidence no pair screened out beats the leader by m. With ``costs`` (what
    each pair's full embed costs, :func:`pair_costs`) the leader is the cheapest pair whose mean is within m of
    the best mean (ties: the better mean; m = 0: the best mean), so that of a group of pairs the screen cannot tell
    apart by m the cheapest one is embedded in full; the best-mean pair is then tested against it like the others.
    A ``shallow`` pair (its run named fewer documents than the primary's cutoff for some query: the report would
    not compare it) is neither leader nor tested: it is kept.

    One-sided, because the screen's question is one-sided — does this pair fall short of the leader (+ m)? — and the
    error it must bound is one: screening out the best pair. That is Hsu's multiple comparisons with the best
    (one-sided bounds on each mean less the best of the others; for a pair other than the leader, the best of the
    others is the leader), with Holm in place of Dunnett's joint critical value: the chance that a best pair is
    screened out is at most ``alpha`` (simulated in tests/unit/test_screen_decision.py). A two-sided test here
    spent half of ``alpha`` on a side the rule never acts on."""
    means = {p: query_mean(v) if np.isfinite(v).any() else float("-inf") for p, v in values.items()}
    ranked = [p for p in means if p not in shallow] or list(means)
    leader = max(ranked, key=lambda p: (means[p], -ranked.index(p)))
    if costs is not None:
        near = [p for p in ranked if means[p] >= means[leader] - margin]
        leader = min(near, key=lambda p: (costs[p], -means[p], ranked.index(p)))
    others = [p for p in ranked if p != leader]
    resamples = required_resamples(max(len(others), 1), alpha)
    name = {p: pair_label(*labels[p]) for p in values}
    tests = {p: paired_randomization_test(values[p] - margin, values[leader], n_resamples=resamples,
                                          seed=pair_seed(seed, name[p], name[leader]),
                                          alternative=SCREEN_ALTERNATIVE)
             for p in others}
    adjusted = holm_correction({p: t.p_value for p, t in tests.items()})
    out = {}
    for p in values:
        if p == leader:
            out[p] = PairScreen(*labels[p], means[p], None, None, None, True)
            continue
        delta = means[p] - means[leader]
        if p not in tests:  # shallow: not compared
            out[p] = PairScreen(*labels[p], means[p], delta, None, None, True)
            continue
        short = delta < margin and adjusted[p] == adjusted[p] and adjusted[p] < alpha
        out[p] = PairScreen(*labels[p], means[p], delta, tests[p].p_value, adjusted[p], not short)
    return out, leader


def screen_configs(cfg, ds, work, todo: list[RunConfig], recorder, pool: Pool,
                   tokens: PairTokens | None = None) -> tuple[list[RunConfig], list]:
    """The screened sweep's first step: the configs of ``todo`` still to run and the outcomes of those screened
    out (recorded by ``recorder`` as ``screened_out``), the pairs screened on ``pool`` (:func:`screen_pool_of`),
    each priced from ``tokens`` (:func:`pair_costs`). The screen's encodings join ``work.embed_stats``."""
    try:
        screen = run_screen(cfg, work, _pairs(cfg), pool, tokens, recorder.writer.stored_screening())
    except Exception as e:  # the screen saves work; it never stops a sweep
        log.warning("screen: could not be computed (%s): every pair runs in full", e)
        return todo, []
    log.info("%s", screen.summary())
    recorder.writer.write_screening(screen.table(len(tuning_part(ds, work.evaluation).queries), cfg.search.alpha))
    kept, outcomes = [], []
    for c in todo:
        pair = _pair_of(cfg, c)
        if pair is not None and not screen.pairs[pair].kept:
            outcomes.append(recorder.not_run(c, screen.reason(pair)))
        else:
            kept.append(c)
    return kept, outcomes


def plan_and_screen(cfg, ds, home, plan, work, recorder, options,
                    started: float | None) -> tuple[object, list[RunConfig], list]:
    """A sweep's start: the plan's table and clock (:func:`~ragbench.sweep.budget.plan_clock`, ``options.budget``,
    the screen's pool priced in it), then the screen: ``(clock, the configs to run in order, the screened-out
    outcomes)``; the clock then counts only the configs kept and keeps from the budget the seconds that follow the
    last stage (closing the sweep, and publishing it when ``options.publish_after``: :mod:`ragbench.sweep.wrap_up`).
    A screen that would pass the budget is skipped (:func:`~ragbench.sweep.budget.screen_fits`). The pool and the
    screen run as stages of ``options.runner`` (Prefect tasks ``screen`` under the Prefect flow)."""
    from ragbench.sweep.budget import plan_clock
    from ragbench.sweep.wrap_up import CLOSE, PUBLISH, wrap_up_of

    pool = options.runner.run("screen pool", screen_pool_of, cfg, ds, work) if screens(cfg, plan.todo) else None
    wrap_up = wrap_up_of(home, len(plan.stored), (CLOSE, PUBLISH) if options.publish_after else (CLOSE,))
    clock, todo = plan_clock(cfg, ds, home, plan, options.budget, started, pool, wrap_up)
    outcomes = []
    if pool is not None and not clock.screen_skipped:  # None: no screen, or its pool could not be cut
        todo, outcomes = options.runner.run("screen pairs", screen_configs, cfg, ds, work, todo, recorder, pool,
                                            PairTokens.of(clock))
    clock.keep(todo)
    return clock, todo, outcomes


def screen_pool_of(cfg, ds, work) -> Pool | None:
    """The sweep's screen pool (:func:`screen_pool`, through the sweep's own cache); None (logged: every pair
    then runs) when it cannot be cut."""
    try:
        return screen_pool(cfg, ds, ScreenEncoder.of(work))
    except Exception as e:  # the screen saves work; it never stops a sweep
        log.warning("screen: the pool could not be cut (%s): every pair runs in full", e)
        return None


def screens(cfg, todo: list[RunConfig]) -> bool:
    """Whether a sweep of ``cfg`` running ``todo`` screens: ``search: {strategy: screen}``, at least two chunker x
    model pairs, and a config to run that embeds. A screen asked for that cannot run says why (logged)."""
    if cfg.search.strategy != "screen":
        return False
    pairs, embeds = len(_pairs(cfg)), any(c.embedder is not None for c in todo)
    if pairs >= 2 and embeds:
        return True
    log.info("screen: not run: %s; every config runs", f"the sweep has {pairs} chunker x model pair(s), a screen "
             "compares two or more" if pairs < 2 else "no config left to run embeds (the rest are done or reused)")
    return False


def _pairs(cfg) -> dict[Pair, tuple[str, str]]:
    dense = any(r.uses_embedder for r in cfg.retrievers)
    # in words, as each config's label spells its chunker and model
    return {(i, e.spec_id): (ch.name or ch.explain(), e.label) for i, ch in enumerate(cfg.chunkers)
            for e in cfg.embedders if dense}


def _pair_of(cfg, c: RunConfig) -> Pair | None:
    if c.embedder is None:
        return None
    return next(i for i, ch in enumerate(cfg.chunkers) if ch == c.chunker), c.embedder.spec_id


@dataclass(frozen=True)
class ScreenEncoder:
    """What the screen embeds through: a vector cache, the sweep's settings (segment rows, free-disk floor), the
    slot that bounds models in memory, and the list its :class:`EmbedStats` join."""

    vector_cache: VectorCache
    settings: object
    model_slot: AbstractContextManager
    stats: list

    @classmethod
    def of(cls, work) -> ScreenEncoder:
        """The sweep's own (its ``StageWork``): encodings land in its cache and its ``embed_stats``."""
        return cls(work.vector_cache, work.settings, work.model_slot, work.embed_stats)

    @classmethod
    def standalone(cls, settings) -> ScreenEncoder:
        """Outside a sweep (``ragbench plan``): the home's vector cache, no other model to share memory with."""
        return cls(VectorCache(Path(settings.home) / "cache"), settings, nullcontext(), [])


@dataclass(frozen=True)
class Pool:
    """The screen's pooled sub-corpus: the tuning part of the dataset, the pooled document ids, each chunker's
    chunks of those documents (in the sweep's chunker order), and each chunker's chunk count over the whole corpus
    (what a pair's full embed encodes)."""

    tuning: object
    doc_ids: frozenset[str]
    chunks: tuple[pl.DataFrame, ...]
    full_chunks: tuple[int, ...]


@dataclass(frozen=True)
class PairTokens:
    """The plan's count of what each pair will encode, keyed by (chunker label, model label): ``full``, the tokens
    its full embed leaves new after the screen; ``pool``, the tokens of its pooled texts the screen encodes; and
    ``seconds_per_token``, each model's stored rate on this machine (calibrated or learned by an earlier sweep;
    a model without one is absent)."""

    full: dict[tuple[str, str], int]
    pool: dict[tuple[str, str], int]
    seconds_per_token: dict[str, float]

    @classmethod
    def of(cls, clock) -> PairTokens:
        """From the sweep's :class:`~ragbench.sweep.budget.StageClock` (the plan it priced)."""
        return cls(dict(clock.tokens), dict(clock.screen_tokens), dict(clock.rates.seconds_per_token))


def pair_costs(cfg, pairs, pool: Pool, tokens: PairTokens | None,
               pool_seconds: dict[Pair, float]) -> tuple[dict[Pair, float], str]:
    """What each pair's full embed costs, and in what unit (``"seconds"`` or ``"chunks"``).

    ``cost(chunker, model) = seconds_per_token(model) x full tokens(chunker, model)``, the plan's convention
    (:func:`~ragbench.sweep.estimate.encode_seconds`), so a larger model's pair costs more than a smaller one's over
    the same chunks and a pair whose vectors are cached costs nothing. A model's rate is the one the screen just
    measured, ``sum of its pairs' pool_seconds / sum of their pool tokens`` (this corpus, this machine, now), else
    its stored rate. When there is no plan (``tokens`` None or empty) or some model with tokens to encode has
    neither, every pair is priced by its chunker's chunk count over the whole corpus instead (one unit for all)."""
    by_spec = {e.spec_id: e for e in cfg.embedders}
    key = {(i, spec_id): (cfg.chunkers[i].label, by_spec[spec_id].label) for (i, spec_id) in pairs}
    chunks = {(i, spec_id): float(pool.full_chunks[i]) for (i, spec_id) in pairs}
    if tokens is None or not tokens.full:  # no plan (it could not be estimated)
        return chunks, "chunks"
    rates = dict(tokens.seconds_per_token)
    for model in {m for _, m in key.values()}:
        mine = [p for p in pairs if key[p][1] == model]
        seconds, pooled = sum(pool_seconds.get(p, 0.0) for p in mine), sum(tokens.pool.get(key[p], 0) for p in mine)
        if seconds > 0 and pooled > 0:
            rates[model] = seconds / pooled
    if any(key[p][1] not in rates and tokens.full.get(key[p], 0) for p in pairs):
        return chunks, "chunks"
    priced_at = Rates(seconds_per_token=rates)
    return {p: encode_seconds(key[p][1], tokens.full.get(key[p], 0), priced_at) for p in pairs}, "seconds"


def screen_pool(cfg, ds, encoder: ScreenEncoder) -> Pool:
    """The screen's pool (:func:`pool_documents` of the tuning queries' judged documents and each cheap
    retriever's top ``search.depth`` documents). Cheap = no transformer: BM25 over each chunker's chunks, and every
    static Model2Vec embedder of the sweep (exact search over all of that chunker's chunks, through ``encoder``).
    Each chunker's chunks come from the chunk cache (cut now when they are not there)."""
    tuning = tuning_part(ds, EvaluationSpec.of(cfg))
    qids = tuning.queries["query_id"].to_list()
    chunk_cache = ChunkCache(Path(encoder.settings.home) / "cache")
    chunks = [chunk_stage(ds, ch, chunk_cache) for ch in cfg.chunkers]
    static = [e for e in cfg.embedders if resolve_model(e.model).kind == "model2vec"]
    depth = cfg.search.depth
    runs = []
    for ch_chunks in chunks:  # chunks fetched: twice the depth, so that the top ``depth`` documents are filled
        hits = BM25Index(BM25Retriever(), index_texts(ch_chunks)).search(tuning.queries["text"].to_list(), 2 * depth)
        runs.append(document_run(run_from_hits(qids, ch_chunks, hits.ids, hits.scores)))
        for emb in static:
            runs.append(document_run(_dense_run(encoder, tuning, ch_chunks, emb, 2 * depth)[0]))
    pool = pool_documents(tuning.qrels["doc_id"].to_list(), runs, depth)
    keep = pl.col("doc_id").is_in(pl.Series(sorted(pool), dtype=pl.String).implode())
    return Pool(tuning, frozenset(pool), tuple(c.filter(keep) for c in chunks), tuple(c.height for c in chunks))


def stored_costs(stored: pl.DataFrame | None,
                 pairs: dict[Pair, tuple[str, str]]) -> tuple[dict[Pair, float], str] | None:
    """The prices an earlier run of this sweep gave its pairs (its ``screening`` rows: ``full_embed_cost`` in one
    ``cost_unit``), when they price every pair of ``pairs``; else None. A resumed sweep decides on these: priced
    again, its own finished embeds would cost nothing and its leader could change, so it would not end as the
    uninterrupted sweep does."""
    if stored is None or stored.is_empty():
        return None
    if stored["full_embed_cost"].null_count() or stored["cost_unit"].null_count():  # a file from before the prices
        return None
    prices = {(r["chunker"], r["model"]): r["full_embed_cost"] for r in stored.iter_rows(named=True)}
    units = set(stored["cost_unit"].to_list())
    if set(prices) != set(pairs.values()) or len(units) != 1:
        return None
    return {p: prices[label] for p, label in pairs.items()}, units.pop()


def run_screen(cfg, work, pairs: dict[Pair, tuple[str, str]], pool: Pool, tokens: PairTokens | None = None,
               stored: pl.DataFrame | None = None) -> Screen:
    """Evaluate every pair on the ``pool`` (:func:`screen_pool`) and decide (:func:`screen_pairs`, each pair priced
    by :func:`pair_costs`, or as ``stored``, an earlier run of this sweep's screen rows, priced them:
    :func:`stored_costs`)."""
    tuning, sub = pool.tuning, pool.chunks
    qids = tuning.queries["query_id"].to_list()
    primary = measure_key(cfg.metrics.primary)
    by_spec = {e.spec_id: e for e in cfg.embedders}
    # chunks fetched per query: the deepest dense search of the sweep's retrievers
    search_depth = max([d.depth for r in cfg.retrievers if (d := r.dense_search()) is not None]
                       or [max(cfg.metrics.cutoffs)])
    values, shallow, cutoff, seconds = {}, set(), document_cutoff(primary), {}
    encoder = ScreenEncoder.of(work)
    for (i, spec_id) in pairs:
        run, seconds[(i, spec_id)] = _dense_run(encoder, tuning, sub[i], by_spec[spec_id], search_depth, cutoff)
        per_query = evaluate_stage(tuning, run, work.measures, chunks=sub[i], metrics_spec=cfg.metrics)
        per_query = per_query.with_columns(measure_key_expr(pl.col("measure"))).filter(pl.col("measure") == primary)
        if per_query.is_empty():
            raise ValueError(f"the primary measure {primary} is not measured on the screen")
        got = dict(zip(per_query["query_id"], per_query["value"]))
        values[(i, spec_id)] = np.array([got.get(q, np.nan) for q in qids], dtype=float)
        if cutoff is not None and _fewest_documents(run, qids) < cutoff:
            shallow.add((i, spec_id))
    again = stored_costs(stored, pairs)
    costs, unit = again or pair_costs(cfg, pairs, pool, tokens, seconds)
    log.info("screen: each pair's full embed priced in %s%s: %s", unit,
             " (as this sweep's first screen priced it)" if again else "",
             "; ".join(f"{pair_label(*pairs[p])} {priced(c, unit)}" for p, c in costs.items()))
    decided, leader = screen_pairs(values, pairs, cfg.search.alpha, shallow=frozenset(shallow),
                                   margin=cfg.search.margin, costs=costs)
    return Screen(decided, leader, len(pool.doc_ids), sum(s.height for s in sub), cfg.search.margin, costs, unit)


def _fewest_documents(run: pl.DataFrame, qids: list[str]) -> int:
    """The fewest distinct documents the chunk ``run`` names for any of the queries ``qids``."""
    per = dict(run.group_by("query_id").agg(pl.col("doc_id").n_unique()).iter_rows())
    return min((per.get(q, 0) for q in qids), default=0)


def ranked_chunks(row: np.ndarray, k: int, doc_of: np.ndarray, documents: int | None = None) -> np.ndarray:
    """Chunk positions of one query's scores ``row``, best first (ties: the earlier position): the top ``k``, and
    when ``documents`` is given and those name fewer distinct documents (``doc_of``: each chunk's document), on
    until ``documents`` distinct documents are named or the chunks run out — so that a document measure at cutoff
    ``documents`` is measured on as many documents for a fine chunker as for a whole-document one (the screen
    compares every pair at the same document depth)."""
    if k < len(row):
        cand = np.argpartition(-row, k - 1)[:k]
        order = cand[np.lexsort((cand, -row[cand]))]
    else:
        order = np.lexsort((np.arange(len(row)), -row))
    if documents is None or len(np.unique(doc_of[order])) >= documents or len(order) == len(row):
        return order
    full = np.lexsort((np.arange(len(row)), -row))
    first = np.sort(np.unique(doc_of[full], return_index=True)[1])  # where each document first appears
    cut = first[documents - 1] + 1 if len(first) >= documents else len(full)
    return full[:max(cut, k)]


def _dense_run(encoder: ScreenEncoder, ds, chunks: pl.DataFrame, emb, depth: int,
               documents: int | None = None) -> tuple[pl.DataFrame, float]:
    """Exact cosine search of ``ds``'s queries over ``chunks`` with ``emb``, both embedded through ``encoder``'s
    cache (their stats join ``encoder.stats``): each query's :func:`ranked_chunks` (``depth`` chunks, deeper until
    ``documents`` distinct documents), and the seconds the model spent encoding ``chunks`` (0 when cached)."""
    s, cache = encoder.settings, encoder.vector_cache
    with encoder.model_slot:
        docs, dstats = embed_texts(index_texts(chunks), emb, "document", cache, s.embed_segment_rows, True,
                                   s.min_free_bytes)
        queries, qstats = embed_texts(ds.queries["text"].to_list(), emb, "query", cache, s.embed_segment_rows, True,
                                      s.min_free_bytes)
    encoder.stats.extend(st for st in (dstats, qstats) if isinstance(st, EmbedStats))
    spent = dstats.encode_seconds if isinstance(dstats, EmbedStats) else 0.0
    docs, queries = unit_rows(np.asarray(docs, dtype=np.float32)), unit_rows(np.asarray(queries, dtype=np.float32))
    k = min(depth, docs.shape[0])
    if k == 0:
        return run_from_hits(ds.queries["query_id"].to_list(), chunks, [np.zeros(0, dtype=np.int64)] * queries.shape[0],
                             [np.zeros(0)] * queries.shape[0]), spent
    doc_of = chunks["doc_id"].to_numpy()
    ids, scores = [], []
    for start in range(0, queries.shape[0], 256):
        for row in queries[start:start + 256] @ docs.T:
            order = ranked_chunks(row, k, doc_of, documents)
            ids.append(order)
            scores.append(row[order].astype(float))
    return run_from_hits(ds.queries["query_id"].to_list(), chunks, ids, scores), spent
