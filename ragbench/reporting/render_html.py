"""The report as one self-contained HTML page: Jinja2 templates (``templates/report.html.j2``, autoescaped) with the
static stylesheet ``templates/report.css`` inlined and the plots embedded as base64 PNG data URIs.

This module turns the :class:`~ragbench.reporting.model.SweepReport` into plain values (numbers already formatted);
the template lays them out and escapes every text.
"""

from __future__ import annotations

import base64
import math
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import polars as pl

from ragbench.config.labels import NO_MODEL, ConfigLabels
from ragbench.reporting.cells import fmt, latency_column, status_note
from ragbench.reporting.headline import build_headline
from ragbench.reporting.label_coverage import JUDGED_CELL
from ragbench.reporting.screening import screening_rows, screening_sentence
from ragbench.reporting.model import SweepReport
from ragbench.reporting.verdicts import legend, resolution, vs_best_rows
from ragbench.reporting.pareto import cost_summary, human_bytes, milliseconds
from ragbench.reporting.since import change_rows, since_lines
from ragbench.results.outcomes import NOT_RUN_STATUSES

TEMPLATES = Path(__file__).parent / "templates"
#: most columns one table gets; a wider table is split (chunk statistics, per-class results)
MAX_TABLE_COLUMNS = 8
PLOT_TITLES = {"leaderboard": "{primary} with confidence intervals", "recall_curves": "recall@k curves",
               "per_class": "{primary} per query class"}


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=False, undefined=jinja2.StrictUndefined)


def render_html(report: SweepReport, plots: dict[str, Path], links: list[tuple[str, str]] | None = None) -> str:
    """The report as one self-contained HTML document (no external resource but ``links``), every table within
    1,400 px: the headline (:func:`~ragbench.reporting.headline.build_headline`) with ``links`` (``(text,
    href)``: :func:`report_links`), the legend, the leaderboard, each config against the best, plots, per-class
    results, cost, chunk statistics, the screen of a screened sweep, since the previous sweep, against production,
    and the pairs behind a ``<details>``."""
    env = _environment()
    headline = build_headline(report)
    return env.get_template("report.html.j2").render(
        headline=headline, headline_items=headline.items()[1:], links=links or [],
        latency_header=latency_column(report.board).header, judged_header=_judged_header(report),
        r=report, css=(TEMPLATES / "report.css").read_text(encoding="utf-8"),
        generated=f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}", legend=legend(report),
        heldout=_heldout(report), leaderboard=_leaderboard(report), vs_best=_vs_best(report),
        plots=[(t := PLOT_TITLES.get(k, k).format(primary=report.primary), t, _data_uri(p)) for k, p in plots.items()],
        per_class=_per_class(report), costs=_costs(report), chunk_stats=_chunk_stats(report), pairs=_pairs(report),
        since=_since(report), production=_production(report), screening=screening_rows(report.screening),
        screening_sentence=screening_sentence(report.screening))


def _since(report: SweepReport) -> dict:
    """The section "since the previous sweep": its sentences and the shared configs' rows, or the note."""
    s = report.since_previous
    if s is None:
        return {"section": None, "note": report.since_note}
    return {"section": s, "lines": since_lines(s),
            "rows": [{**r, "then": fmt(r["then"]), "now": fmt(r["now"]), "p": fmt(r["p"])} for r in change_rows(s)]}


def _production(report: SweepReport) -> dict:
    """The section "against production": the pair's numbers formatted, or the note."""
    v = report.vs_production
    if v is None:
        return {"section": None, "note": report.production_note or "not compared"}
    return {"section": v, "best_mean": fmt(v.change.mean_a), "prod_mean": fmt(v.change.mean_b),
            "diff": f"{v.change.mean_diff:+.4f}", "p": fmt(v.change.p_value)}


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _config(labels: ConfigLabels, config_id: str, name: str | None) -> dict:
    """Chunker, model and retriever cells; the config's label (its one name) and id show on hover."""
    model = "– (BM25 only)" if labels.model == NO_MODEL else labels.model
    return {"title": f"{labels.text or name} ({config_id})", "parts": (labels.chunker, model, labels.retriever)}


def _heldout(report: SweepReport) -> dict | None:
    w = report.winner_heldout
    if w is None:
        return None
    return {"w": w, "tuning": fmt(w.tuning), "heldout": fmt(w.heldout), "sentence": w.sentence(),
            "drop": "–" if math.isnan(w.drop) else f"{w.drop:+.4f}"}


def _judged_header(report: SweepReport) -> str | None:
    """The label-coverage column's header (``judged@10``), None when no config has the measure."""
    return report.label_coverage.header if report.label_coverage is not None else None


def _leaderboard(report: SweepReport) -> list[dict]:
    rows, p50 = [], latency_column(report.board).key == "latency_p50_ms"
    for row in report.board.rows:
        r = {"config": _config(row.labels, row.config_id, row.name), "rank": row.rank,
             "error": status_note(row.status, row.error), "not_run": row.status in NOT_RUN_STATUSES}
        if row.rank is not None:
            mark = row.judged[report.primary].mark if report.primary in row.judged else ""
            v = row.vs_best
            r.update(cls="best" if mark == "★" else ("tied" if v.tied_with_best else ""),
                     cells=[(j.mark, fmt(j.mean), fmt(j.ci_low, 3), fmt(j.ci_high, 3)) if (j := row.judged.get(m))
                            else None for m in report.measures],
                     wtl="—" if mark == "★" else f"{v.wins}/{v.ties}/{v.losses}", p=fmt(v.p_vs_best),
                     ms=fmt(row.extra["latency_p50_ms"] if p50 else row.counts[0], 1), queries=row.counts[1],
                     unlabelled=row.counts[2] or 0, judged=fmt(row.extra.get(JUDGED_CELL), 2))
        rows.append(r)
    return rows


def _vs_best(report: SweepReport) -> list[dict]:
    return [{**r, "config": _config(report.labels_of(r["config_id"]), r["config_id"], r["name"]),
             "mean": fmt(r["mean"]), "diff": f"{r['mean_diff']:+.4f}", "p": fmt(r["p_vs_best"]),
             "verdict": "▼ significantly worse" if r["significant"] else "≈ not distinguishable"}
            for r in vs_best_rows(report)]


def _pairs(report: SweepReport) -> dict:
    comp = report.comparisons[report.primary]
    rows = []
    for p in sorted(comp.pairs, key=lambda p: -abs(p.mean_diff)):
        if p.mean_diff < 0:
            p = comp.pair(p.config_b, p.config_a)
        rows.append({"a": report.label_of(p.config_a), "b": report.label_of(p.config_b),
                     "diff": f"{p.mean_diff:+.4f}", "p": fmt(p.p_value), "p_adj": fmt(p.p_adjusted),
                     "significant": "yes" if p.significant else "no", "wtl": f"{p.wins}/{p.ties}/{p.losses}"})
    n = len(comp.configs)
    if comp.pairs_compared == "vs_best":  # the family tested: each config against the best, not every pair
        heading = "Each config against the best"
        summary = (f"The {len(comp.pairs)} pairs with the best on {report.primary} (every one of the "
                   f"{n * (n - 1) // 2} pairs: `ragbench compare {report.sweep_id} --all`)")
    else:
        heading, summary = "Every pair", f"All {len(comp.pairs)} pairs on {report.primary}"
    return {"n": len(comp.pairs), "rows": rows, "best": report.label_of(comp.best), "test": comp.test,
            "resolution": resolution(comp), "heading": heading, "summary": summary}


def report_links(report: SweepReport, out_dir: Path, reports_root: Path | None,
                 mlflow_ui_url: str | None) -> list[tuple[str, str]]:
    """The report's links, ``(text, href)``: the sweep's MLflow parent run and the best config's run under
    ``mlflow_ui_url`` (MLflow's ``#/runs/<id>`` page; no link without a UI URL rather than a dead one), and the
    reports of the previous sweep and of the sweep production was promoted from, when they exist under
    ``reports_root`` (``<home>/reports``), relative to ``out_dir``."""
    import os

    from ragbench.core.paths import slug

    out: list[tuple[str, str]] = []
    if mlflow_ui_url:
        base = mlflow_ui_url.rstrip("/")
        if report.mlflow_run_id:
            out.append((f"MLflow: sweep {report.sweep_id}", f"{base}/#/runs/{report.mlflow_run_id}"))
        best = report.configs.filter(pl.col("config_id") == report.best)
        if best.height and best["mlflow_run_id"][0]:
            out.append(("MLflow: the best config's run", f"{base}/#/runs/{best['mlflow_run_id'][0]}"))
    sweeps = []
    if report.since_previous is not None:
        sweeps.append((f"previous report ({report.since_previous.previous_id})", report.since_previous.previous_id))
    if report.vs_production is not None and report.vs_production.promoted_from != report.sweep_id:
        v = report.vs_production
        sweeps.append((f"production's report ({v.promoted_from})", v.promoted_from))
    for text, sid in sweeps:
        path = Path(reports_root or "") / slug(sid) / "report.html"
        if reports_root is not None and path.is_file():
            out.append((text, Path(os.path.relpath(path, Path(out_dir).resolve())).as_posix()))
    return out


def _per_class(report: SweepReport) -> list[dict]:
    """Tables of at most :data:`MAX_TABLE_COLUMNS` query classes: per config, each class's mean (the best bold)."""
    if not report.per_class.height:
        return []
    classes = sorted(report.per_class["query_class"].unique().to_list())
    best_of = dict(report.per_class.group_by("query_class").agg(pl.col("mean").max()).iter_rows())
    by = {(r["config_id"], r["query_class"]): r for r in report.per_class.iter_rows(named=True)}
    tables = []
    for chunk in split(classes, MAX_TABLE_COLUMNS):
        rows = []
        for cid in report.leaderboard()["config_id"].to_list():
            cells = [(f"{r['mean']:.3f}", r["mean"] == best_of.get(c), r["n"]) if (r := by.get((cid, c))) else None
                     for c in chunk]
            rows.append((report.label_of(cid), cells))
        tables.append({"classes": chunk, "rows": rows})
    return tables


def _costs(report: SweepReport) -> dict | None:
    table = report.costs
    if table is None or table.is_empty():
        return None
    rows = [{"label": r["label"], "cls": "best" if r["cheapest_tied"] else ("tied" if r["on_front"] else ""),
             "cheapest": r["cheapest_tied"], "primary": f"{r['primary']:.4f}",
             "cells": (milliseconds(r["latency_p50_ms"]), milliseconds(r["latency_p95_ms"]),
                       human_bytes(r["index_bytes"]), human_bytes(r["vector_bytes"]), human_bytes(r["memory_bytes"]),
                       milliseconds(r["embed_seconds"])), "front": "◆" if r["on_front"] else ""}
            for r in table.iter_rows(named=True)]
    return {"summary": cost_summary(table, report.primary), "rows": rows}


def split(items: list, most: int) -> list[list]:
    """``items`` in as few even parts as keep each within ``most`` (9 -> 5 + 4, not 8 + 1)."""
    if not items:
        return []
    n = math.ceil(len(items) / most)
    size = math.ceil(len(items) / n)
    return [items[i:i + size] for i in range(0, len(items), size)]


def _num_format(values: list[float | None]):
    """A formatter for one column: counts as integers (``213``, ``78,519``) when every value is whole, else
    shares and ratios with three decimals and larger values with one."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    whole = all(float(v).is_integer() for v in present)

    def fmt_value(v: float | None) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if whole:
            return f"{int(v):,}"
        return f"{v:.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return fmt_value


def _known(v: float | None) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def chunk_stat_groups(report: SweepReport) -> list[tuple[str, dict[str, float | None]]]:
    """Chunk statistics, one row per chunker and distinct values (token counts differ by the model's tokenizer):
    ``(label, {stat: value})`` in leaderboard order. A config whose known statistics agree with a row already
    listed joins that row (a BM25 config has no embedding window; NaN and missing values are unknown), so no
    chunker is listed twice with the same numbers."""
    vals: dict[str, dict[str, float | None]] = {}
    for cid, stat, v in report.chunk_stats.select("config_id", "stat", "value").iter_rows():
        vals.setdefault(cid, {})[stat] = _known(v)
    stats = list(dict.fromkeys(report.chunk_stats["stat"].to_list()))
    board = report.leaderboard()["config_id"].to_list()
    order = [c for c in board if c in vals] + [c for c in vals if c not in set(board)]
    groups: list[tuple[str, dict[str, float | None], list[str]]] = []  # chunker, values, configs
    for cid in order:
        chunker, mine = report.labels_of(cid).chunker, {s: vals[cid].get(s) for s in stats}
        for g_chunker, values, cids in groups:
            if g_chunker == chunker and all(values[s] == v or values[s] is None or v is None
                                            for s, v in mine.items()):
                values.update({s: v for s, v in mine.items() if values[s] is None})
                cids.append(cid)
                break
        else:
            groups.append((chunker, mine, [cid]))
    variants: dict[str, int] = {}
    for chunker, _, _ in groups:
        variants[chunker] = variants.get(chunker, 0) + 1
    out = []
    for chunker, values, cids in groups:
        label = chunker
        if variants[chunker] > 1:  # token counts differ by the model's tokenizer
            models = dict.fromkeys("BM25" if report.labels_of(c).model == NO_MODEL else report.labels_of(c).model
                                   for c in cids)
            label += f" · tokens of {', '.join(models)}"
        out.append((label, values))
    return out


def _chunk_stats(report: SweepReport) -> list[dict] | None:
    """The chunk-statistics tables: size statistics, then boundary shares (``chunks_*``, ``spans_*``), each split
    into tables of at most :data:`MAX_TABLE_COLUMNS` statistics; None when the sweep stored none."""
    if report.chunk_stats is None:
        return None
    rows = chunk_stat_groups(report)
    stats = list(dict.fromkeys(report.chunk_stats["stat"].to_list()))
    boundary = [s for s in stats if s.startswith(("chunks_", "spans_"))]
    size = [s for s in stats if s not in boundary]
    formats = {s: _num_format([v.get(s) for _, v in rows]) for s in stats}
    return [{"headers": [s.replace("_", " ") for s in cols],
             "rows": [(label, [formats[s](v.get(s)) for s in cols]) for label, v in rows]}
            for cols in (t for g in (size, boundary) for t in split(g, MAX_TABLE_COLUMNS))]
