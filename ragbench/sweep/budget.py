"""A sweep within a time budget (``ragbench sweep --budget 8h`` or ``budget:`` in the sweep file), and the ETA the
sweep logs as it goes.

:class:`StageClock` wraps the expensive stages (embedding a chunker's texts, building a collection, evaluating a
config and recording it): before each starts, its seconds are estimated with :func:`~ragbench.sweep.estimate.
stage_seconds` at the rates measured so far in this sweep (the calibration's until a stage of that kind has run);
when the seconds already spent plus that estimate exceed the budget, the stage does not start and raises
:class:`OverBudget`. Its configs are recorded as ``over_budget`` ("not run: over budget"), not failed, and the
sweep exits 0; a later run evaluates them (they are not stored as finished) and reuses the rest. A cheaper stage
after a refused one may still start. Embeddings run ahead of every dense config, so an embedded pair keeps the
seconds of its collection and first config until one of its configs starts: no later stage may spend them, and the
morning finds a result for every pair it paid to embed. After each embedding the clock logs the seconds left of the
planned work.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from ragbench.config import RunConfig, SweepConfig
from ragbench.core.durations import parse_duration
from ragbench.core.errors import ConfigError
from ragbench.core.progress import log, rough_duration
from ragbench.core.resources import memory_limit_bytes
from ragbench.results.outcomes import OVER_BUDGET
from ragbench.sweep.budget_fit import budget_fit, budget_order
from ragbench.sweep.decide import SweepPlan
from ragbench.sweep.estimate import Rates, WorkCounts, encode_seconds, estimate, stage_seconds
from ragbench.sweep.graph import StageFns
from ragbench.sweep.runner import NotRun
from ragbench.sweep.wrap_up import WrapUp


class OverBudget(NotRun):
    """A stage did not start: it would have run past the sweep's budget."""

    def __init__(self, what: str):
        super().__init__(f"{OVER_BUDGET} ({what})")


def parse_budget(text: str | float | int) -> float:
    """Seconds of a budget (:func:`ragbench.core.durations.parse_duration`); a ``ConfigError`` for anything else."""
    try:
        return parse_duration(text)
    except ValueError as e:
        raise ConfigError(f"budget {e}") from None


def with_budget(cfg: SweepConfig, budget: str | float | int | None) -> SweepConfig:
    """``cfg`` with its ``budget:`` replaced by ``budget`` (the command line's ``--budget``, the flow's parameter,
    which win over the file's), checked first: a ``ConfigError`` in one line before anything runs. None: ``cfg``."""
    return cfg if budget is None else cfg.model_copy(update={"budget": f"{parse_budget(budget)}s"})


class StageClock:
    """Times the sweep's expensive stages against ``budget_s`` (None: no budget, only the ETA), priced from
    ``counts`` (the plan's) with ``rates``, updated from what each stage measures; an embedding that encoded the
    plan's new texts also updates the model's stored calibration in ``home``
    (:func:`~ragbench.sweep.calibrate.learn_rate`)."""

    def __init__(self, budget_s: float | None, counts: WorkCounts, rates: Rates, chunker_labels: list[str],
                 started: float | None = None, home: Path | None = None):
        self.budget_s, self.rates, self.labels, self.home = budget_s, rates, chunker_labels, home
        self.started = time.perf_counter() if started is None else started
        self.tokens = {(e.chunker, e.model): e.new_tokens for e in counts.embeds if e.chunker is not None}
        self.new_texts = {(e.chunker, e.model): e.new for e in counts.embeds if e.chunker is not None}
        self.screen_tokens = {(e.chunker, e.model): e.new_tokens for e in counts.screen}  # pooled texts
        self.screen_texts = {(e.chunker, e.model): e.new for e in counts.screen}
        self.screen_skipped = False  # :meth:`skip_screen`
        self.pending = dict(self.tokens)  # embeddings not yet done: the ETA's remaining work
        # embeddings under way: when each began, and the seconds it was priced at
        self.running: dict[tuple[str, str], tuple[float, float]] = {}
        # per pair embedded (or under way) with no config started yet: the seconds kept for its collection and
        # first config, which later stages may not spend (embeddings run ahead of every dense config)
        self.owed: dict[tuple[str, str], float] = {}
        self.queries = counts.queries
        # configs to run by cost kind (:func:`cost_kind`); None: kind not known (:meth:`keep` tells)
        self.configs_left: Counter[str | None] = Counter({None: counts.run})
        self.planned = counts.run > 0
        self._eval: dict[str, list[float]] = {}  # measured seconds per config, by cost kind
        self._lock = threading.RLock()  # the progress thread reads what the stages' threads update
        self.refused = 0
        self.wrap_up, self.started_configs = WrapUp(), 0  # kept for the wrap-up (plan_clock), priced by configs started

    def keep(self, configs: list[RunConfig]) -> None:
        """Only ``configs`` are left to run (the screen took the others out): the ETA forgets the rest's work."""
        pairs = {(c.chunker.label, c.embedder.label) for c in configs if c.embedder is not None}
        with self._lock:
            self.pending = {p: tokens for p, tokens in self.pending.items() if p in pairs}
            self.configs_left = Counter(cost_kind(c) for c in configs)

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def _check(self, what: str, seconds: float, pair: tuple[str, str] | None) -> None:
        """Raise :class:`OverBudget` (logged) when the seconds spent, ``seconds`` and the wrap-up of the configs
        started, one kept per pair embedded (:meth:`reserved`) and one of ``pair`` (unless kept) pass the budget."""
        if self.budget_s is None:
            return
        with self._lock:
            configs = self.started_configs + len(self.owed) + (pair not in self.owed)
        spent, kept = self.elapsed(), self.wrap_up.seconds(configs)
        if spent + seconds + kept > self.budget_s:
            with self._lock:
                self.refused += 1
            log.warning("budget: %s not started: %.0f s spent + ~%.0f s would pass the budget of %.0f s%s", what,
                        spent, seconds, self.budget_s, kept_words(kept))
            raise OverBudget(what)

    def reserved(self, pair: tuple[str, str] | None = None) -> float:
        """Seconds a stage of ``pair`` (None: no pair, a BM25 config) may not spend: those kept for the collections
        and first configs of the pairs embedded whose configs have not started. A stage of such a pair spends what
        was kept for it and competes with the others' on its own price (0 here): the time they were kept is the
        same time, and the one that comes first runs."""
        with self._lock:
            return 0.0 if pair in self.owed else sum(self.owed.values())

    def skip_screen(self) -> None:
        """The screen will not run: each pair's embedding also encodes the pooled texts the plan left to the screen
        (priced at nothing, they would let the budget start embeddings it cannot afford)."""
        with self._lock:
            for pair, tokens in self.screen_tokens.items():
                self.tokens[pair] = self.tokens.get(pair, 0) + tokens
                self.pending[pair] = self.pending.get(pair, 0) + tokens
                self.new_texts[pair] = self.new_texts.get(pair, 0) + self.screen_texts.get(pair, 0)
            self.screen_tokens, self.screen_texts, self.screen_skipped = {}, {}, True

    def encoding_ahead(self, pair: tuple[str, str]) -> float:
        """Seconds the embeddings under way (but ``pair``'s) are still priced at: an embedding that starts now ends
        after them (they share the encoder and the cores; a runner that starts two at once made the second wait
        for the first, and a 90 s budget ended at 137 s)."""
        now = time.perf_counter()
        with self._lock:
            return sum(max(0.0, seconds - (now - began)) for p, (began, seconds) in self.running.items() if p != pair)

    def left_seconds(self) -> float:
        """Estimated seconds of the planned work not yet done, at the rates measured so far: each embedding to
        come priced in full, one under way less the seconds it has run (never below 0), and the configs left."""
        now = time.perf_counter()
        with self._lock:
            embeds = sum(max(0.0, stage_seconds("embed", 0, tokens, pair[1], self.rates)
                             - (now - self.running[pair][0] if pair in self.running else 0.0))
                         for pair, tokens in self.pending.items())
            return embeds + sum(max(0, n) * self.config_seconds(kind) for kind, n in self.configs_left.items())

    def config_seconds(self, kind: str | None) -> float:
        """The seconds one config of cost ``kind`` is priced at (None: a config of any kind): the mean of the
        configs of that kind measured in this sweep, else of every config measured (a BM25 config costs less than
        one that samples a model's query latency, or reranks), else the plan's rate."""
        with self._lock:
            measured = self._eval.get(kind) or [t for times in self._eval.values() for t in times]
            if measured:
                return sum(measured) / len(measured)
            return stage_seconds("evaluate", self.queries, 0, None, self.rates)

    def eta_seconds(self) -> float | None:
        """The sweep's ETA (its progress line and bar): :meth:`left_seconds`, or None (``ETA ?``) while an embedding
        still to run has a model with no rate yet (not calibrated, not measured in this sweep: its encoding would read
        as free) or with no plan to price. The configs' mean rate would say less: BM25 runs first and in seconds."""
        with self._lock:
            unpriced = any(tokens and model not in self.rates.seconds_per_token
                           for (_, model), tokens in self.pending.items())
            return None if unpriced or not self.planned else self.left_seconds()

    def wrap(self, fns: StageFns) -> StageFns:
        """The graph's stage functions with the expensive ones timed (and gated when there is a budget)."""
        return StageFns(fns.chunk, fns.embed_queries, self.embed_documents(fns.embed_documents), self.index(fns.index),
                        self.evaluate(fns.evaluate), self.record(fns.record))

    def embed_documents(self, fn):
        def run(chunker_index, chunks, emb):
            pair = (self.labels[chunker_index], emb.label)
            tokens = self.tokens.get(pair, 0)
            # priced with its collection and first config (vectors no config reads are a night spent on nothing),
            # with what kept pairs' first configs still need, and after the embeddings under way
            useful = stage_seconds("index", chunks.height, 0, None, self.rates) + self.config_seconds(None)
            seconds = stage_seconds("embed", 0, tokens, emb.label, self.rates)
            self._check(f"embedding {pair[0]} x {pair[1]}",
                        seconds + useful + self.reserved(pair) + self.encoding_ahead(pair), pair)
            with self._lock:
                self.running[pair] = (time.perf_counter(), seconds)
                self.owed[pair] = useful
            try:
                stats = fn(chunker_index, chunks, emb)
            except BaseException:
                with self._lock:  # a failed embedding's configs will not run: nothing to keep for them
                    self.owed.pop(pair, None)
                raise
            finally:
                with self._lock:
                    self.running.pop(pair, None)
            with self._lock:
                self.pending.pop(pair, None)
                if stats.computed and stats.encode_seconds > 0 and tokens:
                    rates = dict(self.rates.seconds_per_token)
                    rates[emb.label] = stats.encode_seconds / tokens
                    self.rates = replace(self.rates, seconds_per_token=rates)
            if self.home is not None and stats.computed == self.new_texts.get(pair):  # tokens are these texts'
                learn(self.home, emb, stats.encode_seconds, tokens, stats.computed)
            log.info("plan: %.0f s so far, ~%.0f s of planned work left (measured rates)%s", self.elapsed(),
                     self.left_seconds(), "" if self.budget_s is None else f"; budget {self.budget_s:.0f} s")
            return stats
        return run

    def index(self, fn):
        def run(chunker_index, emb, index_spec, chunks, sparse):
            pair = (self.labels[chunker_index], emb.label)
            self._check(f"index {pair[0]} x {pair[1]}",
                        stage_seconds("index", chunks.height, 0, None, self.rates) + self.reserved(pair), pair)
            with self._lock:  # its collection is being built: what stays kept is its first config
                if pair in self.owed:
                    self.owed[pair] = min(self.owed[pair], self.config_seconds(None))
            return fn(chunker_index, emb, index_spec, chunks, sparse)
        return run

    def evaluate(self, fn):
        def run(chunker_index, run_config, chunks, **kwargs):
            kind = cost_kind(run_config)
            pair = None if run_config.embedder is None else (run_config.chunker.label, run_config.embedder.label)
            try:
                self._check(f"config {run_config.labels.text}", self.config_seconds(kind) + self.reserved(pair), pair)
                with self._lock:
                    self.started_configs += 1
            finally:
                with self._lock:  # a config of its pair started (or never will): its pair keeps nothing more
                    self.owed.pop(pair, None)
            t0 = time.perf_counter()
            try:
                return fn(chunker_index, run_config, chunks, **kwargs)
            finally:
                self._measured(kind, time.perf_counter() - t0)
        return run

    def record(self, fn):
        def run(position, run_config, evaluated):
            t0 = time.perf_counter()
            try:
                return fn(position, run_config, evaluated)
            finally:
                with self._lock:  # recording is part of a config's cost
                    if times := self._eval.get(cost_kind(run_config)):
                        times[-1] += time.perf_counter() - t0
        return run

    def measured_configs(self) -> tuple[int, float]:
        """(configs, seconds) timed, evaluating and recording; reranked and rewritten ones, priced apart, left out."""
        with self._lock:
            times = [t for kind, measured in self._eval.items() if " + " not in kind for t in measured]
        return len(times), sum(times)

    def _measured(self, kind: str, seconds: float) -> None:
        with self._lock:
            self._eval.setdefault(kind, []).append(seconds)
            self.configs_left[kind if self.configs_left[kind] > 0 else None] -= 1


def not_failing_over_budget(callback):
    """``callback(stage, futures)`` (the fail-fast check) with an over-budget config not taken for a failure."""
    def run(stage, futures):
        try:
            callback(stage, futures)
        except OverBudget:
            pass
    return run


def learn(home: Path, emb, seconds: float, tokens: int, texts: int) -> None:
    """Keep the rate an embedding stage measured as ``emb``'s calibration in ``home``
    (:func:`~ragbench.sweep.calibrate.learn_rate`), logged; a failure is logged, never raised."""
    from ragbench.sweep.calibrate import learn_rate

    try:
        if learn_rate(home, emb, seconds, tokens, texts) is not None:
            log.info("calibration of %s: %.0f texts/s measured on %d texts of this sweep, kept for the next "
                     "plan", emb.label, texts / seconds, texts)
    except Exception as e:  # the calibration informs; it never stops a sweep
        log.warning("calibration of %s not updated: %s", emb.label, e)


def cost_kind(run_config: RunConfig) -> str:
    """What a config's evaluation costs like: its retriever kind, with a reranker or a query rewrite named (a BM25
    config answers in milliseconds; a dense one also samples its model's query latency; a reranked one scores every
    candidate with a cross-encoder)."""
    r = run_config.retriever
    return r.kind + (" + rerank" if r.rerank else "") + (" + rewrite" if r.rewrite else "")


def kept_words(kept: float) -> str:
    """``, ~N s of it kept for the wrap-up (closing, report)`` when ``kept`` seconds are, else nothing."""
    return f", ~{kept:.0f} s of it kept for the wrap-up (closing, report)" if kept >= 0.5 else ""


def screen_fits(clock: StageClock, todo: list[RunConfig]) -> bool:
    """Whether a screen still fits ``clock``'s budget (True without one): the seconds spent, the screen's pooled
    embeddings (:attr:`StageClock.screen_tokens` at the rates known now) and the configs of ``todo`` without an
    embedder (BM25: they run after the screen, and first of all) end within it. A screen that does not fit is skipped,
    logged: spent on the pool, the night would end with no config, where the budget alone orders the grid
    cheapest pair first."""
    if clock.budget_s is None:
        return True
    pool = sum(stage_seconds("embed", 0, tokens, model, clock.rates)
               for (_, model), tokens in clock.screen_tokens.items())
    n_cheap = sum(c.embedder is None for c in todo)
    spent = clock.elapsed()
    kept = clock.wrap_up.seconds(n_cheap)
    if spent + pool + n_cheap * clock.config_seconds(None) + kept <= clock.budget_s:
        return True
    log.warning("screen: skipped: its pooled embeddings (~%s) and the %d configs without an embedder would pass "
                "the budget of %s (%s spent)%s; the budget orders the full grid instead, cheapest pair first",
                rough_duration(pool), n_cheap, rough_duration(clock.budget_s), rough_duration(spent),
                kept_words(kept))
    return False


def plan_clock(cfg, ds, home, plan: SweepPlan, budget_s: float | None, started: float | None = None,
               pool=None, wrap_up: WrapUp = WrapUp()) -> tuple[StageClock, list[RunConfig]]:
    """The plan's table in the log (:mod:`ragbench.sweep.forecast`), the clock that times the expensive stages
    against the budget (``budget_s``, else the sweep file's ``budget:``, else none) from ``started``, keeping
    ``wrap_up`` of it for what follows the last stage (:mod:`ragbench.sweep.wrap_up`), and the configs
    to run: in the order :func:`~ragbench.sweep.budget_fit.budget_order` gives when there is a budget (the table
    then says what fits: :func:`~ragbench.sweep.budget_fit.budget_fit`), else in config order. Without a budget a
    model is not calibrated for the table (its stored calibration is used, else its encoding is priced once the
    sweep has measured it). ``pool``: a screened sweep's (:func:`~ragbench.sweep.screen.screen_pool_of`), priced
    in the table."""
    from ragbench.sweep.forecast import Forecast, count_work, plan_lines, rates_of

    budget_s = parse_budget(cfg.budget) if budget_s is None and cfg.budget else budget_s
    labels = [ch.label for ch in cfg.chunkers]
    if not plan.todo:
        return StageClock(budget_s, WorkCounts(), Rates(), labels, started), []
    # calibrating costs a model load and a sample: only a budget with time left needs it before the first embedding
    spent = _since(started)
    calibrate = budget_s is not None and spent + wrap_up.seconds(1) < budget_s  # room for one config at least
    if budget_s is not None and not calibrate:
        log.warning("budget: %.0f s of %.0f s spent before the plan (~%.0f s kept for the wrap-up): no model "
                    "calibrated, no stage will start", spent, budget_s, wrap_up.seconds(1))
    try:
        counts, cals, _ = count_work(cfg, ds, home / "cache", plan, home, calibrate_models=calibrate, pool=pool)
        rates = rates_of(cals, home)
        forecast = Forecast(counts, estimate(counts, rates), cals, memory_limit_bytes(), wrap_up)
        # from here: the chunks are cut and the models calibrated now are loaded, in the seconds spent
        fit = [] if budget_s is None else budget_fit(forecast, plan.todo, budget_s, _since(started), chunked=True,
                                                     loaded=loaded_here(cfg.embedders)).lines()
        log.info("plan of sweep %s (%d to evaluate, %d reused, %d done):\n%s", plan.sweep_id, len(plan.todo),
                 len(plan.reused), len(plan.done), "\n".join(plan_lines(forecast) + fit))
        if (warning := forecast.memory_warning()) is not None:
            log.warning("plan: %s", warning)
    except Exception as e:  # the plan informs; it never stops a sweep
        log.warning("plan: could not be estimated (%s)", e)
        counts, rates = WorkCounts(), Rates()
    clock = StageClock(budget_s, counts, rates, labels, started, home)
    clock.keep(plan.todo)  # each config priced by its kind once one of the kind is measured
    if budget_s is None:
        return clock, plan.todo
    clock.wrap_up = wrap_up
    if pool is not None and not screen_fits(clock, plan.todo):
        clock.skip_screen()
    pairs = {pair: encode_seconds(pair[1], tokens, rates) for pair, tokens in clock.tokens.items()}
    kept = (f", ~{wrap_up.fixed:.1f} s + {wrap_up.per_config:.2f} s a config with results kept for the wrap-up "
            "(closing, report)" if wrap_up.fixed or wrap_up.per_config else "")
    log.info("budget %.0f s (%.0f s spent)%s: configs without an embedder first, then the "
             "first config of every chunker x model pair, cheapest embedding first, then the rest", budget_s,
             clock.elapsed(), kept)
    return clock, budget_order(plan.todo, pairs)


def _since(started: float | None) -> float:
    return 0.0 if started is None else time.perf_counter() - started


def loaded_here(embedders) -> frozenset[str]:
    """The labels of ``embedders`` whose encoder this process has loaded (a calibration loads it)."""
    from ragbench.embedding.embed import first_load

    return frozenset(e.label for e in embedders if first_load(e) is not None)
