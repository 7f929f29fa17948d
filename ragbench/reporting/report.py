"""Sweep reports: which config won, by how much, how sure we are, and where it wins.

Everything is computed from the DuckDB store (``query_metrics`` holds one value per query, config and measure), so a
report can be written at any time after a sweep, by another process:

* per config and measure: the mean with a percentile-bootstrap 95 % CI (:func:`ragbench.evaluation.intervals.bootstrap_ci`);
* paired tests of every pair of configs on the same queries (:func:`ragbench.evaluation.comparison.compare_configs`: randomization
  test by default, Holm correction over all pairs of the grid), the set "tied with the best" (Holm-adjusted
  p >= alpha against the best) and win/tie/loss counts against the best;
* recall@k curves per config, the primary measure per query class, and chunk statistics (table ``chunk_stats`` when
  the sweep wrote one).

:func:`write_html_report` writes one self-contained HTML file (plots embedded as base64 PNG data URIs, also saved as
PNG files next to it) and logs them as artifacts of the sweep's MLflow parent run.
"""

from __future__ import annotations

import base64
import html
import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
from rich.table import Table

from ragbench.config.labels import NO_MODEL, ConfigLabels
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import MeasureMap, measure_key, measure_keys
from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.data.holdout import heldout_key
from ragbench.data.labels import synthetic_warnings
from ragbench.evaluation.metrics import document_cutoff, unreached_depth
from ragbench.evaluation.comparison import Comparison, compare_configs
from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures, shallow_notes  # noqa: F401
from ragbench.reporting.heldout import WinnerHeldOut
from ragbench.reporting.pareto import COST_COLUMNS, cost_html, cost_markdown, cost_summary, cost_table
from ragbench.reporting.tables import Column, fit_table, number, to_csv, to_json_lines, to_markdown
from ragbench.results.lookup import resolve_config_id, resolve_sweep_id, sweep_primary  # noqa: F401
from ragbench.results.store import ResultStore


# ---------------------------------------------------------------- the data
@dataclass(frozen=True)
class SweepReport:
    """Everything a report shows, as tables.

    Attributes
    ----------
    configs : polars.DataFrame
        One row per config of the sweep: ``config_id, name, status, error, n_queries, n_unlabelled,
        retrieval_ms_per_query, mlflow_run_id`` and its labels for people: ``chunker, model, retriever, label``
        (:class:`ragbench.config.labels.ConfigLabels`).
    summary : polars.DataFrame
        One row per finished config and measure: ``config_id, name, measure, mean, ci_low, ci_high, n, is_best,
        tied_with_best, p_vs_best`` (Holm-adjusted p-value of the paired test against that measure's best; NaN
        for the best itself), ``worse_than_best`` (significantly), ``wins, ties, losses`` (per query, against the
        best).
    comparisons : dict
        Measure -> :class:`ragbench.evaluation.comparison.Comparison` (all pairs).
    recall_curves : polars.DataFrame
        ``config_id, name, k, recall`` (mean recall@k over labelled queries) for every recall cutoff stored.
    per_class : polars.DataFrame
        ``config_id, name, query_class, n, mean`` of the primary measure (unlabelled queries excluded).
    chunk_stats : polars.DataFrame or None
        ``config_id, name, stat, value`` when the store has a ``chunk_stats`` table with rows for this sweep.
    shallow : dict
        Document measure -> ``{config_id: documents reached}`` of the configs left out of its comparison: their
        run named fewer distinct documents than the measure's cutoff for some query
        (:func:`ragbench.evaluation.metrics.unreached_depth`), so their value was computed on a shallower list.
    winner_heldout : WinnerHeldOut or None
        The winner's tuning and held-out scores on the primary measure, when the sweep has a held-out set.
    dataset_warnings : tuple of str
        What the reader must know about the questions before trusting the means: synthetic questions that reuse
        their passage's words, synthetic and real questions mixed
        (:func:`ragbench.data.labels.synthetic_warnings` of the notes stored with the sweep).
    costs : polars.DataFrame or None
        Cost and the Pareto front, one row per ranked config (:func:`ragbench.reporting.pareto.cost_table`).
    """

    sweep_id: str
    sweep_name: str
    dataset_name: str
    dataset_fingerprint: str
    status: str
    primary: str
    measures: tuple[str, ...]
    test: str
    alpha: float
    configs: pl.DataFrame
    summary: pl.DataFrame
    comparisons: dict[str, Comparison]
    recall_curves: pl.DataFrame
    per_class: pl.DataFrame
    chunk_stats: pl.DataFrame | None
    mlflow_run_id: str | None
    shallow: dict[str, dict[str, int]] = field(default_factory=dict)
    winner_heldout: WinnerHeldOut | None = None
    dataset_warnings: tuple[str, ...] = ()
    costs: pl.DataFrame | None = None

    @property
    def best(self) -> str:
        """config_id of the best config on the primary measure."""
        return self.comparisons[self.primary].best

    def name_of(self, config_id: str) -> str:
        """The config's stored name (its identity in DuckDB and MLflow)."""
        row = self.configs.filter(pl.col("config_id") == config_id)
        return row["name"][0] if row.height else config_id

    def label_of(self, config_id: str) -> str:
        """The config in words (``recursive 128 tok, overlap 0 | all-MiniLM-L6-v2 | hybrid RRF``)."""
        row = self.configs.filter(pl.col("config_id") == config_id)
        return row["label"][0] if row.height else config_id

    def labels_of(self, config_id: str) -> ConfigLabels:
        """The config's chunker, model and retriever in words."""
        row = self.configs.filter(pl.col("config_id") == config_id)
        if not row.height:
            return ConfigLabels(config_id, NO_MODEL, "")
        return ConfigLabels(row["chunker"][0], row["model"][0], row["retriever"][0])

    @property
    def tied_with_best(self) -> list[str]:
        """Config ids tied with the best on the primary measure (the best excluded), best mean first."""
        tied = set(self.comparisons[self.primary].tied_with_best) - {self.best}
        return [c for c in self.leaderboard()["config_id"].to_list() if c in tied]

    def leaderboard(self) -> pl.DataFrame:
        """Finished configs sorted by the primary measure (best first), one row each, primary columns only."""
        return (self.summary.filter(pl.col("measure") == self.primary)
                .sort(["mean", "config_id"], descending=[True, False], nulls_last=True))

    @property
    def headline(self) -> str:
        """``"<config> wins on <primary>: 0.xxx [lo, hi]; tied with: ...; significantly better than N of M"``."""
        board = self.leaderboard()
        best = board.filter(pl.col("config_id") == self.best).row(0, named=True)
        tied = [self.label_of(c) for c in self.tied_with_best]
        others = board.filter(pl.col("config_id") != self.best)
        beaten = int(others["worse_than_best"].sum()) if others.height else 0
        if len(tied) > 3:  # a long list reads as noise: name the closest runners-up, count the rest
            tied_text = f"{', '.join(tied[:3])} and {len(tied) - 3} more (not significantly different)"
        else:
            tied_text = ", ".join(tied) if tied else "none"
        return (f"{self.label_of(self.best)} wins on {self.primary}: {best['mean']:.3f} [{best['ci_low']:.3f}, "
                f"{best['ci_high']:.3f}]; tied with: {tied_text}; significantly better than {beaten} of "
                f"{others.height}")


def per_query_values(store: ResultStore, sweep_id: str, measures: list[str] | None = None) -> pl.DataFrame:
    """``config_id, query_id, query_class, measure, value`` of the sweep's finished configs
    (:meth:`ResultStore.per_query_values`)."""
    return store.per_query_values(sweep_id, measures)


def build_report(store: ResultStore, sweep_id: str, *, primary: str | None = None,
                 measures: tuple[str, ...] | None = None, test: str = "randomization", alpha: float = 0.05,
                 n_resamples: int = 10_000, seed: int = 0, pairs: str = "vs_best") -> SweepReport:
    """Compute every table of a sweep's report (see :class:`SweepReport`).

    Statistics are computed for ``measures`` (default: the primary measure plus the
    :data:`~ragbench.reporting.columns.LEADERBOARD_MEASURES` present in the sweep, ``recall@{max_k}`` being its
    deepest recall); failed configs are listed but excluded from the statistics. Its reads share one connection
    (:meth:`~ragbench.results.store.ResultStore.reading`).
    """
    with store.reading():
        return _build_report(store, sweep_id, primary=primary, measures=measures, test=test, alpha=alpha,
                             n_resamples=n_resamples, seed=seed, pairs=pairs)


def _build_report(store: ResultStore, sweep_id: str, *, primary: str | None, measures: tuple[str, ...] | None,
                  test: str, alpha: float, n_resamples: int, seed: int, pairs: str) -> SweepReport:
    sweep = store.sweep(sweep_id)
    if sweep is None:
        raise RagbenchError(f"sweep {sweep_id!r} not found in {store.path}")
    primary = measure_key(primary) if primary else sweep_primary(store, sweep_id)
    measures = measure_keys(measures)
    board = store.leaderboard(sweep_id)
    labels = [ConfigLabels.from_stored(json.loads(s or "{}"), n)
              for s, n in zip(board["spec_json"].to_list(), board["name"].to_list())]
    configs = (board.select("config_id", "name", "status", "error", "n_queries", "n_unlabelled",
                            "retrieval_ms_per_query", "mlflow_run_id")
               .with_columns(pl.Series("chunker", [lb.chunker for lb in labels], pl.String),
                             pl.Series("model", [lb.model for lb in labels], pl.String),
                             pl.Series("retriever", [lb.retriever for lb in labels], pl.String),
                             pl.Series("label", [lb.text for lb in labels], pl.String))
               .sort("name", nulls_last=True, maintain_order=True))
    pq = per_query_values(store, sweep_id)
    if pq.is_empty():
        raise RagbenchError(f"sweep {sweep_id} has no finished config with results"
                            + (f" ({configs.height} failed)" if configs.height else ""))
    available = set(pq["measure"].unique().to_list())
    if primary not in available:
        raise RagbenchError(f"measure {primary!r} was not computed in sweep {sweep_id}; available: "
                            f"{', '.join(sorted(available))}")
    held = heldout_key(primary)
    if measures is None:  # the held-out score of every config right after the primary it was ranked on
        measures = (primary, *([held] if held in available else []),
                    *[m for m in leaderboard_measures(available) if m not in (primary, held) and m in available])
    unknown = [m for m in measures if m not in available]
    if unknown:
        raise RagbenchError(f"measure(s) {unknown} not computed in sweep {sweep_id}; available: "
                            f"{', '.join(sorted(available))}")
    names = dict(configs.select("config_id", "name").iter_rows())
    stored = {cid: MeasureMap(mets) for cid, (mets, _, _) in store.stored_config_metrics(sweep_id).items()}
    shallow = {m: refused for m in measures
               if (refused := {cid: d for cid, mets in stored.items() if (d := unreached_depth(mets, m)) is not None})}
    finished = set(pq["config_id"].unique().to_list())
    if shallow.get(primary) and set(shallow[primary]) >= finished:
        raise RagbenchError(f"{primary} cannot be compared in sweep {sweep_id}: no config reached "
                            f"{document_cutoff(primary)} distinct documents for every query; fetch deeper with "
                            f"retrievers[].documents: {document_cutoff(primary)}")

    comparisons: dict[str, Comparison] = {}
    rows = []
    for m in measures:
        if set(shallow.get(m, ())) >= finished:
            continue  # no config reached this cutoff: nothing to compare (the note says so)
        # a config that reached fewer documents than the cutoff is left out of that measure's comparison
        kept = pq.filter((pl.col("measure") != m) | ~pl.col("config_id").is_in(list(shallow.get(m, {}))))
        comp = compare_configs(kept, m, test=test, alpha=alpha, n_resamples=n_resamples, seed=seed, pairs=pairs)
        comparisons[m] = comp
        tied = set(comp.tied_with_best)
        for s in comp.configs:
            vs = comp.pair(s.config_id, comp.best) if s.config_id != comp.best else None
            rows.append({
                "config_id": s.config_id, "name": names.get(s.config_id, s.config_id), "measure": m,
                "mean": s.mean, "ci_low": s.ci.low, "ci_high": s.ci.high, "n": s.n,
                "is_best": s.config_id == comp.best, "tied_with_best": s.config_id in tied,
                "p_vs_best": vs.p_adjusted if vs else math.nan,
                "worse_than_best": bool(vs and vs.significant and vs.mean_diff < 0),
                "wins": vs.wins if vs else 0, "ties": vs.ties if vs else 0, "losses": vs.losses if vs else 0})
    summary = pl.DataFrame(rows, schema={
        "config_id": pl.String, "name": pl.String, "measure": pl.String, "mean": pl.Float64, "ci_low": pl.Float64,
        "ci_high": pl.Float64, "n": pl.Int64, "is_best": pl.Boolean, "tied_with_best": pl.Boolean,
        "p_vs_best": pl.Float64, "worse_than_best": pl.Boolean, "wins": pl.Int64, "ties": pl.Int64,
        "losses": pl.Int64})

    winner = None
    if held in available and primary in comparisons:
        winner = _winner_heldout(pq, comparisons[primary], held, dict(configs.select("config_id", "label")
                                                                      .iter_rows()))
    costs = _costs(summary, primary, comparisons, stored, configs)
    return SweepReport(
        sweep_id=sweep_id, sweep_name=sweep["name"], dataset_name=sweep["dataset_name"],
        dataset_fingerprint=sweep["dataset_fingerprint"], status=sweep["status"], primary=primary,
        measures=tuple(m for m in measures if m in comparisons), test=test, alpha=alpha, configs=configs,
        summary=summary, shallow=shallow,
        comparisons=comparisons, recall_curves=_recall_curves(pq, names), per_class=_per_class(pq, primary, names),
        chunk_stats=_chunk_stats(store, sweep_id, names), mlflow_run_id=sweep.get("mlflow_run_id"),
        winner_heldout=winner, costs=costs,
        dataset_warnings=tuple(synthetic_warnings(json.loads(sweep.get("dataset_notes") or "{}"))))


def _winner_heldout(pq: pl.DataFrame, comp: Comparison, held: str, labels: dict[str, str]) -> WinnerHeldOut:
    """The best config on the tuning set (``comp``) with its mean on the held-out set (NaN values excluded,
    as for every mean of the report)."""
    best = comp.config(comp.best)
    values = pq.filter((pl.col("config_id") == comp.best) & (pl.col("measure") == held)
                       & pl.col("value").is_not_nan())["value"]
    return WinnerHeldOut(comp.best, labels.get(comp.best, comp.best), comp.measure, best.mean,
                         float(values.mean()) if values.len() else math.nan, len(comp.configs), best.n,
                         values.len())


def _costs(summary: pl.DataFrame, primary: str, comparisons: dict[str, Comparison], stored: dict[str, MeasureMap],
           configs: pl.DataFrame) -> pl.DataFrame | None:
    """The cost table of the ranked configs (:func:`ragbench.reporting.pareto.cost_table`)."""
    if primary not in comparisons:
        return None
    board = (summary.filter(pl.col("measure") == primary)
             .sort(["mean", "config_id"], descending=[True, False], nulls_last=True))
    comp = comparisons[primary]
    labels = dict(configs.select("config_id", "label").iter_rows())
    return cost_table(primary, dict(board.select("config_id", "mean").iter_rows()),
                      set(comp.tied_with_best) | {comp.best}, stored, labels)


def _recall_curves(pq: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    rec = pq.filter(pl.col("measure").str.contains(r"^recall_at_\d+$") & pl.col("value").is_not_nan())
    return (rec.with_columns(pl.col("measure").str.extract(r"_at_(\d+)$").cast(pl.Int64).alias("k"))
            .group_by("config_id", "k").agg(pl.col("value").mean().alias("recall"))
            .with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "k", "recall").sort(["config_id", "k"]))


def _per_class(pq: pl.DataFrame, primary: str, names: dict[str, str]) -> pl.DataFrame:
    sub = pq.filter((pl.col("measure") == primary) & pl.col("value").is_not_nan())
    return (sub.with_columns(pl.col("query_class").fill_null("(none)"))
            .group_by("config_id", "query_class")
            .agg(pl.len().cast(pl.Int64).alias("n"), pl.col("value").mean().alias("mean"))
            .with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "query_class", "n", "mean").sort(["query_class", "config_id"]))


def _chunk_stats(store: ResultStore, sweep_id: str, names: dict[str, str]) -> pl.DataFrame | None:
    df = store.chunk_stats(sweep_id)
    if df.is_empty():
        return None
    return (df.with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "stat", pl.col("value").cast(pl.Float64)))


# ---------------------------------------------------------------- terminal, markdown, CSV, JSON
def _fmt(v: float | None, digits: int = 4) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _mark(row: dict) -> str:
    """Significance mark against the measure's best: ★ best, ≈ tied (not distinguishable), ▼ significantly worse."""
    if row["is_best"]:
        return "★"
    return "▼" if row["worse_than_best"] else "≈"


def resolution(comp: Comparison) -> str:
    """How fine the test's p-values are: comparisons (Holm), resamples per pair or exact enumeration, and the
    smallest attainable p before and after the correction."""
    m = comp.n_comparisons
    if comp.test != "randomization":
        return f"Holm over {m} comparison(s), α = {comp.alpha:g}"
    how = "exact sign-flip enumeration" if comp.exact else (
        f"R = {comp.n_resamples:,} sign flips per pair ({comp.n_exact} of {m} exact)")
    return (f"Holm over {m} comparison(s), {how}, smallest p = {comp.p_floor:.1e} × {m} = "
            f"{comp.p_floor_adjusted:.1e} ‹ α = {comp.alpha:g}")


def legend(report: SweepReport) -> str:
    """What the marks and brackets mean, and why a lower mean can be ≈ while a higher one is ▼."""
    return (f"★ best · ≈ not significantly different from the best · ▼ significantly worse than the best "
            f"(paired {report.test} test on the same queries, {resolution(report.comparisons[report.primary])}). "
            f"CI: 95 % bootstrap interval of the mean. The marks come from per-query "
            f"differences, not from the means: a config whose wins and losses against the best are mixed stays ≈ "
            f"even below a ▼ one that loses consistently." + "".join(f" {n}" for n in shallow_notes(report.shallow)))


def report_rows(report: SweepReport) -> list[dict]:
    """One dict per config, best first on the primary measure (failed configs last, rank None): ``rank,
    config_id, name, chunker, model, retriever, status, error``, for every measure ``m``: ``m`` (mean),
    ``m_ci_low, m_ci_high, m_mark``; ``tied_with_best, worse_than_best, p_vs_best, wins, ties, losses`` (on the
    primary), ``ms_per_query, queries, unlabelled``."""
    by = {(r["config_id"], r["measure"]): r for r in report.summary.iter_rows(named=True)}
    cfg = {r["config_id"]: r for r in report.configs.iter_rows(named=True)}
    rows = []
    for i, row in enumerate(report.leaderboard().iter_rows(named=True), 1):
        cid = row["config_id"]
        c = cfg.get(cid, {})
        out = {"rank": i, "config_id": cid, "name": c.get("name"), "chunker": c.get("chunker"),
               "model": c.get("model"), "retriever": c.get("retriever"), "status": "finished", "error": None}
        for m in report.measures:
            r = by.get((cid, m))
            out.update({m: r["mean"] if r else None, f"{m}_ci_low": r["ci_low"] if r else None,
                        f"{m}_ci_high": r["ci_high"] if r else None, f"{m}_mark": _mark(r) if r else ""})
        out.update({"tied_with_best": row["tied_with_best"], "worse_than_best": row["worse_than_best"],
                    "p_vs_best": row["p_vs_best"], "wins": row["wins"], "ties": row["ties"],
                    "losses": row["losses"], "ms_per_query": c.get("retrieval_ms_per_query"),
                    "queries": row["n"], "unlabelled": c.get("n_unlabelled")})
        out.update(_cost_cells(report, cid))
        rows.append(out)
    for cid, depth in report.shallow.get(report.primary, {}).items():  # finished, but not comparable on primary
        c = cfg.get(cid, {})
        rows.append({"rank": None, "config_id": cid, "name": c.get("name"), "chunker": c.get("chunker"),
                     "model": c.get("model"), "retriever": c.get("retriever"), "status": "not compared",
                     "error": f"reached {depth} distinct documents, fewer than {report.primary}'s cutoff"})
    for c in report.configs.filter(pl.col("status") != "finished").iter_rows(named=True):
        rows.append({"rank": None, "config_id": c["config_id"], "name": c["name"], "chunker": c["chunker"],
                     "model": c["model"], "retriever": c["retriever"], "status": c["status"], "error": c["error"]})
    return rows


def _cost_cells(report: SweepReport, config_id: str) -> dict:
    """The config's cost measures, ``on_pareto_front`` and ``cheapest_tied_with_best`` (None when unknown)."""
    if report.costs is None:
        return {}
    row = report.costs.filter(pl.col("config_id") == config_id)
    if not row.height:
        return {}
    r = row.row(0, named=True)
    return {**{c: r[c] for c in COST_COLUMNS}, "on_pareto_front": r["on_front"],
            "cheapest_tied_with_best": r["cheapest_tied"]}


def _cell(m: str, ci: bool):
    def fmt_row(row: dict) -> str:
        if row.get(m) is None:
            return "–" if row.get("status") == "finished" else ""
        text = f"{row[f'{m}_mark']} {_fmt(row[m])}"
        return text + (f" [{_fmt(row[f'{m}_ci_low'], 3)}, {_fmt(row[f'{m}_ci_high'], 3)}]" if ci else "")
    return fmt_row


def _display_rows(report: SweepReport) -> list[dict]:
    """:func:`report_rows` with the combined display cells the table and markdown show."""
    rows = report_rows(report)
    for r in rows:
        for m in report.measures:
            r[f"{m}__cell"] = _cell(m, ci=False)(r)
        r["primary__ci"] = (f"{_fmt(r.get(f'{report.primary}_ci_low'), 3)}–"
                            f"{_fmt(r.get(f'{report.primary}_ci_high'), 3)}" if r.get(report.primary) is not None
                            else "")
        r["wtl"] = ("—" if r.get(f"{report.primary}_mark") == "★" else
                    f"{r['wins']}/{r['ties']}/{r['losses']}" if r.get("wins") is not None else "")
        if r["status"] != "finished":
            what = "NOT COMPARED" if r["status"] == "not compared" else "FAILED"
            r["retriever"] = f"{r['retriever']}  {what}: {r['error'] or ''}"
    return rows


def report_columns(report: SweepReport) -> list[Column]:
    """Display columns of the report's leaderboard: rank, chunker, model, retriever, the primary measure (mark and
    mean) and its CI always; then p and W/T/L against the best, the other measures, ms/query and queries."""
    p = report.primary
    cols = [Column("#", "rank", number(0), numeric=True, required=True),
            Column("chunker", "chunker", required=True), Column("model", "model", required=True),
            Column("retriever", "retriever", required=True),
            Column(p, f"{p}__cell", numeric=True, required=True, style="bold"),
            Column("95 % CI", "primary__ci", numeric=True, required=True),
            Column("p vs best", "p_vs_best", number(4), numeric=True),
            Column("W/T/L vs best", "wtl", numeric=True)]
    cols += [Column(m, f"{m}__cell", numeric=True) for m in report.measures if m != p]
    cols += [Column("ms/query", "ms_per_query", number(1), numeric=True),
             Column("queries", "queries", number(0), numeric=True)]
    return cols


def leaderboard_rich(report: SweepReport, width: int = 160) -> Table:
    """The leaderboard with bootstrap CIs and significance marks, best first, failed configs last, in a table
    that fits ``width`` columns (the columns that do not fit are named in the caption)."""
    rows = _display_rows(report)
    return fit_table(report_columns(report), rows, width,
                     title=f"sweep {report.sweep_id} · {report.dataset_name} [{report.dataset_fingerprint}]",
                     caption="\n".join([report.headline, *([report.winner_heldout.sentence()]
                                                            if report.winner_heldout else []),
                                         *(f"warning: {w}" for w in report.dataset_warnings), legend(report),
                                         *cost_summary(report.costs, report.primary)]),
                     row_styles=["red" if r["status"] != "finished" else None for r in rows])


def report_text(report: SweepReport, fmt: str) -> str:
    """The leaderboard as ``markdown`` (display cells), ``csv`` (raw numbers, every measure with its CI) or
    ``json`` (one object per config: :func:`report_rows` plus ``primary`` and ``sweep_id``)."""
    if fmt == "markdown":
        return leaderboard_markdown(report)
    rows = report_rows(report)
    if fmt == "json":
        return "\n".join(to_json_lines([{**r, "primary": {"measure": report.primary,
                                                          "value": r.get(report.primary)},
                                          "sweep_id": report.sweep_id} for r in rows]))
    keys = ["rank", "config_id", "name", "chunker", "model", "retriever", "status"]
    for m in report.measures:
        keys += [m, f"{m}_ci_low", f"{m}_ci_high"]
    keys += ["tied_with_best", "worse_than_best", "p_vs_best", "wins", "ties", "losses", "ms_per_query", "queries",
             "unlabelled", "error"]
    keys += [*COST_COLUMNS, "on_pareto_front", "cheapest_tied_with_best"]
    return to_csv([Column(k, k) for k in keys], rows)


def leaderboard_markdown(report: SweepReport, limit: int | None = None) -> str:
    """The leaderboard as markdown: the headline, the table (primary with its CI, p and W/T/L against the best,
    the other measures), the configs tied with the best, and the legend; ``limit`` keeps the best rows only."""
    rows = _display_rows(report)
    for r in rows:
        r["primary__full"] = _cell(report.primary, ci=True)(r) if r.get(report.primary) is not None else ""
    shown = rows if limit is None else rows[:limit]
    p = report.primary
    cols = [Column("#", "rank", number(0), numeric=True), Column("chunker", "chunker"), Column("model", "model"),
            Column("retriever", "retriever"), Column(f"{p} [95 % CI]", "primary__full", numeric=True),
            Column("p vs best", "p_vs_best", number(4), numeric=True), Column("W/T/L vs best", "wtl", numeric=True)]
    cols += [Column(m, f"{m}__cell", numeric=True) for m in report.measures if m != p]
    tied = [report.label_of(c) for c in report.tied_with_best]
    parts = [f"**{report.headline}**", ""]
    parts += [f"> **Warning:** {w}\n" for w in report.dataset_warnings]
    if report.winner_heldout:
        parts += [report.winner_heldout.sentence(), ""]
    parts.append(to_markdown(cols, shown))
    if limit is not None and len(rows) > limit:
        parts.append(f"\n… {len(rows) - limit} more configs in the HTML report.")
    parts += ["", f"**Tied with the best** ({len(tied)}): " + ("; ".join(tied) if tied else "none"), "",
              f"_{legend(report)}_"]
    if report.costs is not None:
        parts += ["", *cost_markdown(report.costs, report.primary)]
    return "\n".join(parts)


def vs_best_rows(report: SweepReport) -> list[dict]:
    """Every other finished config against the best on the primary measure: ``rank, config_id, name, label,
    mean, mean_diff`` (config − best), ``p_vs_best`` (Holm), ``significant``, ``wins, ties, losses, n``."""
    comp = report.comparisons[report.primary]
    rows = []
    for r in report_rows(report):
        if r["rank"] is None or r["config_id"] == comp.best:
            continue
        pair = comp.pair(r["config_id"], comp.best)
        rows.append({"rank": r["rank"], "config_id": r["config_id"], "name": r["name"],
                     "label": report.label_of(r["config_id"]), "chunker": r["chunker"], "model": r["model"],
                     "retriever": r["retriever"], "mean": r[report.primary], "mean_diff": pair.mean_diff,
                     "p_vs_best": pair.p_adjusted, "significant": pair.significant, "mark": r[f"{report.primary}_mark"],
                     "wins": pair.wins, "ties": pair.ties, "losses": pair.losses, "n": pair.n})
    return rows


def vs_best_rich(report: SweepReport, width: int = 160) -> Table:
    """Each config against the best on the primary measure (what ``compare`` shows by default)."""
    comp = report.comparisons[report.primary]
    rows = vs_best_rows(report)
    for r in rows:
        r["cell"] = f"{r['mark']} {_fmt(r['mean'])}"
        r["diff"] = f"{r['mean_diff']:+.4f}"
        r["wtl"] = f"{r['wins']}/{r['ties']}/{r['losses']}"
    cols = [Column("#", "rank", number(0), numeric=True, required=True), Column("chunker", "chunker", required=True),
            Column("model", "model", required=True), Column("retriever", "retriever", required=True),
            Column(report.primary, "cell", numeric=True, required=True),
            Column("− best", "diff", numeric=True, required=True),
            Column("p", "p_vs_best", number(4), numeric=True, required=True),
            Column("W/T/L", "wtl", numeric=True), Column("queries", "n", number(0), numeric=True)]
    best = report.leaderboard().row(0, named=True)
    return fit_table(cols, rows, width,
                     title=f"{report.primary}: every config against the best, {report.label_of(comp.best)} "
                           f"({best['mean']:.4f}); paired {comp.test} test, {resolution(comp)}",
                     caption="▼ significantly worse than the best, ≈ not distinguishable from it; p: Holm-adjusted; "
                             "W/T/L: queries where the config beats / ties / loses to the best. Every pair: "
                             "`ragbench compare --all`." + "".join(f" {n}" for n in shallow_notes(report.shallow)))


def comparison_rich(comp: Comparison, names: dict[str, str], width: int = 160) -> Table:
    """All pairs of one measure: mean difference, raw and Holm-adjusted p-values, win/tie/loss; ``names`` maps
    config ids to what to show (labels)."""
    rows = []
    for p in sorted(comp.pairs, key=lambda p: (p.p_adjusted if p.p_adjusted == p.p_adjusted else 2.0)):
        a, b, d = p.config_a, p.config_b, p.mean_diff
        if d < 0:  # orient every row so that A is the better one: easier to read
            p = comp.pair(b, a)
            a, b, d = b, a, -d
        rows.append({"a": names.get(a, a), "b": names.get(b, b), "diff": f"{d:+.4f}", "p": p.p_value,
                     "p_adj": p.p_adjusted, "sig": "yes" if p.significant else "no",
                     "wtl": f"{p.wins}/{p.ties}/{p.losses}", "n": p.n})
    cols = [Column("A (better mean)", "a", required=True), Column("B", "b", required=True),
            Column("mean A−B", "diff", numeric=True, required=True),
            Column("p (Holm)", "p_adj", number(4), numeric=True, required=True),
            Column("significant", "sig", required=True), Column("p", "p", number(4), numeric=True),
            Column("W/T/L (A vs B)", "wtl", numeric=True), Column("queries", "n", number(0), numeric=True)]
    return fit_table(cols, rows, width,
                     title=f"{comp.measure}: paired {comp.test} test, Holm over {len(comp.pairs)} pairs, "
                           f"α={comp.alpha:g}",
                     caption=f"best: {names.get(comp.best, comp.best)}; tied with best: "
                             f"{', '.join(names.get(c, c) for c in comp.tied_with_best if c != comp.best) or 'none'}")


# ---------------------------------------------------------------- plots
#: bump when a report plot's drawing changes: plots cached under the old drawing are then drawn again
PLOT_VERSION = 1


def _plots(report: SweepReport, out_dir: Path, cache_root: Path | None = None) -> dict[str, Path]:
    """The report's PNG plots in ``out_dir``: each is described by the data it draws, and a plot whose data (and
    :data:`PLOT_VERSION`) a :class:`~ragbench.core.cache.PlotCache` under ``cache_root`` already holds is copied,
    not drawn (a warm rerun's report imports no matplotlib)."""
    from ragbench.core.cache import PlotCache
    from ragbench.core.hashing import stable_hash

    cache = PlotCache(cache_root) if cache_root is not None else None
    out: dict[str, Path] = {}
    for name, data in _plot_data(report).items():
        path = out_dir / f"{name}.png"
        key = stable_hash({"plot": name, "version": PLOT_VERSION, "data": data}, length=32)
        cached = cache.get(key) if cache is not None else None
        if cached is not None:
            path.write_bytes(cached)
        else:
            _DRAW[name](data, path)
            if cache is not None:
                cache.put_bytes(key, path.read_bytes())
        out[name] = path
    return out


def _plot_data(report: SweepReport) -> dict[str, dict]:
    """What each plot draws, as plain data (its cache key): the leaderboard always, recall@k curves and the
    per-class heatmap when the sweep has them."""
    board = report.leaderboard()
    cids = board["config_id"].to_list()
    out = {"leaderboard": {
        "labels": [_short(report.label_of(c), 60) for c in cids], "means": board["mean"].to_list(),
        "ci_low": board["ci_low"].to_list(), "ci_high": board["ci_high"].to_list(), "primary": report.primary,
        # colour = significance against the best
        "colours": ["#2e7d32" if r["is_best"] else ("#9e9e9e" if r["worse_than_best"] else "#1976d2")
                    for r in board.iter_rows(named=True)]}}
    top = cids[:MAX_CURVES]  # the best configs only, so the lines stay readable
    if report.recall_curves.height:
        curves = []
        for cid in top:
            c = report.recall_curves.filter(pl.col("config_id") == cid).sort("k")
            if c.height:
                curves.append([_short(report.label_of(cid), 60), c["k"].to_list(), c["recall"].to_list()])
        out["recall_curves"] = {"curves": curves, "ks": sorted(report.recall_curves["k"].unique().to_list()),
                                "more": f" (best {len(top)} of {len(cids)} by {report.primary})"
                                        if len(cids) > len(top) else ""}
    classes = sorted(report.per_class["query_class"].unique().to_list())
    if report.per_class.height and classes:
        grid = [[float("nan")] * len(classes) for _ in cids]
        for r in report.per_class.iter_rows(named=True):
            if r["config_id"] in cids and r["query_class"] in classes:
                grid[cids.index(r["config_id"])][classes.index(r["query_class"])] = r["mean"]
        out["per_class"] = {"grid": grid, "classes": classes, "primary": report.primary,
                            "labels": [_short(report.label_of(c), 60) for c in cids]}
    return out


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _draw_leaderboard(d: dict, path: Path) -> None:
    """The primary measure per config with its 95 % CI; green: best, blue: tied with best, grey: worse."""
    plt = _pyplot()
    n, means = len(d["means"]), d["means"]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * n))
    y = list(range(n))[::-1]
    err = [[m - lo for m, lo in zip(means, d["ci_low"])], [hi - m for m, hi in zip(means, d["ci_high"])]]
    ax.barh(y, means, xerr=err, color=d["colours"], capsize=3)
    ax.set_yticks(y, d["labels"], fontsize=8)
    ax.set_xlabel(f"{d['primary']} (mean, 95 % bootstrap CI)")
    ax.set_xlim(0, 1.0 if max([h for h in d["ci_high"] if not math.isnan(h)] + [0]) <= 1 else None)
    ax.set_title("green: best · blue: tied with best · grey: significantly worse", fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _draw_recall_curves(d: dict, path: Path) -> None:
    """Mean recall@k against k, one line per config."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for label, ks, recall in d["curves"]:
        ax.plot(ks, recall, marker="o", label=label)
    ax.set_xlabel("k (documents)")
    ax.set_ylabel("mean recall@k")
    ax.set_ylim(0, 1.02)
    ks = d["ks"]
    if ks and ks[-1] / max(ks[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"recall@k per config{d['more']}")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _draw_per_class(d: dict, path: Path) -> None:
    """The primary measure per config (rows) and query class (columns); the best of each class boxed in red."""
    plt = _pyplot()
    grid, classes, labels = d["grid"], d["classes"], d["labels"]
    fig, ax = plt.subplots(figsize=(3 + 1.3 * len(classes) + 3, 1.2 + 0.38 * len(labels)))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for j in range(len(classes)):
        column = [row[j] for row in grid]
        best = max((v for v in column if v == v), default=None)
        for i, v in enumerate(column):
            if v == v:
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if v > 0.6 else "white", fontweight="bold" if v == best else None)
                if v == best:
                    ax.add_patch(plt.Rectangle((j - .5, i - .5), 1, 1, fill=False, edgecolor="red", lw=1.5))
    ax.set_xticks(range(len(classes)), classes, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_title(f"{d['primary']} per query class (red box: best in the class)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


_DRAW = {"leaderboard": _draw_leaderboard, "recall_curves": _draw_recall_curves, "per_class": _draw_per_class}


MAX_CURVES = 8


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    return path


# ---------------------------------------------------------------- HTML
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5em auto;padding:0 1em;max-width:1300px;
color:#222;box-sizing:border-box}
h1{font-size:1.4em} h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd} h3{font-size:1em}
.headline{font-size:1.1em;background:#f1f8e9;border-left:5px solid #2e7d32;padding:.8em 1em}
.warning{background:#fff8e1;border-left:5px solid #f9a825;padding:.6em 1em}
.legend{background:#fafafa;border:1px solid #eee;padding:.6em 1em;font-size:.9em}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0;max-width:100%}
th,td{padding:.3em .5em;border-bottom:1px solid #eee;vertical-align:top} td{overflow-wrap:anywhere}
th{background:#fafafa;text-align:left} td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.num{white-space:nowrap}
tr.best td{background:#e8f5e9} tr.tied td{background:#e3f2fd} tr.failed td{color:#b71c1c}
.ci{color:#777;font-size:.9em} .muted{color:#777;font-size:.85em} img{max-width:100%;height:auto;border:1px solid #eee}
details{margin:.5em 0} summary{cursor:pointer;font-weight:600}
"""

#: most columns one table gets; a wider table is split (chunk statistics)
MAX_TABLE_COLUMNS = 8


def _e(x) -> str:
    return html.escape(str(x))


def _img(path: Path, alt: str) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _num_format(values: list[float | None]):
    """A formatter for one column: counts as integers (``213``, ``78,519``) when every value is whole, else
    shares and ratios with three decimals and larger values with one."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    whole = all(float(v).is_integer() for v in present)

    def fmt(v: float | None) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if whole:
            return f"{int(v):,}"
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return fmt


def _config_cells(labels: ConfigLabels, config_id: str, name: str) -> str:
    """Chunker, model and retriever cells; the stored name and id show on hover."""
    model = "– (BM25 only)" if labels.model == NO_MODEL else labels.model
    title = _e(f"{name} ({config_id})")
    return (f"<td title='{title}'>{_e(labels.chunker)}</td><td title='{title}'>{_e(model)}</td>"
            f"<td title='{title}'>{_e(labels.retriever)}</td>")


def _th(measure: str) -> str:
    """A numeric header that may break before ``_at_`` (``recall`` / ``_at_10``) instead of inside a word."""
    return f"<th class='num'>{_e(measure).replace('_at_', '<wbr>_at_')}</th>"


def _leaderboard_html(report: SweepReport) -> list[str]:
    parts = [f"<h2>Leaderboard</h2><p class='legend' id='legend'>{_e(legend(report))}</p>",
             "<table id='leaderboard'><tr><th class='num'>#</th><th>chunker</th><th>model</th><th>retriever</th>"
             + "".join(_th(m) for m in report.measures)
             + "<th class='num'>W/T/L vs best</th><th class='num'>p vs best (Holm)</th><th class='num'>ms/query</th>"
             "<th class='num'>queries</th></tr>"]
    for r in report_rows(report):
        cid = r["config_id"]
        if r["rank"] is None:
            parts.append(f"<tr class='failed'><td></td>{_config_cells(report.labels_of(cid), cid, r['name'])}"
                         f"<td colspan='{len(report.measures) + 4}'>FAILED: {_e(r['error'])}</td></tr>")
            continue
        mark = r[f"{report.primary}_mark"]
        cls = "best" if mark == "★" else ("tied" if r["tied_with_best"] else "")
        cells = "".join(
            f"<td class='num'>{r[f'{m}_mark']} {_fmt(r[m])}<br><span class='ci'>[{_fmt(r[f'{m}_ci_low'], 3)}, "
            f"{_fmt(r[f'{m}_ci_high'], 3)}]</span></td>" if r.get(m) is not None else "<td>–</td>"
            for m in report.measures)
        wtl = "—" if mark == "★" else f"{r['wins']}/{r['ties']}/{r['losses']}"
        parts.append(f"<tr class='{cls}'><td class='num'>{r['rank']}</td>"
                     f"{_config_cells(report.labels_of(cid), cid, r['name'])}{cells}<td class='num'>{wtl}</td>"
                     f"<td class='num'>{_fmt(r['p_vs_best'])}</td><td class='num'>{_fmt(r['ms_per_query'], 1)}</td>"
                     f"<td class='num'>{r['queries']}<br><span class='muted'>+{r['unlabelled'] or 0} unlabelled"
                     "</span></td></tr>")
    parts.append(f"</table><p class='muted'>Brackets: 95 % percentile-bootstrap CI of the mean over labelled "
                 f"queries. W/T/L: queries where the config beats / ties / loses to the best on "
                 f"{_e(report.primary)}. #: the rank `ragbench explain` and `ragbench promote` accept.</p>")
    return parts


def _heldout_html(report: SweepReport) -> list[str]:
    """The winner's tuning and held-out scores side by side with the drop (only for a sweep with a held-out
    set)."""
    w = report.winner_heldout
    if w is None:
        return []
    drop = "–" if math.isnan(w.drop) else f"{w.drop:+.4f}"
    return [f"<h2>The winner on the held-out set</h2><table id='winner-heldout'><tr><th>config</th>"
            f"<th class='num'>tuning {_e(w.primary)}</th><th class='num'>held-out {_e(w.primary)}</th>"
            f"<th class='num'>drop (tuning − held-out)</th></tr><tr><td>{_e(w.label)}</td>"
            f"<td class='num'>{_fmt(w.tuning)}<br><span class='muted'>{w.n_tuning} queries</span></td>"
            f"<td class='num'>{_fmt(w.heldout)}<br><span class='muted'>{w.n_heldout} queries</span></td>"
            f"<td class='num'>{drop}</td></tr></table><p class='legend'>{_e(w.sentence())}</p>"]


def _vs_best_html(report: SweepReport) -> list[str]:
    comp = report.comparisons[report.primary]
    parts = [f"<h2>Against the best on {_e(report.primary)}</h2><p class='muted'>Each config against "
             f"{_e(report.label_of(comp.best))}: paired {_e(comp.test)} test on the same queries, "
             f"{_e(resolution(comp))}.</p><table id='vs-best'><tr><th class='num'>#</th><th>chunker</th>"
             f"<th>model</th><th>retriever</th>{_th(report.primary)}<th class='num'>− best</th>"
             "<th class='num'>p (Holm)</th><th>verdict</th><th class='num'>W/T/L</th></tr>"]
    for r in vs_best_rows(report):
        verdict = "▼ significantly worse" if r["significant"] else "≈ not distinguishable"
        parts.append(f"<tr class='{'tied' if not r['significant'] else ''}'><td class='num'>{r['rank']}</td>"
                     f"{_config_cells(report.labels_of(r['config_id']), r['config_id'], r['name'])}"
                     f"<td class='num'>{_fmt(r['mean'])}</td><td class='num'>{r['mean_diff']:+.4f}</td>"
                     f"<td class='num'>{_fmt(r['p_vs_best'])}</td><td>{verdict}</td>"
                     f"<td class='num'>{r['wins']}/{r['ties']}/{r['losses']}</td></tr>")
    parts.append("</table>")
    return parts


def _pairs_html(report: SweepReport) -> list[str]:
    comp = report.comparisons[report.primary]
    parts = [f"<details id='all-pairs'><summary>All {len(comp.pairs)} pairs on {_e(report.primary)}</summary>"
             "<table id='pairs'><tr><th>A (better mean)</th><th>B</th><th class='num'>mean A−B</th>"
             "<th class='num'>p</th><th class='num'>p (Holm)</th><th>significant</th><th class='num'>W/T/L</th>"
             "</tr>"]
    for p in sorted(comp.pairs, key=lambda p: -abs(p.mean_diff)):
        if p.mean_diff < 0:
            p = comp.pair(p.config_b, p.config_a)
        parts.append(f"<tr><td>{_e(report.label_of(p.config_a))}</td><td>{_e(report.label_of(p.config_b))}</td>"
                     f"<td class='num'>{p.mean_diff:+.4f}</td><td class='num'>{_fmt(p.p_value)}</td>"
                     f"<td class='num'>{_fmt(p.p_adjusted)}</td><td>{'yes' if p.significant else 'no'}</td>"
                     f"<td class='num'>{p.wins}/{p.ties}/{p.losses}</td></tr>")
    parts.append("</table></details>")
    return parts


def _chunk_stats_html(report: SweepReport) -> list[str]:
    """Chunk statistics pivoted: one row per chunker (per tokenizer when they differ), one column per statistic,
    split into tables of at most :data:`MAX_TABLE_COLUMNS` statistics."""
    parts = ["<h2>Chunk statistics</h2>"]
    if report.chunk_stats is None:
        return parts + ["<p class='muted'>No chunk statistics were stored for this sweep.</p>"]
    vals: dict[str, dict[str, float]] = {}
    for cid, stat, v in report.chunk_stats.select("config_id", "stat", "value").iter_rows():
        vals.setdefault(cid, {})[stat] = v
    stats = list(dict.fromkeys(report.chunk_stats["stat"].to_list()))
    groups: dict[tuple, list[str]] = {}  # (chunker, values) -> configs: configs of one chunker share its stats
    order = [c for c in report.leaderboard()["config_id"].to_list() if c in vals] + \
        [c for c in vals if c not in set(report.leaderboard()["config_id"].to_list())]
    for cid in order:
        key = (report.labels_of(cid).chunker, tuple(vals[cid].get(s) for s in stats))
        groups.setdefault(key, []).append(cid)
    variants: dict[str, int] = {}
    for chunker, _ in groups:
        variants[chunker] = variants.get(chunker, 0) + 1
    rows = []
    for (chunker, values), cids in groups.items():
        label = chunker
        if variants[chunker] > 1:  # token counts differ by the model's tokenizer
            models = dict.fromkeys("BM25" if report.labels_of(c).model == NO_MODEL else report.labels_of(c).model
                                   for c in cids)
            label += f" · tokens of {', '.join(models)}"
        rows.append((label, dict(zip(stats, values))))
    boundary = [s for s in stats if s.startswith(("chunks_", "spans_"))]
    size = [s for s in stats if s not in boundary]
    fmt = {s: _num_format([v.get(s) for _, v in rows]) for s in stats}
    for n, cols in enumerate(t for g in (size, boundary) for t in _split(g, MAX_TABLE_COLUMNS)):
        parts.append(f"<table class='chunk-stats' id='chunk-stats-{n + 1}'><tr><th>chunker</th>"
                     + "".join(f"<th class='num'>{_e(s.replace('_', ' '))}</th>" for s in cols) + "</tr>")
        for label, v in rows:
            parts.append(f"<tr><td>{_e(label)}</td>"
                         + "".join(f"<td class='num'>{fmt[s](v.get(s))}</td>" for s in cols) + "</tr>")
        parts.append("</table>")
    parts.append("<p class='muted'>Token counts use the tokenizer of the config's model (BM25 configs: the "
                 "chunker's). Shares are fractions of chunks or of gold spans.</p>")
    return parts


def _split(items: list, most: int) -> list[list]:
    """``items`` in as few even parts as keep each within ``most`` (9 -> 5 + 4, not 8 + 1)."""
    if not items:
        return []
    n = math.ceil(len(items) / most)
    size = math.ceil(len(items) / n)
    return [items[i:i + size] for i in range(0, len(items), size)]


def render_html(report: SweepReport, plots: dict[str, Path]) -> str:
    """The report as one self-contained HTML document (no external resource), every table within 1,400 px: the
    headline, the legend, the leaderboard, each config against the best, plots, per-class results, chunk
    statistics, and every pair behind a ``<details>``."""
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ragbench · {_e(report.sweep_id)}"
             f"</title><style>{_CSS}</style></head><body>",
             f"<h1>ragbench sweep <code>{_e(report.sweep_id)}</code></h1>",
             f"<p class='muted'>dataset {_e(report.dataset_name)} (fingerprint {_e(report.dataset_fingerprint)}) · "
             f"status {_e(report.status)} · {report.configs.height} configs · primary measure "
             f"{_e(report.primary)} · generated {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}</p>",
             f"<p class='headline'>{_e(report.headline)}</p>"]
    parts += [f"<p class='warning dataset-warning'><b>Warning:</b> {_e(w)}</p>" for w in report.dataset_warnings]
    parts += _heldout_html(report)
    parts += _leaderboard_html(report)
    parts += _vs_best_html(report)

    parts.append("<h2>Plots</h2>")
    titles = {"leaderboard": f"{report.primary} with confidence intervals", "recall_curves": "recall@k curves",
              "per_class": f"{report.primary} per query class"}
    for key, path in plots.items():
        parts.append(f"<h3>{_e(titles.get(key, key))}</h3>{_img(path, titles.get(key, key))}")

    if report.per_class.height:
        classes = sorted(report.per_class["query_class"].unique().to_list())
        best_of = dict(report.per_class.group_by("query_class").agg(pl.col("mean").max()).iter_rows())
        parts.append(f"<h2>{_e(report.primary)} per query class</h2>")
        for chunk in _split(classes, MAX_TABLE_COLUMNS):
            parts.append("<table class='per-class'><tr><th>config</th>"
                         + "".join(f"<th class='num'>{_e(c)}</th>" for c in chunk) + "</tr>")
            for cid in report.leaderboard()["config_id"].to_list():
                sub = {r["query_class"]: r for r in report.per_class.filter(pl.col("config_id") == cid)
                       .iter_rows(named=True)}
                cells = []
                for c in chunk:
                    r = sub.get(c)
                    if r is None:
                        cells.append("<td>–</td>")
                        continue
                    v = f"{r['mean']:.3f}"
                    cells.append(f"<td class='num'>{'<b>' + v + '</b>' if r['mean'] == best_of.get(c) else v} "
                                 f"<span class='ci'>n={r['n']}</span></td>")
                parts.append(f"<tr><td>{_e(report.label_of(cid))}</td>{''.join(cells)}</tr>")
            parts.append("</table>")
        parts.append("<p class='muted'>Bold: best config for that class. Unlabelled queries are excluded.</p>")

    parts += cost_html(report.costs, report.primary)
    parts += _chunk_stats_html(report)
    parts.append("<h2>Every pair</h2>")
    parts += _pairs_html(report)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html_report(store: ResultStore, sweep_id: str, out_dir: Path, *, settings: Settings | None = None,
                      log_to_mlflow: bool = True, report: SweepReport | None = None, **kwargs) -> Path:
    """Write ``report.html`` (self-contained) and the PNG plots into ``out_dir``; log them to MLflow.

    The files are logged under ``report/`` of the sweep's MLflow parent run (``sweeps.mlflow_run_id``) with the
    tracking URI :func:`ragbench.results.tracking.default_tracking_uri` of ``settings`` (default: the store's folder). When the
    sweep has no MLflow run or MLflow is unreachable, the report is still written and a warning says why.

    Returns
    -------
    Path
        The HTML file.
    """
    report = report or build_report(store, sweep_id, **kwargs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = _plots(report, out_dir, store.path.parent / "cache")
    path = out_dir / "report.html"
    path.write_text(render_html(report, plots), encoding="utf-8")
    if log_to_mlflow:
        log_report_to_mlflow(report, [path, *plots.values()], settings or Settings(home=store.path.parent))
    return path


def log_report_to_mlflow(report: SweepReport, paths: list[Path], settings: Settings) -> str | None:
    """Log files as artifacts (``report/``) of the sweep's parent run; returns the run id, or None if not logged."""
    if not report.mlflow_run_id:
        log.info("sweep %s has no MLflow run; report not logged to MLflow", report.sweep_id)
        return None
    from ragbench.results.tracking import default_tracking_uri

    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=default_tracking_uri(settings))
        for p in paths:
            client.log_artifact(report.mlflow_run_id, str(p), artifact_path="report")
    except Exception as e:  # the report is on disk either way; MLflow is for browsing
        log.warning("could not log the report to MLflow run %s: %s", report.mlflow_run_id,
                    str(e).splitlines()[0][:200])
        return None
    return report.mlflow_run_id

