"""The promotion gate: may a config of a finished sweep replace what is in production? Decided on evidence.

A candidate config of a finished sweep is promoted only if

* **there is a production config**: the candidate beats it on the *same dataset fingerprint* on the primary measure
  (default: the sweep's ``metrics.primary``): the paired randomization test
  (:func:`ragbench.evaluation.paired_tests.paired_randomization_test`, two-sided, 10 000 sign flips) over the
  queries both have a value for must give ``p < alpha`` **and** a positive mean difference. Production's per-query
  values come from the candidate's own sweep if it evaluated the production config, otherwise from the newest
  finished sweep on the same fingerprint that did (paired by ``query_id``). If production was never evaluated on
  that data, the gate refuses: there is no evidence. The paired t-test p-value is reported alongside.

  **When the candidate's sweep has a held-out set** (``dataset.holdout`` in its stored spec), the pairs are its
  held-out queries only: the candidate's ``heldout_<primary>`` values against production's values on the same
  queries (production's ``heldout_<primary>`` or, from a sweep with another split or none, its ``<primary>``: a
  per-query value does not depend on the split). The tuning queries chose the candidate, so its lead there is
  optimistic (the winner's curse); the evidence says the gate used the held-out set and how many queries.
* **there is none yet** (first promotion): the candidate is the best config of its sweep or tied with it
  (:func:`ragbench.evaluation.comparison.compare_configs`, Holm-adjusted p >= alpha against the best).
* or ``force=True`` with a non-empty ``reason`` (:func:`ragbench.promotion.production.promote` records it).

A measure deeper than the documents a config's run reached is refused (its value is not comparable). The CI check
of a candidate against production on probe queries is another gate: :mod:`ragbench.promotion.regression_gate`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import polars as pl

from ragbench.config.labels import config_label
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import MeasureMap, measure_key
from ragbench.data.holdout import heldout_key, spec_holdout
from ragbench.evaluation.comparison import compare_configs
from ragbench.evaluation.means import query_mean
from ragbench.evaluation.metrics import document_cutoff, unreached_depth
from ragbench.evaluation.paired_tests import paired_means, paired_randomization_test, paired_t_test
from ragbench.results.lookup import sweep_primary
from ragbench.results.store import ResultStore
from ragbench.results.store_promotions import Promotion


class PromotionRefused(RagbenchError):
    """The gate refused: the message carries the evidence (means, paired queries, p-values) and how to override."""


@dataclass(frozen=True)
class GateDecision:
    """The gate's verdict and the numbers behind it.

    ``p_value`` / ``t_p_value`` / ``mean_diff`` / ``n`` describe candidate vs production (or, for a first
    promotion, the Holm-adjusted p-value against the sweep's best); ``evidence`` says it in words.
    """

    allowed: bool
    evidence: str
    primary: str
    candidate_mean: float
    baseline: str | None = None  # production config name (or the sweep's best, for a first promotion)
    baseline_mean: float | None = None
    mean_diff: float | None = None
    n: int | None = None
    p_value: float | None = None
    t_p_value: float | None = None


@dataclass(frozen=True)
class _GateSettings:
    """How the gate decides: the measure (None: the sweep's primary), the level ``alpha`` of its test, and the
    resamples and seed of the randomization test."""

    primary: str | None = None
    alpha: float = 0.05
    n_resamples: int = 10_000
    seed: int = 0


@dataclass(frozen=True)
class _Candidate:
    """The config the gate decides on: where it is stored and its mean on the primary measure."""

    store: ResultStore
    sweep_id: str
    config_id: str
    name: str
    primary: str
    mean: float
    fingerprint: str


def format_p(p: float | None) -> str:
    """A p-value for a message: 4 significant digits, ``n/a`` when there is none (None or NaN)."""
    return "n/a" if p is None or (isinstance(p, float) and math.isnan(p)) else f"{p:.4g}"


def _refuse_shallow(store: ResultStore, sweep_id: str, config_id: str, name: str, primary: str) -> None:
    """Refuse a gate on a document measure deeper than the documents the config's run reached
    (:func:`ragbench.evaluation.metrics.unreached_depth`): its value is not comparable."""
    depth = unreached_depth(MeasureMap(store.config_means(sweep_id, config_id)), primary)
    if depth is not None:
        raise PromotionRefused(f"{name} cannot be gated on {primary}: its run named only {depth} distinct documents "
                               f"for some query of sweep {sweep_id}, fewer than the cutoff; rerun with "
                               f"retrievers[].documents: {document_cutoff(primary)} or gate on a shallower measure")


def check_promotion_gate(store: ResultStore, sweep_id: str, config_id: str, *, primary: str | None = None,
                         alpha: float = 0.05, n_resamples: int = 10_000, seed: int = 0) -> GateDecision:
    """Decide whether ``config_id`` of ``sweep_id`` may replace what is in production (see the module docstring)."""
    sweep = store.sweep(sweep_id)
    if sweep is None:
        raise RagbenchError(f"sweep {sweep_id!r} not found in {store.path}")
    primary = measure_key(primary) if primary else sweep_primary(store, sweep_id)
    board = store.leaderboard(sweep_id)
    names = {cid: config_label(json.loads(spec or "{}"), n)  # labels: the one name people read
             for cid, n, spec in board.select("config_id", "name", "spec_json").iter_rows()}
    cfg = board.filter(pl.col("config_id") == config_id)
    if cfg.is_empty():
        raise RagbenchError(f"config {config_id} is not part of sweep {sweep_id}")
    status, error = cfg.select("status", "error").row(0)
    name = names[config_id]
    if status != "finished":
        raise PromotionRefused(f"config {name} did not finish in sweep {sweep_id} ({error}); nothing to promote")
    # mean of the per-query values, as the paired tests see them (and as primary_value was always recorded)
    cand = store.measure_values(sweep_id, config_id, primary)
    if cand.is_empty():
        raise RagbenchError(f"measure {primary!r} was not computed for config {name} in sweep {sweep_id}")
    _refuse_shallow(store, sweep_id, config_id, name, primary)
    candidate = _Candidate(store, sweep_id, config_id, name, primary, query_mean(cand["value"]),
                           sweep["dataset_fingerprint"])
    gate = _GateSettings(primary, alpha, n_resamples, seed)
    rows = store.promotion_records(active=True)
    if not rows:
        return _first_promotion(candidate, names, gate)
    return _against_production(candidate, rows[0], gate)


def _first_promotion(c: _Candidate, names: dict[str, str], gate: _GateSettings) -> GateDecision:
    """No production yet: the candidate must be the best config of its sweep or tied with it (Holm)."""
    shallow = [cfg for cfg, (mets, _, _) in c.store.stored_config_metrics(c.sweep_id).items()
               if unreached_depth(MeasureMap(mets), c.primary) is not None]  # not comparable on primary
    pq = c.store.per_query_values(c.sweep_id, [c.primary]).filter(~pl.col("config_id").is_in(shallow))
    comp = compare_configs(pq, c.primary, alpha=gate.alpha, n_resamples=gate.n_resamples, seed=gate.seed)
    best = comp.config(comp.best)
    best_name = names[comp.best]
    if c.config_id == comp.best:
        return GateDecision(True, f"first promotion: {c.name} is the best config of sweep {c.sweep_id} on "
                            f"{c.primary} ({c.mean:.4f})", c.primary, c.mean, best_name, best.mean)
    pair = comp.pair(c.config_id, comp.best)
    if c.config_id in comp.tied_with_best:
        return GateDecision(True, f"first promotion: {c.name} ({c.primary} {c.mean:.4f}) is tied with the best "
                            f"config {best_name} ({best.mean:.4f}): Holm-adjusted p = {format_p(pair.p_adjusted)}"
                            f" >= {gate.alpha:g} over {pair.n} paired queries", c.primary, c.mean, best_name,
                            best.mean, pair.mean_diff, pair.n, pair.p_adjusted)
    return GateDecision(False, f"first promotion needs the best config of the sweep or one tied with it: {c.name} "
                        f"has {c.primary} {c.mean:.4f}, significantly below the best {best_name} "
                        f"({best.mean:.4f}); mean difference {pair.mean_diff:+.4f} over {pair.n} paired queries, "
                        f"Holm-adjusted p-value = {format_p(pair.p_adjusted)} < {gate.alpha:g}", c.primary, c.mean,
                        best_name, best.mean, pair.mean_diff, pair.n, pair.p_adjusted)


def _against_production(c: _Candidate, live: Promotion, gate: _GateSettings) -> GateDecision:
    """The candidate against the live promotion on the same data: significantly better, or refused."""
    store, fp = c.store, c.fingerprint
    if live.config_id == c.config_id and live.dataset_fingerprint == fp:
        return GateDecision(False, f"{c.name} is already in production (promoted {live.promoted_at:%Y-%m-%d %H:%M} "
                            f"from sweep {live.sweep_id})", c.primary, c.mean, live.label)
    # production's per-query values on this very data: from this sweep if it ran it, else the newest sweep that did
    base_sweep = store.latest_sweep_with_config(live.config_id, fp, prefer=c.sweep_id)
    if base_sweep is None:
        return GateDecision(False, f"no evidence: the production config {live.label} ({live.config_id}) was never "
                            f"evaluated on dataset {fp} of sweep {c.sweep_id} (it was promoted on "
                            f"{live.dataset_fingerprint}); run a sweep on this dataset that includes it",
                            c.primary, c.mean, live.label)
    _refuse_shallow(store, base_sweep, live.config_id, f"production {live.label}", c.primary)
    split = spec_holdout(store.sweep_spec(c.sweep_id))
    gated_on, cand_mean, cand, base = _gated_values(c, live, base_sweep, split)
    paired = cand.join(base, on="query_id", how="inner", suffix="_prod").sort("query_id")
    a, b = paired["value"].to_numpy(), paired["value_prod"].to_numpy()
    rand = paired_randomization_test(a, b, n_resamples=gate.n_resamples, seed=gate.seed)
    t = paired_t_test(a, b)
    cand_paired, base_mean = paired_means(a, b)
    where = "this sweep" if base_sweep == c.sweep_id else f"sweep {base_sweep}"
    held_note = "" if split is None else (
        f"gated on the held-out set: {rand.n} queries never used to rank the configs (dataset.holdout "
        f"{split[0]:g}, seed {split[1]}); ")
    facts = (f"{held_note}{c.name} vs production {live.label} on {gated_on} over {rand.n} paired "
             f"queries of dataset {fp} (production values from {where}): {cand_paired:.4f} vs {base_mean:.4f}, mean "
             f"difference {rand.mean_diff:+.4f}; paired randomization p-value = {format_p(rand.p_value)} (t-test "
             f"p-value = {format_p(t.p_value)})")
    ok = rand.n > 0 and rand.mean_diff > 0 and rand.p_value < gate.alpha
    verdict = (f"significantly better (p < {gate.alpha:g})" if ok else
               f"not significantly better: promotion needs a positive difference with p < {gate.alpha:g}")
    return GateDecision(ok, f"{facts}: {verdict}", gated_on, cand_mean, live.label, base_mean, rand.mean_diff,
                        rand.n, rand.p_value, t.p_value)


def _gated_values(c: _Candidate, live: Promotion, base_sweep: str, split: tuple | None
                  ) -> tuple[str, float, pl.DataFrame, pl.DataFrame]:
    """``(measure, candidate mean, candidate values, production values)`` the gate pairs: the primary measure, or,
    when the sweep has a held-out ``split``, the candidate's held-out values against production's on those
    queries (its held-out values, else its primary ones: a per-query value does not depend on the split)."""
    store = c.store
    if split is None:
        return (c.primary, c.mean, store.measure_values(c.sweep_id, c.config_id, c.primary),
                store.measure_values(base_sweep, live.config_id, c.primary))
    gated_on = heldout_key(c.primary)  # judge on the queries the choice never saw
    cand = store.measure_values(c.sweep_id, c.config_id, gated_on)
    if cand.is_empty():
        raise RagbenchError(f"sweep {c.sweep_id} has a held-out set (dataset.holdout {split[0]:g}) but config "
                            f"{c.name} has no {gated_on} values; re-run the sweep")
    base = pl.concat([store.measure_values(base_sweep, live.config_id, gated_on),
                      store.measure_values(base_sweep, live.config_id, c.primary)]).unique("query_id", keep="first")
    return gated_on, query_mean(cand["value"]), cand, base
