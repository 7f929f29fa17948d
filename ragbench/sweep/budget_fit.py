"""Whether a sweep fits its budget, said before the run: ``ragbench plan --budget 8h`` (or ``budget:`` in the sweep
file), and the plan that opens every budgeted sweep.

:func:`budget_fit` walks the configs to run in the order a budgeted sweep runs them (:func:`budget_order`, kept here
beside the walk) on the plan's prices, with the rule the sweep's :class:`~ragbench.sweep.budget.StageClock` applies:
a stage starts only when the seconds spent, its own and the wrap-up's (of the configs with results once it has run:
:class:`~ragbench.sweep.wrap_up.WrapUp`) end within the budget, in the sweep's order of
work: cutting chunks and the screen's pool, the configs without an embedder (each its evaluation), embedding the
queries and loading their models (not gated: every dense config needs them), then the rest; the first config of a
chunker x model pair also costs the pair's embedding, its collections and, the first time a model is needed, loading
it (a pair not embedded prices each of its configs so: refused once, none of them runs); a cheaper stage after a
refused one may still start. The walk is sequential where the sweep overlaps a little, and it prices every config of
the sweep alike (the evaluate row's mean): a forecast at the plan's rates, as the plan's total is, which each
running sweep corrects with what it measures (its log's ETA). A screened sweep's fit assumes the screen keeps every
pair, as the plan's total does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragbench.config import RunConfig
from ragbench.config.labels import LABEL_SEPARATOR
from ragbench.core.progress import rough_duration

if TYPE_CHECKING:
    from ragbench.sweep.forecast import Forecast

#: over-budget configs named in the plan's lines (all of them are in its JSON)
NAMED = 6
#: a plan whose work ends within this share of the budget, either side, is called tight: on small sweeps the plan's
#: total came within 1-18 % of the measured sweep (docs/cost.md), so which of the last configs start is a toss-up
TIGHT = 0.2


def _pair(c: RunConfig) -> tuple[str, str]:
    return c.chunker.label, c.embedder.label


def budget_order(configs: list[RunConfig], pair_seconds: dict[tuple[str, str], float]) -> list[RunConfig]:
    """The configs in the order a budgeted sweep evaluates them.

    The rule: configs without an embedder (BM25) first; then the first config of every (chunker x model) pair,
    from the cheapest pair to embed (``pair_seconds``: estimated seconds of its new texts) to the dearest — so the
    static models come before the transformers; then the pairs' other configs in the same pair order. Expected value
    per second is taken as "one more pair covered" over "one more knob of a covered pair": a pair's first config
    says whether that chunker x model can compete at all, its other retrieval knobs are cheap variations (the graph
    submits configs without an embedder first, then embeddings, collections and dense configs in this order; the
    clock keeps each embedded pair's first config its seconds, :class:`~ragbench.sweep.budget.StageClock`)."""
    seen: set[tuple[str, str]] = set()

    def key(c: RunConfig):
        if c.embedder is None:
            return (0, 0.0, 0)
        pair = _pair(c)
        first = pair not in seen
        seen.add(pair)
        return (1, 0 if first else 1, pair_seconds.get(pair, 0.0))

    keyed = [(key(c), n, c) for n, c in enumerate(configs)]
    return [c for _, _, c in sorted(keyed, key=lambda t: (t[0], t[1]))]


@dataclass(frozen=True)
class BudgetFit:
    """The plan against ``budget_seconds``: ``needed_seconds`` (every planned stage and the wrap-up, from the first
    stage), the configs expected to finish (``finish``, in the budget's order) and to be marked ``over_budget``
    (``over``), and ``ends_seconds``: when the stages that start are expected to end, the wrap-up included; both sums
    count ``spent_seconds``, gone before the walk.
    ``unpriced``: models not calibrated (their encoding is priced at nothing: the fit is then optimistic)."""

    budget_seconds: float
    needed_seconds: float
    finish: tuple[RunConfig, ...]
    over: tuple[RunConfig, ...]
    ends_seconds: float
    unpriced: tuple[str, ...] = ()
    spent_seconds: float = 0.0  # already gone when the walk began (a sweep's plan): counted in both sums

    @property
    def fits(self) -> bool:
        return not self.over

    @property
    def tight(self) -> bool:
        """The planned work ends within :data:`TIGHT` of the budget, either side."""
        return abs(self.needed_seconds - self.budget_seconds) <= TIGHT * self.budget_seconds

    def lines(self) -> list[str]:
        """The plan's budget lines: whether it fits and, when not, what finishes and what is left over."""
        budget = f"  budget {rough_duration(self.budget_seconds)}"
        caveat = (f" (not counting the encoding of {', '.join(self.unpriced)}: not calibrated)"
                  if self.unpriced else "")
        caveat += (f"; tight: within {TIGHT:.0%} of the budget, where the plan's estimates can err, so the last "
                   "configs in the budget's order may or may not start" if self.tight else "")
        if self.fits:
            share = self.needed_seconds / self.budget_seconds
            said = "<1%" if share < 0.01 else f"{share:.0%}"
            return [(f"{budget}: fits, ~{rough_duration(self.needed_seconds)} of it from {self._origin()} to the "
                     f"wrap-up's end ({said}){caveat}")]
        n_cheap = sum(c.embedder is None for c in self.finish)
        pairs = len({_pair(c) for c in self.finish if c.embedder is not None})
        which = ", ".join(part for part in (f"{n_cheap} without an embedder" if n_cheap else "",
                                            f"then {pairs} chunker x model pairs, cheapest embedding first"
                                            if pairs else "") if part)
        named = LABEL_SEPARATOR.join(c.labels.text for c in self.over[:NAMED])
        more = f" and {len(self.over) - NAMED} more" if len(self.over) > NAMED else ""
        finished = (f"at these rates {len(self.finish)} of {len(self.finish) + len(self.over)} configs finish by "
                    f"~{rough_duration(self.ends_seconds)} ({which})" if self.finish else
                    f"no config starts: the chunks, the queries' vectors and the wrap-up alone take "
                    f"~{rough_duration(self.ends_seconds)}")
        head = (f"{budget}: does not fit: ~{rough_duration(self.needed_seconds)} from {self._origin()} to the "
                f"wrap-up's end{caveat}; {finished}")
        tail = (f"  budget: {len(self.over)} would be over_budget (not run, not failed; the next run continues them): "
                f"{named}{more}")
        return [head, tail]

    def _origin(self) -> str:
        spent = self.spent_seconds
        return f"the start ({rough_duration(spent)} spent)" if spent >= 0.5 else "the first stage"

    def json(self) -> dict:
        """The fit as a JSON-ready dict (``finish`` and ``over_budget``: config ids in the budget's order)."""
        return {"budget_seconds": self.budget_seconds, "needed_seconds": self.needed_seconds, "fits": self.fits,
                "ends_seconds": self.ends_seconds, "finish": [c.config_id for c in self.finish],
                "over_budget": [c.config_id for c in self.over], "tight": self.tight,
                "uncalibrated": list(self.unpriced)}


def budget_fit(f: Forecast, todo: Sequence[RunConfig], budget_s: float, spent: float = 0.0,
               loaded: frozenset[str] = frozenset(), chunked: bool = False) -> BudgetFit:
    """Walk ``todo`` (the configs the sweep will evaluate) against ``budget_s`` seconds on the plan ``f``'s priced
    rows, ``spent`` seconds already gone (the convention is in the module docstring). The sweep walks it once it
    has planned: ``loaded``, the models its calibration loaded in this process, and ``chunked`` (the chunks are cut)
    are then paid for in ``spent``, not priced again."""
    counts, rows = f.counts, f.estimate.rows
    # the estimate prices its counts in order: one embed row per counts.embeds, one index row per counts.indexes
    embeds = list(zip(counts.embeds, [r for r in rows if r.stage == "embed"], strict=True))
    indexes = list(zip(counts.indexes, [r for r in rows if r.stage == "index"], strict=True))
    load = {r.what: r.seconds for r in rows if r.stage == "load"}
    pair_embed = {(e.chunker, e.model): r.seconds for e, r in embeds if e.chunker is not None and e.new}
    pair_index: dict[tuple[str, str], float] = {}
    for i, r in indexes:
        pair_index[(i.chunker, i.model)] = pair_index.get((i.chunker, i.model), 0.0) + r.seconds
    per_config = (f.estimate.seconds_of("evaluate") + f.estimate.seconds_of("llm")) / max(counts.run, 1)
    screened = {e.model for e in counts.screen if e.new}
    clock = (spent + (0.0 if chunked else f.estimate.seconds_of("chunk")) + f.estimate.seconds_of("screen")
             + sum(load.get(m, 0.0) for m in screened - loaded))
    in_memory = set(loaded) | screened
    # the queries' vectors (and their models' loads) come after the configs without an embedder, ungated
    query_models = {e.model for e, _ in embeds if e.chunker is None and e.new} - in_memory
    queries: float | None = (sum(r.seconds for e, r in embeds if e.chunker is None)
                             + sum(load.get(m, 0.0) for m in query_models))
    in_memory |= query_models
    wrap_up = f.wrap_up  # the configs with results (this walk's finished ones and the stored) are its price
    finish: list[RunConfig] = []
    over: list[RunConfig] = []
    embedded: set[tuple[str, str]] = set()
    for c in budget_order(list(todo), pair_embed):
        pair = None if c.embedder is None else _pair(c)
        if pair is not None and queries is not None:
            clock, queries = clock + queries, None
        cost = per_config
        if pair is not None and pair not in embedded:
            first_use = pair in pair_embed and pair[1] not in in_memory
            cost += (load.get(pair[1], 0.0) if first_use else 0.0) + pair_embed.get(pair, 0.0) \
                + pair_index.get(pair, 0.0)
        if clock + cost + wrap_up.seconds(len(finish) + 1) > budget_s:  # a pair refused stays refused: its price
            # never falls, and time and the wrap-up only grow
            over.append(c)
            continue
        clock += cost
        finish.append(c)
        if pair is not None and pair not in embedded:
            embedded.add(pair)
            in_memory.add(pair[1])
    paid = (f.estimate.seconds_of("chunk") if chunked else 0.0) + sum(load.get(m, 0.0) for m in loaded)
    needed = spent + f.estimate.total_seconds - paid + wrap_up.seconds(len(todo))
    return BudgetFit(budget_s, needed, tuple(finish), tuple(over), clock + wrap_up.seconds(len(finish)),
                     tuple(f.estimate.unpriced), spent)
