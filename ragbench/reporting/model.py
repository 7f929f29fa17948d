"""The report model: which config won, by how much, how sure we are, and where it wins (built once).

Everything is computed from the DuckDB store (``query_metrics`` holds one value per query, config and measure), so a
report can be built at any time after a sweep, by another process:

* per config and measure: the mean with a percentile-bootstrap 95 % CI
  (:func:`ragbench.evaluation.intervals.bootstrap_ci`);
* paired tests of every pair of configs on the same queries (:func:`ragbench.evaluation.comparison.compare_configs`:
  randomization test by default, Holm correction over all pairs of the grid), the set "tied with the best"
  (Holm-adjusted p >= alpha against the best) and win/tie/loss counts against the best;
* recall@k curves per config, the primary measure per query class, the winner's held-out check, cost and the
  Pareto front, and chunk statistics (table ``chunk_stats`` when the sweep wrote one).

:func:`build_report` returns a :class:`SweepReport`; one renderer per format reads it (``render_terminal``,
``render_markdown``, ``render_html``, ``render_json``, ``render_csv``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import polars as pl

from ragbench.config.labels import NO_MODEL, ConfigLabels
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import MeasureMap, measure_key, measure_keys
from ragbench.data.holdout import heldout_key
from ragbench.data.labels import synthetic_warnings
from ragbench.evaluation.comparison import Comparison, compare_configs
from ragbench.evaluation.kept import stats_kept_in
from ragbench.evaluation.means import query_mean, query_means
from ragbench.evaluation.metrics import document_cutoff, unreached_depth
from ragbench.reporting.assessor import AssessorSection, assessor_section
from ragbench.reporting.columns import leaderboard_measures, shown_measures
from ragbench.reporting.decision import QuestionsNeeded, questions_needed_rows
from ragbench.reporting.heldout import HoldoutRepeats, WinnerHeldOut, holdout_repeats
from ragbench.reporting.label_coverage import LabelCoverage, coverage_cells, is_coverage, label_coverage
from ragbench.reporting.leaderboard import Judged, Leaderboard, LeaderboardRow, VsBest
from ragbench.reporting.pareto import COST_COLUMNS, cost_table
from ragbench.reporting.pooled import PooledJudgments, pooled_scores
from ragbench.reporting.since import ConfigRef, SincePrevious, StatOptions, since_previous
from ragbench.reporting.vs_production import VsProduction, vs_production
from ragbench.results.completion import SweepCompletion, sweep_completion
from ragbench.results.lookup import sweep_primary
from ragbench.results.outcomes import STATUS_WORDS
from ragbench.results.store import ResultStore

SUMMARY_SCHEMA = {
    "config_id": pl.String, "name": pl.String, "measure": pl.String, "mean": pl.Float64, "ci_low": pl.Float64,
    "ci_high": pl.Float64, "n": pl.Int64, "is_best": pl.Boolean, "tied_with_best": pl.Boolean,
    "p_vs_best": pl.Float64, "worse_than_best": pl.Boolean, "wins": pl.Int64, "ties": pl.Int64, "losses": pl.Int64}


@dataclass(frozen=True)
class SweepReport:
    """Everything a report shows, as tables.

    Attributes
    ----------
    configs : polars.DataFrame
        One row per config of the sweep: ``config_id, name, status, error, n_queries, n_unlabelled,
        retrieval_ms_per_query, mlflow_run_id, n_without_evidence`` and its labels for people: ``chunker, model,
        retriever, label``
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
    questions_needed : tuple of QuestionsNeeded
        For each config tied with the best, the questions a paired test needs to tell them apart
        (:func:`ragbench.reporting.decision.questions_needed_rows`).
    holdout_repeats : HoldoutRepeats or None
        How stable the pick is over repeated held-out splits, when ``dataset.holdout`` asks for repeats
        (:func:`ragbench.reporting.heldout.holdout_repeats`).
    dataset_warnings : tuple of str
        What the reader must know about the questions before trusting the means: synthetic questions that reuse
        their passage's words, synthetic and real questions mixed
        (:func:`ragbench.data.labels.synthetic_warnings` of the notes stored with the sweep).
    costs : polars.DataFrame or None
        Cost and the Pareto front, one row per ranked config (:func:`ragbench.reporting.pareto.cost_table`).
    completion : SweepCompletion or None
        Whether the sweep ran to its end and how many of its configs are done
        (:func:`ragbench.results.completion.sweep_completion`); an unfinished sweep ranks only the configs done.
    since_previous : SincePrevious or None
        What changed since the previous sweep (:func:`ragbench.reporting.since.since_previous`); None with
        ``since_note`` saying why when there is none.
    vs_production : VsProduction or None
        The best against the live promotion on the same queries
        (:func:`ragbench.reporting.vs_production.vs_production`); ``production_note`` says it in words, or why
        there is nothing to compare with.
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
    questions_needed: tuple[QuestionsNeeded, ...] = ()
    holdout_repeats: HoldoutRepeats | None = None
    dataset_warnings: tuple[str, ...] = ()
    costs: pl.DataFrame | None = None
    completion: SweepCompletion | None = None
    since_previous: SincePrevious | None = None
    since_note: str | None = None
    vs_production: VsProduction | None = None
    production_note: str | None = None
    label_coverage: LabelCoverage | None = None  # judged@k beside the primary (ragbench.reporting.label_coverage)
    pooled: PooledJudgments | None = None  # before and after judgments were added (ragbench.reporting.pooled)
    assessor: AssessorSection | None = None  # LLM assessors' kappa with people (ragbench.reporting.assessor)
    screening: pl.DataFrame | None = None  # a screened sweep's screen, one row per pair (results/store_screening)

    @property
    def unfinished(self) -> str | None:
        """``unfinished: 1 of 6 configs (interrupted; ...)``: what every format says of a sweep that did not
        finish; None once it has."""
        c = self.completion
        if c is None or c.finished:
            return None
        return f"{c.text} ({c.why}); the leaderboard ranks only the configs done"

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

    @cached_property
    def board(self) -> Leaderboard:
        """The leaderboard rows (:func:`report_leaderboard`), computed once per report."""
        return report_leaderboard(self)

    @property
    def headline(self) -> str:
        """``"<config> wins on <primary>: 0.xxx [lo, hi]; tied with: ...; significantly better than N of M"``."""
        board = self.leaderboard()
        best = board.filter(pl.col("config_id") == self.best).row(0, named=True)
        tied = [self.label_of(c) for c in self.tied_with_best]
        others = board.filter(pl.col("config_id") != self.best)
        beaten = int(others["worse_than_best"].sum()) if others.height else 0
        if len(tied) > 3:  # a long list reads as noise: name the closest runners-up, count the rest
            tied_text = f"{'; '.join(tied[:3])} and {len(tied) - 3} more (not significantly different)"
        else:
            tied_text = "; ".join(tied) if tied else "none"  # labels hold ", "
        return (f"{self.label_of(self.best)} wins on {self.primary}: {best['mean']:.3f} [{best['ci_low']:.3f}, "
                f"{best['ci_high']:.3f}]; tied with: {tied_text}; significantly better than {beaten} of "
                f"{others.height}")



def per_query_values(store: ResultStore, sweep_id: str, measures: list[str] | None = None) -> pl.DataFrame:
    """``config_id, query_id, query_class, measure, value`` of the sweep's finished configs
    (:meth:`ResultStore.per_query_values`)."""
    return store.per_query_values(sweep_id, measures)


@dataclass(frozen=True)
class ReportOptions:
    """How a report compares configs: ``primary`` (default: the sweep's), ``measures`` (default: the primary,
    its held-out score and the leaderboard measures present), the paired ``test``, ``alpha``, ``n_resamples`` and
    ``seed`` of the randomization test and bootstrap, ``pairs`` (``vs_best`` or ``all``), and ``since``: the
    sweep the "since the previous sweep" section compares with (default: the sweep's predecessor)."""

    primary: str | None = None
    measures: tuple[str, ...] | None = None
    test: str = "randomization"
    alpha: float = 0.05
    n_resamples: int = 10_000
    seed: int = 0
    pairs: str = "vs_best"
    since: str | None = None


def build_report(store: ResultStore, sweep_id: str, options: ReportOptions | None = None,
                 **fields) -> SweepReport:
    """Compute every table of a sweep's report (see :class:`SweepReport`), once.

    ``options`` (or its fields as keywords: ``primary, measures, test, alpha, n_resamples, seed, pairs``, see
    :class:`ReportOptions`) say what is compared and how. Statistics are computed for ``measures`` (default: the
    primary measure plus the :data:`~ragbench.reporting.columns.LEADERBOARD_MEASURES` present in the sweep,
    ``recall@{max_k}`` being its deepest recall); failed configs are listed but excluded from the statistics. Its
    reads share one connection (:meth:`~ragbench.results.store.ResultStore.reading`); its bootstrap intervals and
    randomization tests are kept in ``<store's folder>/cache/stats`` (:mod:`ragbench.evaluation.kept`).
    """
    from ragbench.core.cache import StatsCache  # noqa: PLC0415 (pyarrow's parquet: only once a report is built)

    opts = replace(options or ReportOptions(), **fields)
    # intervals and tests kept in the home's cache (beside the store, as the report's plots): a report of reused
    # configs draws none of its resamples again
    with store.reading(), stats_kept_in(StatsCache(store.path.parent / "cache")):
        return _build_report(store, sweep_id, opts)


def _configs_table(store: ResultStore, sweep_id: str) -> pl.DataFrame:
    """One row per config with its labels for people (chunker, model, retriever, label)."""
    board = store.leaderboard(sweep_id)
    labels = [ConfigLabels.from_stored(json.loads(s or "{}"), n)
              for s, n in zip(board["spec_json"].to_list(), board["name"].to_list())]
    return (board.select("config_id", "name", "status", "error", "n_queries", "n_unlabelled",
                         "retrieval_ms_per_query", "mlflow_run_id", "n_without_evidence")
            .with_columns(pl.Series("chunker", [lb.chunker for lb in labels], pl.String),
                          pl.Series("model", [lb.model for lb in labels], pl.String),
                          pl.Series("retriever", [lb.retriever for lb in labels], pl.String),
                          pl.Series("label", [lb.text for lb in labels], pl.String))
            .sort("name", nulls_last=True, maintain_order=True))


def _chosen_measures(sweep_id: str, primary: str, measures: tuple[str, ...] | None,
                     available: set[str], spec: dict | None = None) -> tuple[str, ...]:
    """The measures the report compares; an unknown primary or measure is an error naming what is available.
    Label coverage (judged@k) is shown beside the primary, never compared (:mod:`ragbench.reporting.label_coverage`)."""
    if is_coverage(primary):
        raise RagbenchError(f"{primary} is label coverage (the share of the top k that is judged), not retrieval "
                            "quality: it cannot be the primary measure; choose e.g. ndcg@10")
    if primary not in available:
        raise RagbenchError(f"measure {primary!r} was not computed in sweep {sweep_id}; available: "
                            f"{', '.join(sorted(available))}")
    held = heldout_key(primary)
    if measures is None:  # the sweep file's metrics.show chooses the columns when it is set
        measures = shown_measures(spec or {}, primary, held, available)
    if measures is None:  # the held-out score of every config right after the primary it was ranked on
        measures = (primary, *([held] if held in available else []),
                    *[m for m in leaderboard_measures(available) if m not in (primary, held) and m in available])
    unknown = [m for m in measures if m not in available]
    if unknown:
        raise RagbenchError(f"measure(s) {unknown} not computed in sweep {sweep_id}; available: "
                            f"{', '.join(sorted(available))}")
    return tuple(m for m in measures if not is_coverage(m))


def _compare(pq: pl.DataFrame, measures: tuple[str, ...], shallow: dict[str, dict[str, int]],
             names: dict[str, str], opts: ReportOptions) -> tuple[dict[str, Comparison], pl.DataFrame]:
    """Every measure's paired comparison and the summary table (one row per config and measure)."""
    finished = set(pq["config_id"].unique().to_list())
    comparisons: dict[str, Comparison] = {}
    rows = []
    for m in measures:
        if set(shallow.get(m, ())) >= finished:
            continue  # no config reached this cutoff: nothing to compare (the note says so)
        # a config that reached fewer documents than the cutoff is left out of that measure's comparison
        kept = pq.filter((pl.col("measure") != m) | ~pl.col("config_id").is_in(list(shallow.get(m, {}))))
        comp = compare_configs(kept, m, test=opts.test, alpha=opts.alpha, n_resamples=opts.n_resamples,
                               seed=opts.seed, pairs=opts.pairs)
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
    return comparisons, pl.DataFrame(rows, schema=SUMMARY_SCHEMA)


def _build_report(store: ResultStore, sweep_id: str, opts: ReportOptions) -> SweepReport:
    sweep = store.sweep(sweep_id)
    if sweep is None:
        raise RagbenchError(f"sweep {sweep_id!r} not found in {store.path}")
    primary = measure_key(opts.primary) if opts.primary else sweep_primary(store, sweep_id)
    configs = _configs_table(store, sweep_id)
    pq = per_query_values(store, sweep_id)
    if pq.is_empty():
        counts = configs.group_by("status").len().sort("status").iter_rows()
        told = ", ".join(f"{n} {STATUS_WORDS.get(status, status)}" for status, n in counts)
        raise RagbenchError(f"sweep {sweep_id} has no finished config with results" + (f" ({told})" if told else ""))
    available = set(pq["measure"].unique().to_list())
    measures = _chosen_measures(sweep_id, primary, measure_keys(opts.measures), available,
                                json.loads(sweep.get("spec_json") or "{}"))
    names = dict(configs.select("config_id", "name").iter_rows())
    stored = {cid: MeasureMap(mets) for cid, (mets, _, _) in store.stored_config_metrics(sweep_id).items()}
    shallow = {m: refused for m in measures
               if (refused := {cid: d for cid, mets in stored.items() if (d := unreached_depth(mets, m)) is not None})}
    if shallow.get(primary) and set(shallow[primary]) >= set(pq["config_id"].unique().to_list()):
        raise RagbenchError(f"{primary} cannot be compared in sweep {sweep_id}: no config reached "
                            f"{document_cutoff(primary)} distinct documents for every query; fetch deeper with "
                            f"retrievers[].documents: {document_cutoff(primary)}")
    comparisons, summary = _compare(pq, measures, shallow, names, opts)
    held = heldout_key(primary)
    labels = dict(configs.select("config_id", "label").iter_rows())
    winner = None
    if held in available and primary in comparisons:
        winner = _winner_heldout(pq, comparisons[primary], held, labels)
    coverage = label_coverage(stored, primary, comparisons.get(primary), sweep_id, labels)
    return SweepReport(
        sweep_id=sweep_id, sweep_name=sweep["name"], dataset_name=sweep["dataset_name"],
        dataset_fingerprint=sweep["dataset_fingerprint"], status=sweep["status"], primary=primary,
        measures=tuple(m for m in measures if m in comparisons), test=opts.test, alpha=opts.alpha,
        configs=configs, summary=summary, shallow=shallow, comparisons=comparisons,
        recall_curves=_recall_curves(pq, names), per_class=_per_class(pq, primary, names),
        chunk_stats=_chunk_stats(store, sweep_id, names), mlflow_run_id=sweep.get("mlflow_run_id"),
        winner_heldout=winner, questions_needed=questions_needed_rows(pq, comparisons.get(primary), names, labels),
        holdout_repeats=holdout_repeats(pq, comparisons.get(primary), json.loads(sweep.get("spec_json") or "{}"),
                                        labels),
        costs=_costs(summary, primary, comparisons, stored, configs), pooled=pooled_scores(stored, primary, labels),
        completion=sweep_completion(store, sweep_id), **_sections(store, sweep_id, primary, comparisons, labels, opts),
        label_coverage=coverage, assessor=assessor_section(store, sweep["dataset_name"]),
        screening=_screening(store, sweep_id),
        dataset_warnings=tuple(synthetic_warnings(json.loads(sweep.get("dataset_notes") or "{}")))
        + ((coverage.sentence,) if coverage and coverage.sentence else ()))


def _screening(store: ResultStore, sweep_id: str) -> pl.DataFrame | None:
    """The sweep's screen rows, None when it had no screen (or the file predates the table)."""
    try:
        rows = store.screening(sweep_id)
    except Exception:  # a read-only file written before the table existed
        return None
    return rows if rows.height else None


def _sections(store: ResultStore, sweep_id: str, primary: str, comparisons: dict[str, Comparison],
              labels: dict[str, str], opts: ReportOptions) -> dict:
    """The "since the previous sweep" and "against production" fields of the report, with the report's test."""
    stats = StatOptions(opts.test, opts.alpha, opts.n_resamples, opts.seed)
    since, since_note = since_previous(store, sweep_id, primary, stats, since=opts.since)
    out = {"since_previous": since, "since_note": since_note}
    if primary in comparisons:
        comp = comparisons[primary]
        best = ConfigRef(comp.best, store.config_names(sweep_id).get(comp.best, comp.best),
                         labels.get(comp.best, comp.best), comp.config(comp.best).mean)
        out["vs_production"], out["production_note"] = vs_production(store, sweep_id, best, primary, stats)
    return out


def _winner_heldout(pq: pl.DataFrame, comp: Comparison, held: str, labels: dict[str, str]) -> WinnerHeldOut:
    """The best config on the tuning set (``comp``) with its mean on the held-out set (NaN values excluded,
    as for every mean of the report)."""
    best = comp.config(comp.best)
    values = pq.filter((pl.col("config_id") == comp.best) & (pl.col("measure") == held)
                       & pl.col("value").is_not_nan())["value"]
    return WinnerHeldOut(comp.best, labels.get(comp.best, comp.best), comp.measure, best.mean,
                         query_mean(values), len(comp.configs), best.n,
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
            .pipe(query_means, ["config_id", "k"], name="recall")
            .with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "k", "recall").sort(["config_id", "k"]))


def _per_class(pq: pl.DataFrame, primary: str, names: dict[str, str]) -> pl.DataFrame:
    sub = pq.filter((pl.col("measure") == primary) & pl.col("value").is_not_nan())
    return (sub.with_columns(pl.col("query_class").fill_null("(none)"))
            .pipe(query_means, ["config_id", "query_class"], n=pl.len().cast(pl.Int64))
            .with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "query_class", "n", "mean").sort(["query_class", "config_id"]))


def _chunk_stats(store: ResultStore, sweep_id: str, names: dict[str, str]) -> pl.DataFrame | None:
    df = store.chunk_stats(sweep_id)
    if df.is_empty():
        return None
    return (df.with_columns(pl.col("config_id").replace_strict(names, default=pl.col("config_id")).alias("name"))
            .select("config_id", "name", "stat", pl.col("value").cast(pl.Float64)))


# ---------------------------------------------------------------- the one leaderboard
def mark(row: dict) -> str:
    """Significance mark against the measure's best: ★ best, ≈ tied (not distinguishable), ▼ significantly worse."""
    if row["is_best"]:
        return "★"
    return "▼" if row["worse_than_best"] else "≈"


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


def _labels(c: dict) -> ConfigLabels:
    return ConfigLabels(c.get("chunker"), c.get("model"), c.get("retriever"))


def report_leaderboard(report: SweepReport) -> Leaderboard:
    """The report's leaderboard: finished configs best first on the primary measure, each measure with its CI and
    mark; then the configs too shallow for the primary (``not compared``) and the failed ones, unranked."""
    by = {(r["config_id"], r["measure"]): r for r in report.summary.iter_rows(named=True)}
    cfg = {r["config_id"]: r for r in report.configs.iter_rows(named=True)}
    rows = []
    for i, row in enumerate(report.leaderboard().iter_rows(named=True), 1):
        cid = row["config_id"]
        c = cfg.get(cid, {})
        judged = {m: Judged(r["mean"], r["ci_low"], r["ci_high"], mark(r))
                  for m in report.measures if (r := by.get((cid, m)))}
        vs = VsBest(row["tied_with_best"], row["worse_than_best"], row["p_vs_best"], row["wins"], row["ties"],
                    row["losses"])
        rows.append(LeaderboardRow(i, cid, c.get("name"), _labels(c), "finished", None,
                                   values={m: j.mean for m, j in judged.items()}, judged=judged, vs_best=vs,
                                   counts=(c.get("retrieval_ms_per_query"), row["n"], c.get("n_unlabelled")),
                                   extra={**_cost_cells(report, cid), **coverage_cells(report.label_coverage, cid)}))
    for cid, depth in report.shallow.get(report.primary, {}).items():  # finished, but not comparable on primary
        c = cfg.get(cid, {})
        rows.append(LeaderboardRow(None, cid, c.get("name"), _labels(c), "not compared",
                                   f"reached {depth} distinct documents, fewer than {report.primary}'s cutoff"))
    for c in report.configs.filter(pl.col("status") != "finished").iter_rows(named=True):
        rows.append(LeaderboardRow(None, c["config_id"], c["name"], _labels(c), c["status"], c["error"]))
    return Leaderboard(report.primary, report.measures, tuple(rows), judged=True, winner=report.winner_heldout)
