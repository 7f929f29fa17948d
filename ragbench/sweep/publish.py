"""After a sweep: put the answer where people look in the morning.

:func:`publish_sweep` builds the sweep's report from DuckDB and writes it (self-contained HTML + plots, also under
``report/`` of the MLflow parent run), then puts on the parent run the best config's metrics, the configs tied
with it, a markdown description under MLflow's 8,000 characters (the best rows of the leaderboard, linked to the
full one, ``report/leaderboard.md``), and on every config's child run of the sweep (reused ones included) its rank,
the CI of the primary measure, its test against the best, its difference to production and its own plot (recall@k,
primary measure per query class). The CLI and the Prefect flow call it after :func:`~ragbench.sweep.run_sweep`;
in a notebook, call it yourself. Nothing here can fail the sweep: every step only warns. A publication that finished
leaves ``published.json`` beside the report (:func:`stamp_published`): what a rerun checks to be up to date.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ragbench.core.atomic import write_text_atomically
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.paths import home_path
from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.evaluation.means import query_mean
from ragbench.reporting.cells import value_cell
from ragbench.reporting.model import SweepReport, build_report
from ragbench.reporting.plots import cached_plot, config_plot
from ragbench.reporting.render_markdown import leaderboard_markdown, sweep_description
from ragbench.reporting.write import write_html_report
from ragbench.results.night import sweep_children
from ragbench.results.store import ResultStore
from ragbench.results.tracking import default_tracking_uri, open_tracker, run_url
from ragbench.sweep.wrap_up import PUBLISH, remember_wrap_up


@dataclass(frozen=True)
class Published:
    """Where the answer went: the report (None when it could not be built), its HTML file, the MLflow parent run
    and a URL to it (for a SQLite store: where ``mlflow ui`` serves it by default)."""

    sweep_id: str
    report: SweepReport | None
    html: Path | None
    mlflow_run_id: str | None = None
    mlflow_url: str | None = None


def _first_line(e: Exception) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0][:200]


def publish_sweep(sweep_id: str, settings: Settings, *, out_dir: Path | None = None, mlflow: bool = True,
                  config_plots: bool = True) -> Published:
    """Write the report of ``sweep_id`` (into ``out_dir``, default ``<home>/reports/<sweep id>``, the id as a slug
    and checked to stay inside the home) and, when the sweep has an MLflow parent run and ``mlflow`` is on,
    summarize the sweep on it and plot each config on its child run (``config_plots``)."""
    home = Path(settings.home)
    began = time.perf_counter()  # timed for the next budget (wrap_up)
    store = ResultStore(home / "results.duckdb")
    try:
        report = build_report(store, sweep_id)
        folder = out_dir or home_path(home, "reports", sweep_id, what="the report folder")
        html = write_html_report(store, sweep_id, folder, settings=settings, log_to_mlflow=mlflow, report=report)
    except Exception as e:  # a sweep whose every config failed has no report; the sweep itself stands
        log.warning("no report for sweep %s: %s", sweep_id, _first_line(e))
        return Published(sweep_id, None, None)
    run_id, url, summarized = report.mlflow_run_id, None, False
    if mlflow and run_id:
        try:
            url, summarized = _summarize_on_mlflow(store, report, settings, html, config_plots), True
        except Exception as e:
            log.warning("MLflow: could not summarize sweep %s on run %s: %s", sweep_id, run_id, _first_line(e))
    try:  # what a rerun checks to be up to date; without it the rerun records a new sweep, nothing worse
        stamp_published(store, sweep_id, html, run_id if summarized else None, url, settings)
    except Exception as e:
        log.warning("could not stamp the publication of sweep %s: %s", sweep_id, _first_line(e))
    remember_wrap_up(home, PUBLISH, report.configs.filter(pl.col("status") == "finished").height,
                     time.perf_counter() - began)
    return Published(sweep_id, report, html, run_id, url)


#: the file a finished publication leaves beside its report (``<home>/reports/<sweep id>/published.json``)
STAMP = "published.json"


def stamp_published(store: ResultStore, sweep_id: str, html: Path, mlflow_run_id: str | None,
                    mlflow_url: str | None, settings: Settings) -> None:
    """Leave :data:`STAMP` beside the report ``html`` once the sweep's publication finished: the report's SHA-256,
    the MLflow parent run it was summarized on (None: not summarized) with a hash of the tracking URI, and the
    promotions' state. Only a stamp that still matches lets a rerun be up to date (:mod:`ragbench.sweep.up_to_date`)."""
    _write_stamp(html.parent, store, sweep_id, {"html": html.name, "html_sha256": file_sha256(html)}, mlflow_run_id,
                 mlflow_url, settings)


def stamp_without_report(sweep_id: str, settings: Settings) -> None:
    """Leave :data:`STAMP` in the report folder of a sweep that finished without its report (``--no-report``):
    ``html`` null, the MLflow parent run it logged to; a rerun without a report can then be up to date, one that
    wants the report records again. Never raises: without a stamp the rerun records again, nothing worse."""
    home = Path(settings.home)
    try:
        store = ResultStore(home / "results.duckdb", 0.0)  # a busy file: no stamp, no wait
        folder = home_path(home, "reports", sweep_id, what="the report folder")
        folder.mkdir(parents=True, exist_ok=True)
        with store.reading():  # the sweep's row and the promotions on one connection
            run = (store.sweep(sweep_id) or {}).get("mlflow_run_id")
            _write_stamp(folder, store, sweep_id, {"html": None, "html_sha256": None}, run, None, settings)
    except Exception as e:
        log.info("sweep %s left without a stamp (its rerun records again): %s", sweep_id, _first_line(e))


def _write_stamp(folder: Path, store: ResultStore, sweep_id: str, report: dict, mlflow_run_id: str | None,
                 mlflow_url: str | None, settings: Settings) -> None:
    stamp = {"sweep_id": sweep_id, **report, "mlflow_run_id": mlflow_run_id, "mlflow_url": mlflow_url,
             "tracking_uri": stable_hash(default_tracking_uri(settings)) if mlflow_run_id else None,
             "production": store.promotions_state()}
    write_text_atomically(folder / STAMP, json.dumps(stamp, indent=1))


def read_stamp(folder: Path) -> dict | None:
    """The publication stamp in ``folder`` (:func:`stamp_published`), or None when there is none or it is damaged
    (then nothing vouches for the report: a rerun records again)."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def restamp_report(html: Path) -> None:
    """After ragbench wrote the report ``html`` of a published sweep again (``ragbench report``: the same results,
    another generation time), its stamp vouches for the new file; a report without a stamp stays without."""
    stamp = read_stamp(html.parent)
    if stamp is not None and stamp.get("html") == html.name:
        write_text_atomically(html.parent / STAMP, json.dumps({**stamp, "html_sha256": file_sha256(html)}, indent=1))


def _summarize_on_mlflow(store: ResultStore, report: SweepReport, settings: Settings, html: Path,
                         config_plots: bool) -> str:
    sweep = store.sweep(report.sweep_id) or {}
    tracker = open_tracker(settings, sweep.get("experiment") or f"ragbench/{report.sweep_name}")
    if tracker is None:
        raise ConnectionError("MLflow is unavailable")
    run_id = report.mlflow_run_id
    best = report.best
    url = run_url(default_tracking_uri(settings), tracker.client.get_run(run_id).info.experiment_id, run_id,
                  settings.mlflow_ui_url)
    tracker.client.log_text(run_id, f"# sweep `{report.sweep_id}`\n\n{leaderboard_markdown(report)}\n",
                            LEADERBOARD_ARTIFACT)
    description = fitted_description(report, html, f"{url}/artifactPath/{LEADERBOARD_ARTIFACT}" if url else None)
    tracker.log_sweep_summary(
        run_id, best_config_id=best, best_name=report.label_of(best), best_label=report.label_of(best),
        best_metrics=store.config_means(report.sweep_id, best),
        tied_with_best=[report.label_of(c) for c in report.tied_with_best], description=description,
        primary=report.primary)
    _log_costs(tracker, report)
    children = annotate_children(tracker, store, report)
    if config_plots:
        _plot_configs(tracker, report, children, store.path.parent / "cache")
    log.info("MLflow: sweep %s summarized on run %s", report.sweep_id, url or run_id)
    return url


def _log_costs(tracker, report: SweepReport) -> None:
    """On the parent run: the cost table with the Pareto front (``report/pareto.json``, an MLflow table), the
    front and the cheapest config tied with the best as tags (``ragbench.pareto_front``,
    ``ragbench.cheapest_tied_with_best``)."""
    costs = report.costs
    if costs is None or costs.is_empty():
        return
    run_id = report.mlflow_run_id
    tracker.client.log_table(run_id, data=costs.to_pandas(), artifact_file="report/pareto.json")
    front = costs.filter(pl.col("on_front"))["label"].to_list()
    cheapest = costs.filter(pl.col("cheapest_tied"))["label"].to_list()
    tracker.client.set_tag(run_id, "ragbench.pareto_front", "; ".join(front)[:5000] or "none")
    tracker.client.set_tag(run_id, "ragbench.cheapest_tied_with_best", cheapest[0] if cheapest else "none")


def _plot_configs(tracker, report: SweepReport, children: dict[str, str], cache_root: Path | None = None) -> None:
    """``plots/config.png`` on every finished config's child run of this sweep (``children``: config id -> run):
    its recall@k and per-class primary measure against the best config's; a plot the PlotCache under
    ``cache_root`` holds for the same data is copied, not drawn."""
    curves, per_class = report.recall_curves, report.per_class

    def curve(cid: str) -> list[tuple[int, float]]:
        return list(curves.filter(pl.col("config_id") == cid).select("k", "recall").iter_rows())

    def classes(cid: str) -> dict[str, float]:
        return dict(per_class.filter(pl.col("config_id") == cid).select("query_class", "mean").iter_rows())

    best = report.best
    best_curve, best_classes = curve(best), classes(best)
    finished = report.configs.filter(pl.col("status") == "finished")["config_id"].to_list()
    with tempfile.TemporaryDirectory() as tmp:
        for cid, child in ((c, children[c]) for c in finished if c in children):
            path = cached_plot(cache_root, Path(tmp) / cid / "config.png", config_plot, curve=curve(cid),
                               best_curve=best_curve if cid != best else None, classes=classes(cid),
                               best_classes=best_classes if cid != best else None, title=report.label_of(cid),
                               measure=report.primary)
            tracker.client.log_artifact(child, str(path), artifact_path="plots")


#: MLflow's longest tag value (characters): the parent run's description (``mlflow.note.content``) stays under it
DESCRIPTION_LIMIT = 8000
#: the full leaderboard, an artifact of the parent run (the description holds its best rows)
LEADERBOARD_ARTIFACT = "report/leaderboard.md"


def fitted_description(report: SweepReport, html: Path | str, link: str | None) -> str:
    """The parent run's description, shorter than :data:`DESCRIPTION_LIMIT` characters (MLflow cuts a longer one
    and warns): :func:`~ragbench.reporting.render_markdown.sweep_description` with the best 20 rows, else 10, 5,
    3 or 1, and under its title a line pointing to the full leaderboard (:data:`LEADERBOARD_ARTIFACT`, at
    ``link`` when the UI's address is known); as a last resort cut at a line."""
    where = f"[{LEADERBOARD_ARTIFACT}]({link})" if link else f"`{LEADERBOARD_ARTIFACT}`"
    note = f"Full leaderboard: {where} (artifacts of this run)."
    text = ""
    for limit in (20, 10, 5, 3, 1):
        head, _, rest = sweep_description(report, html, limit=limit).partition("\n")
        text = f"{head}\n\n{note}\n{rest}"
        if len(text) < DESCRIPTION_LIMIT:
            return text
    tail = f"\n\n… cut at MLflow's {DESCRIPTION_LIMIT:,} characters. {note}"
    return text[:DESCRIPTION_LIMIT - len(tail) - 1].rsplit("\n", 1)[0] + tail


def _paired_difference(values: pl.DataFrame, production: pl.DataFrame) -> tuple[float, int]:
    """``(mean of config − production, n)`` over the queries both scored (``query_id, value``; NaN = unlabelled)."""
    both = (values.join(production, on="query_id", suffix="_prod")
            .filter(pl.col("value").is_not_nan() & pl.col("value_prod").is_not_nan()))
    if both.is_empty():
        return math.nan, 0
    return query_mean(both["value"] - both["value_prod"]), both.height


def annotate_children(tracker, store: ResultStore, report: SweepReport) -> dict[str, str]:
    """Put each config's place in the sweep on its child run (one ``log_batch`` per run) and return
    ``config_id -> run id`` of the sweep's children.

    Metrics: ``rank``, ``<primary>_ci_low``/``<primary>_ci_high`` (the report's 95 % bootstrap CI),
    ``p_vs_best`` (Holm-adjusted, the report's test), ``tied_with_best`` and ``worse_than_best`` (1/0),
    ``wins_vs_best``/``ties_vs_best``/``losses_vs_best`` and, when a promotion is live on the sweep's dataset,
    ``<primary>_vs_production`` (mean of ``config − production`` over the queries both scored, production's values
    as the report's "Against production" reads them) with ``n_vs_production``. Tags (rounded as every table):
    ``ragbench.rank``, ``ragbench.status``, ``ragbench.mark`` (★ ≈ ▼), ``ragbench.tied_with_best``,
    ``ragbench.<primary>`` (``"★ 0.7123 [0.650, 0.770]"``) and ``ragbench.vs_production``."""
    from mlflow.entities import Metric, RunTag

    children = {cid: r.info.run_id for cid, r in sweep_children(tracker, report.sweep_id).items()}
    p, vp = report.primary, report.vs_production
    production = (store.measure_values(vp.values_from, vp.production.config_id, p) if vp is not None else None)
    ts = int(time.time() * 1000)
    for row in report.board.dicts():
        run = children.get(row["config_id"])
        if run is None:
            continue
        tags = {"ragbench.rank": str(row["rank"]) if row["rank"] is not None else "none",
                "ragbench.status": row["status"], "ragbench.primary": p}
        metrics: dict[str, float | None] = {}
        if row["rank"] is not None and row.get(p) is not None:
            metrics = {"rank": row["rank"], f"{p}_ci_low": row[f"{p}_ci_low"], f"{p}_ci_high": row[f"{p}_ci_high"],
                       "p_vs_best": row["p_vs_best"], "tied_with_best": float(bool(row["tied_with_best"])),
                       "worse_than_best": float(bool(row["worse_than_best"])), "wins_vs_best": row["wins"],
                       "ties_vs_best": row["ties"], "losses_vs_best": row["losses"]}
            tags.update({"ragbench.mark": row[f"{p}_mark"], f"ragbench.{p}": value_cell(p, ci=True)(row),
                         "ragbench.tied_with_best": str(bool(row["tied_with_best"])).lower()})
            if production is not None:
                diff, n = _paired_difference(store.measure_values(report.sweep_id, row["config_id"], p), production)
                metrics.update({f"{p}_vs_production": diff, "n_vs_production": n})
                tags["ragbench.vs_production"] = (f"{diff:+.4f} {p} over {n} queries vs production "
                                                  f"{vp.production.label}" if n else "no shared queries")
        tracker.client.log_batch(
            run, metrics=[Metric(k, float(v), ts, 0) for k, v in metrics.items() if v is not None and v == v],
            tags=[RunTag(k, v[:5000]) for k, v in tags.items()])
    return children
