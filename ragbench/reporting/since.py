"""Since the previous sweep: what changed between a sweep and its predecessor (``ragbench diff``, a report section).

The predecessor of a sweep is the previous *finished* sweep of the same name on the same dataset fingerprint
(:func:`predecessor`), or any sweep named with ``--since``. Between the two (:func:`since_previous`):

* configs added and removed (by config id: the hash of the config's spec);
* each shared config's change in the primary measure, ``now − then`` per query on the queries both have a value
  for, with the report's paired test (randomization with the report's resamples and seed, or Student's t) and
  Holm's correction over the shared configs; W/T/L counts queries where now beats / ties / loses to then
  (:data:`ragbench.evaluation.comparison.TIE_TOLERANCE`);
* the winner then and now (the best mean on the primary measure, configs too shallow for it left out, as the
  report's best);
* the questions that flipped under the winner: a relevant document in the top ``k`` (``hit@k``, ``k`` the primary
  measure's cutoff, else 10) for the winner then and not for the winner now (``lost``), and the reverse
  (``gained``), with their text when the sweep's dataset can be loaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from ragbench.config.labels import ConfigLabels
from ragbench.core.measure_keys import MeasureMap
from ragbench.evaluation.comparison import TIE_TOLERANCE
from ragbench.evaluation.metrics import document_cutoff, unreached_depth
from ragbench.evaluation.paired_tests import (holm_correction, pair_seed, paired_diffs, paired_means,
                                              paired_randomization_test, paired_t_test, required_resamples)
from ragbench.results.completion import FINAL_STATUSES
from ragbench.results.store import ResultStore


@dataclass(frozen=True)
class StatOptions:
    """The paired test a section uses (the report's): ``test`` (``randomization`` or ``student``), ``alpha``,
    ``n_resamples`` (at least; raised to what Holm over the family needs) and ``seed``."""

    test: str = "randomization"
    alpha: float = 0.05
    n_resamples: int = 10_000
    seed: int = 0


@dataclass(frozen=True)
class PairedChange:
    """``a`` against ``b`` on the queries both have a value for: ``mean_a, mean_b`` (on those queries),
    ``mean_diff`` (mean of ``a − b``), ``n`` (paired queries), ``p_value`` (raw), ``p_adjusted`` (Holm over the
    family), ``significant`` (``p_adjusted < alpha``), ``wins, ties, losses`` (queries where ``a`` beats / ties /
    loses to ``b``)."""

    mean_a: float
    mean_b: float
    mean_diff: float
    n: int
    p_value: float
    p_adjusted: float
    significant: bool
    wins: int
    ties: int
    losses: int


def paired_change(a: pl.DataFrame, b: pl.DataFrame, stats: StatOptions, seed_keys: tuple[str, str],
                  n_family: int = 1) -> PairedChange:
    """``a`` vs ``b`` (each ``query_id, value``), paired by ``query_id``, with the report's test; ``p_adjusted`` is
    the raw p until :func:`holm_family` adjusts a family of ``n_family`` tests."""
    j = a.select("query_id", "value").join(b.select("query_id", "value"), on="query_id", suffix="_b").sort("query_id")
    x, y = j["value"].cast(pl.Float64).fill_null(math.nan).to_numpy(), \
        j["value_b"].cast(pl.Float64).fill_null(math.nan).to_numpy()
    if stats.test == "student":
        res = paired_t_test(x, y)
    else:
        resamples = max(stats.n_resamples, required_resamples(n_family, stats.alpha))
        res = paired_randomization_test(x, y, n_resamples=resamples, seed=pair_seed(stats.seed, *seed_keys))
    d = paired_diffs(x, y)
    return PairedChange(*paired_means(x, y), res.mean_diff, int(d.size), res.p_value, res.p_value,
                        bool(res.p_value < stats.alpha), int(np.count_nonzero(d > TIE_TOLERANCE)),
                        int(np.count_nonzero(np.abs(d) <= TIE_TOLERANCE)), int(np.count_nonzero(d < -TIE_TOLERANCE)))


def holm_family(changes: dict[str, PairedChange], alpha: float) -> dict[str, PairedChange]:
    """The same changes with Holm-adjusted p-values over the family (:func:`holm_correction`)."""
    adjusted = holm_correction({k: c.p_value for k, c in changes.items()})
    return {k: PairedChange(**{**asdict(c), "p_adjusted": adjusted[k],
                               "significant": bool(adjusted[k] < alpha)}) for k, c in changes.items()}


@dataclass(frozen=True)
class ConfigRef:
    """A config of one sweep: ``config_id``, stored ``name``, ``label`` (in words) and its ``mean`` on the
    primary measure (None when not scored)."""

    config_id: str
    name: str
    label: str
    mean: float | None = None


@dataclass(frozen=True)
class ConfigChange:
    """A config in both sweeps: ``config`` and its change ``now − then`` on the primary measure."""

    config: ConfigRef
    change: PairedChange


@dataclass(frozen=True)
class Flip:
    """A question whose hit@k changed under the winner: ``direction`` ``lost`` (a relevant document in the top k
    then, not now) or ``gained`` (the reverse); ``text`` None when the dataset was not at hand."""

    query_id: str
    direction: str
    text: str | None = None


@dataclass(frozen=True)
class SincePrevious:
    """What changed between ``previous_id`` and ``sweep_id`` (see the module docstring); ``chosen`` says how the
    previous sweep was found (``predecessor`` or ``--since``); ``flip_measure`` is the hit measure the flips read
    (None when neither sweep stored one, ``flips_note`` then says why)."""

    sweep_id: str
    previous_id: str
    chosen: str
    primary: str
    test: str
    alpha: float
    added: tuple[ConfigRef, ...]
    removed: tuple[ConfigRef, ...]
    changes: tuple[ConfigChange, ...]
    winner_then: ConfigRef | None
    winner_now: ConfigRef | None
    flip_measure: str | None
    flips: tuple[Flip, ...]
    flips_note: str | None = None

    @property
    def same_winner(self) -> bool:
        """True when the best config is the same config then and now."""
        return bool(self.winner_then and self.winner_now
                    and self.winner_then.config_id == self.winner_now.config_id)

    def winner_sentence(self) -> str:
        """The winner's change in words."""
        t, n, p = self.winner_then, self.winner_now, self.primary
        if t is None or n is None:
            return "No winner to compare (a sweep without scored configs)"
        if self.same_winner:
            return f"Same winner: {n.label}, {p} {t.mean:.4f} then, {n.mean:.4f} now ({n.mean - t.mean:+.4f})"
        return f"New winner: {n.label} ({p} {n.mean:.4f}), was {t.label} ({t.mean:.4f})"

    def as_dict(self) -> dict:
        """The JSON form (``since_previous`` of the JSON report)."""
        def ref(r: ConfigRef | None) -> dict | None:
            return None if r is None else asdict(r)
        return {"sweep_id": self.sweep_id, "previous_sweep_id": self.previous_id, "chosen": self.chosen,
                "primary": self.primary, "test": self.test, "alpha": self.alpha,
                "added": [ref(r) for r in self.added], "removed": [ref(r) for r in self.removed],
                "changes": [{**asdict(c.config), **asdict(c.change)} for c in self.changes],
                "winner": {"then": ref(self.winner_then), "now": ref(self.winner_now),
                           "same": self.same_winner, "change": (self.winner_now.mean - self.winner_then.mean
                                                                if self.winner_then and self.winner_now else None)},
                "flip_measure": self.flip_measure, "flips_note": self.flips_note,
                "flips": [asdict(f) for f in self.flips]}


def predecessor(store: ResultStore, sweep_id: str) -> str | None:
    """The previous finished sweep (status in ``FINAL_STATUSES``) of the same name on the same dataset fingerprint,
    started before ``sweep_id``; None when there is none."""
    return store.previous_sweep(sweep_id, tuple(FINAL_STATUSES))


def _refs(store: ResultStore, sweep_id: str, primary: str) -> dict[str, ConfigRef]:
    """Every finished config of the sweep with its label and its mean of ``primary`` (NaN values excluded)."""
    board = store.leaderboard(sweep_id).filter(pl.col("status") == "finished")
    means = store.measure_means(sweep_id, primary)
    return {cid: ConfigRef(cid, name, ConfigLabels.from_stored(json.loads(spec or "{}"), name).text, means.get(cid))
            for cid, name, spec in board.select("config_id", "name", "spec_json").iter_rows()}


def sweep_best(store: ResultStore, sweep_id: str, refs: dict[str, ConfigRef], primary: str) -> str | None:
    """The best config on ``primary`` as the report picks it: the highest mean among the configs whose run reached
    the measure's cutoff, the smallest id on ties; None when no config is scored."""
    stored = store.stored_config_metrics(sweep_id)
    scored = sorted(c for c, r in refs.items() if r.mean is not None and not math.isnan(r.mean)
                    and unreached_depth(MeasureMap(stored.get(c, ({}, 0, 0))[0]), primary) is None)
    return max(scored, key=lambda c: refs[c].mean) if scored else None


def since_previous(store: ResultStore, sweep_id: str, primary: str, stats: StatOptions,
                   since: str | None = None) -> tuple[SincePrevious | None, str | None]:
    """``(section, None)``, or ``(None, why)`` when there is no previous sweep to compare with. ``since``: the
    previous sweep's id (default: :func:`predecessor`)."""
    previous = since or predecessor(store, sweep_id)
    if previous is None:
        sweep = store.sweep(sweep_id) or {}
        return None, (f"no previous finished sweep named {sweep.get('name')!r} on dataset "
                      f"{sweep.get('dataset_fingerprint')}; `ragbench diff A B` or --since compares any two")
    if previous == sweep_id:
        return None, f"--since names the sweep itself ({sweep_id})"
    now, then = _refs(store, sweep_id, primary), _refs(store, previous, primary)
    shared = sorted(set(now) & set(then))
    changes = holm_family({c: paired_change(store.measure_values(sweep_id, c, primary),
                                            store.measure_values(previous, c, primary), stats,
                                            (f"{previous}:{c}", f"{sweep_id}:{c}"), len(shared)) for c in shared},
                          stats.alpha)
    best_now, best_then = sweep_best(store, sweep_id, now, primary), sweep_best(store, previous, then, primary)
    measure, flips, note = _flips(store, (previous, best_then), (sweep_id, best_now), primary)
    return SincePrevious(
        sweep_id, previous, "--since" if since else "predecessor", primary, stats.test, stats.alpha,
        added=tuple(now[c] for c in sorted(set(now) - set(then))),
        removed=tuple(then[c] for c in sorted(set(then) - set(now))),
        changes=tuple(sorted((ConfigChange(now[c], ch) for c, ch in changes.items()),
                             key=lambda x: (-(x.config.mean or -math.inf), x.config.config_id))),
        winner_then=then.get(best_then) if best_then else None, winner_now=now.get(best_now) if best_now else None,
        flip_measure=measure, flips=flips, flips_note=note), None


def _flips(store: ResultStore, then: tuple[str, str | None], now: tuple[str, str | None],
           primary: str) -> tuple[str | None, tuple[Flip, ...], str | None]:
    """``(hit measure, flips, note)`` between the winner then and the winner now (each ``(sweep_id, config_id)``),
    on the queries labelled in both."""
    if then[1] is None or now[1] is None:
        return None, (), "no winner in one of the sweeps"
    measure = f"hit_at_{document_cutoff(primary) or 10}"
    a, b = (store.measure_values(s, c, measure) for s, c in (then, now))
    if a.is_empty() or b.is_empty():
        return None, (), f"{measure} was not stored for both winners (metrics.measures: hit)"
    j = (a.join(b, on="query_id", suffix="_now").filter(~pl.col("value").is_nan() & ~pl.col("value_now").is_nan())
         .with_columns((pl.col("value") > 0).alias("then"), (pl.col("value_now") > 0).alias("now")))
    lost = sorted(j.filter(pl.col("then") & ~pl.col("now"))["query_id"].to_list())
    gained = sorted(j.filter(~pl.col("then") & pl.col("now"))["query_id"].to_list())
    texts = query_texts(store, now[0]) if lost or gained else {}
    return measure, tuple([Flip(q, "lost", texts.get(q)) for q in lost]
                          + [Flip(q, "gained", texts.get(q)) for q in gained]), None


def query_texts(store: ResultStore, sweep_id: str) -> dict[str, str]:
    """``query_id -> text`` of the sweep's dataset: the ``queries`` table's rows, else the dataset loaded from its
    stored spec; empty when neither is at hand (moved or changed files: the flips are then listed by id)."""
    from ragbench.core.progress import log
    from ragbench.promotion.serving import load_dataset_checked

    sweep = store.sweep(sweep_id) or {}
    stored = store.query_texts(sweep.get("dataset_fingerprint") or "")  # written by the sweep: no reload
    if stored:
        return stored
    try:
        ds = load_dataset_checked(store.sweep_spec(sweep_id).get("dataset") or {}, sweep.get("dataset_fingerprint"),
                                  home=store.path.parent)
    except Exception as e:  # the flips are still listed by id
        log.info("query texts of sweep %s not at hand: %s", sweep_id, str(e).splitlines()[0][:200] if str(e) else e)
        return {}
    return dict(ds.queries.select("query_id", "text").iter_rows())


def _verdict(c: PairedChange) -> str:
    if not c.significant:
        return "≈ no significant change"
    return "▲ significantly better" if c.mean_diff > 0 else "▼ significantly worse"


def change_rows(s: SincePrevious) -> list[dict]:
    """One row per shared config (best mean now first): ``config`` (label), ``then, now`` (means on the shared
    queries), ``diff`` (now − then), ``p`` (Holm), ``verdict``, ``wtl`` (now vs then), ``n``; the renderers' rows."""
    return [{"config": c.config.label, "then": c.change.mean_b, "now": c.change.mean_a,
             "diff": f"{c.change.mean_diff:+.4f}", "p": c.change.p_adjusted, "verdict": _verdict(c.change),
             "wtl": f"{c.change.wins}/{c.change.ties}/{c.change.losses}", "n": c.change.n} for c in s.changes]


def change_columns(primary: str) -> list:
    """The columns of :func:`change_rows` (terminal and markdown)."""
    from ragbench.reporting.tables import Column, number

    return [Column("config", "config", required=True), Column(f"{primary} then", "then", number(4), numeric=True),
            Column("now", "now", number(4), numeric=True, required=True),
            Column("now − then", "diff", numeric=True, required=True),
            Column("p (Holm)", "p", number(4), numeric=True, required=True), Column("verdict", "verdict", required=True),
            Column("W/T/L", "wtl", numeric=True), Column("queries", "n", number(0), numeric=True)]


def since_lines(s: SincePrevious, most: int = 10) -> list[str]:
    """The section in sentences: the sweeps compared, configs added and removed (labels separated by ``; ``),
    the winner's change and the flipped questions (the first ``most`` of each direction, then a count: the JSON
    report lists them all)."""
    def labels(refs: tuple[ConfigRef, ...]) -> str:
        return "; ".join(r.label for r in refs) or "none"

    how = "named by --since" if s.chosen == "--since" else "the previous finished sweep of this name and dataset"
    out = [f"Since sweep {s.previous_id} ({how}): {len(s.added)} config(s) added, "
           f"{len(s.removed)} removed, {len(s.changes)} in both (paired {s.test} test on the shared queries, Holm "
           f"over {len(s.changes)}, α = {s.alpha:g}).",
           f"Added: {labels(s.added)}.", f"Removed: {labels(s.removed)}.", f"{s.winner_sentence()}."]
    if s.flip_measure is None:
        out.append(f"Flipped questions: not known ({s.flips_note}).")
        return out
    k = s.flip_measure.removeprefix("hit_at_")
    if not s.flips:
        out.append(f"Flipped questions under the winner: none (a relevant document in the top {k} for the same "
                   "questions then and now).")
    for direction, words in (("lost", f"in the top {k} then, not now"), ("gained", f"not in the top {k} then, now")):
        qs = [f for f in s.flips if f.direction == direction]
        if qs:
            more = f"; and {len(qs) - most} more" if len(qs) > most else ""
            out.append(f"{len(qs)} question(s) {direction} (a relevant document {words}): "
                       + "; ".join(f"{f.query_id}" + (f" “{f.text}”" if f.text else "") for f in qs[:most]) + more
                       + ".")
    return out
