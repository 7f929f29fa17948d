"""Display cells and columns of the leaderboard model, shared by the terminal, markdown and CSV renderers."""

from __future__ import annotations

import math

from ragbench.reporting.label_coverage import JUDGED_CELL, coverage_header
from ragbench.reporting.leaderboard import ANSWER_COLUMNS, Leaderboard
from ragbench.reporting.tables import Column, number
from ragbench.results.outcomes import NOT_RUN_STATUSES


def fmt(v: float | None, digits: int = 4) -> str:
    """A number with ``digits`` decimals; ``–`` for a missing value (None or NaN)."""
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def value_cell(m: str, ci: bool):
    """A formatter of a report row's measure ``m``: ``"★ 0.7500"``, with ``" [0.700, 0.800]"`` when ``ci``."""
    def fmt_row(row: dict) -> str:
        if row.get(m) is None:
            return "–" if row.get("status") == "finished" else ""
        text = f"{row[f'{m}_mark']} {fmt(row[m])}"
        return text + (f" [{fmt(row[f'{m}_ci_low'], 3)}, {fmt(row[f'{m}_ci_high'], 3)}]" if ci else "")
    return fmt_row


def display_rows(board: Leaderboard) -> list[dict]:
    """A report's rows (:meth:`Leaderboard.dicts`) with the combined display cells the table and markdown show:
    ``<m>__cell`` (mark and mean), ``primary__ci``, ``wtl``; an unranked config's retriever cell says why."""
    rows = board.dicts()
    p = board.primary
    for r in rows:
        for m in board.measures:
            r[f"{m}__cell"] = value_cell(m, ci=False)(r)
        r["primary__ci"] = (f"{fmt(r.get(f'{p}_ci_low'), 3)}–{fmt(r.get(f'{p}_ci_high'), 3)}"
                            if r.get(p) is not None else "")
        r["wtl"] = ("—" if r.get(f"{p}_mark") == "★" else
                    f"{r['wins']}/{r['ties']}/{r['losses']}" if r.get("wins") is not None else "")
        say_why_unranked(r)
    return rows


def say_why_unranked(row: dict) -> None:
    """A row of a config without results (failed, not run, not compared) gets why after its retriever cell:
    ``dense exact  NOT RUN: over budget (...)``; a finished row is left as it is."""
    if row["status"] != "finished":
        what = ("NOT COMPARED" if row["status"] == "not compared" else
                "NOT RUN" if row["status"] in NOT_RUN_STATUSES else "FAILED")
        row["retriever"] = f"{row['retriever']}  {what}: {status_note(row['status'], row['error'])}"


def status_note(status: str, error: str | None) -> str:
    """What a config without results says beside its label: its error, a config not run (screened out, over
    budget) without the leading ``not run: `` (the cell already says NOT RUN; the rest is why)."""
    error = error or ""
    return error.removeprefix("not run: ") if status in NOT_RUN_STATUSES else error


def judged_columns(board: Leaderboard) -> list[Column]:
    """The label-coverage column (``judged@k`` at the primary's cutoff) when any row has it: beside the primary,
    two decimals, never marked (:mod:`ragbench.reporting.label_coverage`)."""
    header = coverage_header(board.primary)
    if header is None or not any(r.extra.get(JUDGED_CELL) is not None for r in board.rows):
        return []
    return [Column(header, JUDGED_CELL, number(2), numeric=True)]


def report_columns(board: Leaderboard) -> list[Column]:
    """Display columns of a report's leaderboard: rank, chunker, model, retriever, the primary measure (mark and
    mean) and its CI always; then p and W/T/L against the best, the other measures, ms/query and queries."""
    p = board.primary
    cols = [Column("#", "rank", number(0), numeric=True, required=True),
            Column("chunker", "chunker", required=True), Column("model", "model", required=True),
            Column("retriever", "retriever", required=True),
            Column(p, f"{p}__cell", numeric=True, required=True, style="bold"),
            Column("95 % CI", "primary__ci", numeric=True, required=True), *judged_columns(board),
            Column("p vs best", "p_vs_best", number(4), numeric=True),
            Column("W/T/L vs best", "wtl", numeric=True)]
    cols += [Column(m, f"{m}__cell", numeric=True) for m in board.measures if m != p]
    cols += [latency_column(board), Column("queries", "queries", number(0), numeric=True)]
    return cols


def latency_column(board: Leaderboard) -> Column:
    """The leaderboard's time column, one definition with the cost table: ``p50 ms/query`` (the median serving
    latency of one query alone, ``latency_p50_ms``) when the sweep measured it, else ``batch ms/query`` (the run's
    wall time over all queries / queries: a sweep without cost measures)."""
    if any("latency_p50_ms" in r.extra for r in board.rows):
        return Column("p50 ms/query", "latency_p50_ms", number(1), numeric=True)
    return Column("batch ms/query", "ms_per_query", number(1), numeric=True)


def sweep_columns(board: Leaderboard) -> list[Column]:
    """The columns of a sweep's leaderboard: rank and the config's three parts and the primary measure always,
    then the other measures, the answer columns (when the sweep answered) and the query counts."""
    cols = [Column("#", "rank", number(0), numeric=True, required=True),
            Column("chunker", "chunker", required=True), Column("model", "model", required=True),
            Column("retriever", "retriever", required=True),
            Column(board.primary, board.primary, number(4), numeric=True, required=True, style="bold"),
            *judged_columns(board)]
    cols += [Column(m, m, number(4), numeric=True) for m in board.measures[1:]]
    if board.answers:  # the sweep asked an LLM
        cols += [Column(h, k, number(3), numeric=True) for h, k in ANSWER_COLUMNS]
        cols.append(Column("oracle P/Rank/Repr/Dil/Gen", "oracle"))
    cols += [Column("queries", "queries", number(0), numeric=True),
             Column("unlabelled", "unlabelled", number(0), numeric=True)]
    return cols
