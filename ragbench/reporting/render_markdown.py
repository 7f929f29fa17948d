"""The leaderboard model as markdown: the report (``ragbench report --format markdown``, the Prefect leaderboard
artifact, the MLflow parent run's description) and the leaderboard a sweep prints when it ends.

Every table cell goes through :func:`ragbench.reporting.tables.markdown_cell`: config labels hold ``|``
(``recursive 128 tok | all-MiniLM-L6-v2 | BM25``) and must not split a cell.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from ragbench.reporting.cells import display_rows, sweep_columns, value_cell
from ragbench.reporting.columns import LEADERBOARD_MEASURES
from ragbench.reporting.decision import decision_lines
from ragbench.reporting.headline import Headline, build_headline
from ragbench.reporting.leaderboard import sweep_leaderboard
from ragbench.reporting.model import SweepReport
from ragbench.reporting.screening import SCREENING_COLUMNS, screening_rows, screening_sentence
from ragbench.reporting.verdicts import legend
from ragbench.reporting.pareto import cost_summary, human_bytes, milliseconds
from ragbench.reporting.since import change_columns, change_rows, since_lines
from ragbench.reporting.tables import Column, markdown_cell, number, to_markdown
from ragbench.results.outcomes import SweepResult


def leaderboard_markdown(report: SweepReport, limit: int | None = None) -> str:
    """The leaderboard as markdown: the headline, the table (primary with its CI, p and W/T/L against the best,
    the other measures), the configs tied with the best, the legend, the cost table, then the sections since the
    previous sweep and against production (:func:`sections_markdown`); ``limit`` keeps the best rows only."""
    rows = display_rows(report.board)
    for r in rows:
        r["primary__full"] = value_cell(report.primary, ci=True)(r) if r.get(report.primary) is not None else ""
    shown = rows if limit is None else rows[:limit]
    p = report.primary
    cols = [Column("#", "rank", number(0), numeric=True), Column("chunker", "chunker"), Column("model", "model"),
            Column("retriever", "retriever"), Column(f"{p} [95 % CI]", "primary__full", numeric=True),
            Column("p vs best", "p_vs_best", number(4), numeric=True), Column("W/T/L vs best", "wtl", numeric=True)]
    cols += [Column(m, f"{m}__cell", numeric=True) for m in report.measures if m != p]
    tied = [report.label_of(c) for c in report.tied_with_best]
    parts = [f"> **Warning:** {report.unfinished}\n"] if report.unfinished else []
    parts += [*headline_markdown(build_headline(report)), ""]
    parts += [f"> **Warning:** {w}\n" for w in report.dataset_warnings]
    if report.winner_heldout:
        parts += [report.winner_heldout.sentence(), ""]
    parts += [line for text in decision_lines(report.questions_needed, report.holdout_repeats, limit) for line in
              (text, "")]
    parts += [*report.pooled.lines(limit), ""] if report.pooled else []
    parts += ["```", *report.assessor.lines(), "```", ""] if report.assessor else []
    parts.append(to_markdown(cols, shown))
    if limit is not None and len(rows) > limit:
        parts.append(f"\n… {len(rows) - limit} more configs in the HTML report.")
    parts += ["", f"**Tied with the best** ({len(tied)}): " + ("; ".join(tied) if tied else "none"), "",
              f"_{legend(report)}_"]
    if report.costs is not None:
        parts += ["", *cost_markdown(report.costs, report.primary)]
    parts += ["", *screening_markdown(report)]
    parts += ["", *sections_markdown(report, limit)]
    return "\n".join(parts)


def screening_markdown(report: SweepReport) -> list[str]:
    """The "Screening" section of a screened sweep (:mod:`ragbench.reporting.screening`); nothing without one."""
    rows = screening_rows(report.screening)
    if not rows:
        return []
    return ["### Screening", "", screening_sentence(report.screening), "", to_markdown(SCREENING_COLUMNS, rows)]


def headline_markdown(headline: Headline) -> list[str]:
    """The verdict box as a markdown quote: the verdict in bold, then one item per line (tied set, margin, since
    the previous sweep, against production, next), each kept on its line."""
    out = [f"> **{headline.verdict}**", ">"]
    out += [f"> - **{what}:** {text}" for what, text in headline.items()[1:]]
    return out


def sections_markdown(report: SweepReport, limit: int | None = None) -> list[str]:
    """The sections "Since the previous sweep" (sentences and the shared configs' changes, the first ``limit``
    when given) and "Against production", as markdown lines."""
    out = ["### Since the previous sweep", ""]
    s = report.since_previous
    if s is None:
        out.append(f"No previous sweep to compare with: {report.since_note}.")
    else:
        out += [line for text in since_lines(s) for line in (text, "")]
        rows = change_rows(s)
        if rows:
            out.append(to_markdown(change_columns(report.primary), rows if limit is None else rows[:limit]))
        if limit is not None and len(rows) > limit:
            out.append(f"\n… {len(rows) - limit} more configs in the HTML report.")
    return out + ["", "### Against production", "",
                  (report.production_note or "not compared") + ("" if report.vs_production else ".")]


def cost_markdown(table: pl.DataFrame | None, primary: str) -> list[str]:
    """The cost table as markdown lines (front marked ◆), after :func:`~ragbench.reporting.pareto.cost_summary`."""
    if table is None or table.is_empty():
        return []
    out = [*(f"**{line}**" if i else line for i, line in enumerate(cost_summary(table, primary))), "",
           f"| config | {markdown_cell(primary)} | p50 ms | p95 ms | index | vectors | embed s | front |",
           "|---|---|---|---|---|---|---|---|"]
    for r in table.iter_rows(named=True):
        label = markdown_cell(r["label"] + (" (cheapest tied)" if r["cheapest_tied"] else ""))
        cells = [label, f"{r['primary']:.4f}", milliseconds(r["latency_p50_ms"]), milliseconds(r["latency_p95_ms"]),
                 human_bytes(r["index_bytes"]), human_bytes(r["vector_bytes"]), milliseconds(r["embed_seconds"]),
                 "◆" if r["on_front"] else ""]
        out.append("| " + " | ".join(cells) + " |")
    return out


def sweep_description(report: SweepReport, html: Path | str, limit: int = 20) -> str:
    """The description of the sweep's MLflow parent run: the sweep, where its HTML report is, and the
    leaderboard (:func:`leaderboard_markdown`, the best ``limit`` rows)."""
    return "\n".join([
        f"# sweep `{report.sweep_id}`", "",
        f"Dataset {report.dataset_name} (fingerprint `{report.dataset_fingerprint}`), {report.configs.height} "
        f"configs. Report: `report/report.html` (artifacts of this run), also at `{html}`.", "",
        leaderboard_markdown(report, limit=limit)])


def artifact_markdown(report: SweepReport, links: list[str]) -> str:
    """The Prefect leaderboard artifact: the leaderboard and the links (markdown list items) under it."""
    return f"{leaderboard_markdown(report)}\n\n{chr(10).join(links)}"


def sweep_markdown(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> str:
    """The leaderboard a sweep prints when it ends, as markdown (every column), then the winner's held-out check."""
    board = sweep_leaderboard(result, measures)
    text = to_markdown(sweep_columns(board), board.dicts())
    return text + (f"\n\n{board.winner.sentence()}" if board.winner else "")
