"""The leaderboard of a sweep for people (a table that fits the terminal, or markdown) and for scripts (CSV, one JSON
object per config), best first by the primary measure.

Each config is shown as three columns, chunker · model · retriever, spelled out (:mod:`ragbench.config.labels`);
its stored ``name`` and id stay in the JSON and CSV.
"""

from __future__ import annotations

import math

from rich.table import Table

from ragbench.config.labels import ConfigLabels
from ragbench.data.holdout import heldout_key
from ragbench.evaluation.metrics import unreached_depth
from ragbench.generation.answering import VERDICTS
from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures, shallow_notes
from ragbench.reporting.heldout import WinnerHeldOut
from ragbench.reporting.tables import Column, fit_table, number, to_csv, to_json_lines, to_markdown
from ragbench.results.outcomes import ConfigOutcome, SweepResult

ANSWER_COLUMNS = (("EM", "answer_em"), ("F1", "answer_f1"), ("contains", "answer_contains"),
                  ("accuracy", "answer_accuracy"), ("answer∈ctx", "answer_in_context"))


def comparable(metrics, measure: str) -> float | None:
    """The config's mean of ``measure``, or None when it is a document measure at a cutoff deeper than the
    documents the config's run reached (:func:`ragbench.evaluation.metrics.unreached_depth`): not comparable."""
    return None if unreached_depth(metrics, measure) is not None else metrics.get(measure)


def ranked(outcomes: list[ConfigOutcome], primary: str) -> list[tuple[int | None, ConfigOutcome]]:
    """Outcomes best first by ``primary`` (ties by config id), each with its rank; failed configs last, rank None.
    A config whose run is too shallow for ``primary`` (:func:`comparable`) ranks after the others."""
    def key(o: ConfigOutcome):
        v = comparable(o.metrics, primary)
        v = math.nan if v is None else v
        return (o.status == "failed", -(v if v == v else -math.inf), o.config_id)

    out, rank = [], 0
    for o in sorted(outcomes, key=key):
        if o.status != "failed":
            rank += 1
        out.append((rank if o.status != "failed" else None, o))
    return out


def _measures(result: SweepResult, measures: tuple[str, ...]) -> tuple[str, ...]:
    present = {k for o in result.outcomes for k in o.metrics}
    chosen = tuple(result.show) if result.show else leaderboard_measures(present, measures)
    held = heldout_key(result.primary)  # a sweep with a held-out set: every config's held-out score beside
    held = (held,) if held in present else ()
    return (result.primary, *held, *[m for m in chosen if m != result.primary and m not in held])


def winner_heldout(result: SweepResult) -> WinnerHeldOut | None:
    """The winner (rank 1 on the tuning set) with its held-out score, when the sweep has a held-out set."""
    held = heldout_key(result.primary)
    board = [(r, o) for r, o in ranked(result.outcomes, result.primary) if r is not None]
    if not board or held not in board[0][1].metrics:
        return None
    o = board[0][1]
    return WinnerHeldOut(o.config_id, ConfigLabels.from_stored(o.spec, o.name).text, result.primary,
                         o.metrics[result.primary], o.metrics[held], len(board), o.n_queries - o.n_unlabelled)


def leaderboard_rows(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> list[dict]:
    """One dict per config, best first: ``rank, config_id, name, chunker, model, retriever, status, error,
    primary, primary_value``, the leaderboard measures, ``queries`` (labelled) and ``unlabelled``."""
    cols = _measures(result, measures)
    rows = []
    for rank, o in ranked(result.outcomes, result.primary):
        labels = ConfigLabels.from_stored(o.spec, o.name)
        m = o.metrics
        row = {"rank": rank, "config_id": o.config_id, "name": o.name, "chunker": labels.chunker,
               "model": labels.model, "retriever": labels.retriever, "status": o.status, "error": o.error,
               "primary": result.primary, "primary_value": comparable(m, result.primary),
               **{c: comparable(m, c) for c in cols},
               "queries": o.n_queries - o.n_unlabelled if o.status != "failed" else None,
               "unlabelled": o.n_unlabelled if o.status != "failed" else None}
        if "answer_accuracy" in m:
            row.update({k: m.get(k) for _, k in ANSWER_COLUMNS})
            row["oracle"] = "/".join(str(int(m.get(f"oracle_{v}", 0))) for v in VERDICTS)
        rows.append(row)
    return rows


def leaderboard_columns(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> list[Column]:
    """The columns of :func:`leaderboard_rows`: rank and the config's three parts and the primary measure always,
    then the other measures, the query counts and the answer columns (when the sweep answered)."""
    cols = [Column("#", "rank", number(0), numeric=True, required=True),
            Column("chunker", "chunker", required=True), Column("model", "model", required=True),
            Column("retriever", "retriever", required=True),
            Column(result.primary, result.primary, number(4), numeric=True, required=True, style="bold")]
    cols += [Column(m, m, number(4), numeric=True) for m in _measures(result, measures)[1:]]
    if any("answer_accuracy" in o.metrics for o in result.outcomes):  # the sweep asked an LLM
        cols += [Column(h, k, number(3), numeric=True) for h, k in ANSWER_COLUMNS]
        cols.append(Column("oracle P/Rank/Repr/Dil/Gen", "oracle"))
    cols += [Column("queries", "queries", number(0), numeric=True),
             Column("unlabelled", "unlabelled", number(0), numeric=True)]
    return cols


def leaderboard_table(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES,
                      width: int = 160) -> Table:
    """Configs best first by the primary measure in a table that fits ``width`` columns; failed configs last with
    their error."""
    rows = leaderboard_rows(result, measures)
    for r in rows:
        if r["status"] == "failed":
            r["retriever"] = f"{r['retriever']}  FAILED: {r['error'] or ''}"
    notes = [f"{result.n_failed} of {len(result.outcomes)} configs failed"] if result.n_failed else []
    notes += shallow_notes({m: {o.config_id: d for o in result.outcomes
                                if (d := unreached_depth(o.metrics, m)) is not None}
                            for m in _measures(result, measures)})
    winner = winner_heldout(result)
    notes += [winner.sentence()] if winner else []
    caption = "\n".join(notes) or None
    return fit_table(leaderboard_columns(result, measures), rows, width,
                     title=f"sweep {result.sweep_id}  ·  dataset {result.dataset_fingerprint}  ·  "
                           f"{result.seconds:.0f} s  ·  {result.vectors_computed} vectors computed",
                     caption=caption, row_styles=["red" if r["status"] == "failed" else None for r in rows])


def leaderboard_text(result: SweepResult, fmt: str, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> str:
    """The leaderboard as ``markdown``, ``csv`` or ``json`` (one object per line, see :func:`json_lines`)."""
    if fmt == "json":
        return "\n".join(json_lines(result))
    rows, cols = leaderboard_rows(result, measures), leaderboard_columns(result, measures)
    cols = [Column("config_id", "config_id"), *cols] if fmt == "csv" else cols
    if fmt == "csv":
        return to_csv(cols, rows)
    winner = winner_heldout(result)
    return to_markdown(cols, rows) + (f"\n\n{winner.sentence()}" if winner else "")


def json_lines(result: SweepResult) -> list[str]:
    """One JSON object per config, best first by the primary measure: ``rank`` (null for a failed config),
    ``primary`` (``{"measure": key, "value": mean}``), ``config_id, name, chunker, model, retriever, spec, status,
    error, metrics`` (every measure key: mean), ``n_queries, n_unlabelled, sweep_id, dataset_fingerprint``."""
    rows = []
    for rank, o in ranked(result.outcomes, result.primary):
        labels = ConfigLabels.from_stored(o.spec, o.name)
        rows.append({"rank": rank, "primary": {"measure": result.primary, "value": o.metrics.get(result.primary)},
                     "config_id": o.config_id, "name": o.name, "chunker": labels.chunker, "model": labels.model,
                     "retriever": labels.retriever, "spec": o.spec, "status": o.status, "error": o.error,
                     "sweep_id": result.sweep_id, "dataset_fingerprint": result.dataset_fingerprint,
                     "metrics": dict(o.metrics), "n_queries": o.n_queries, "n_unlabelled": o.n_unlabelled})
    return to_json_lines(rows)
