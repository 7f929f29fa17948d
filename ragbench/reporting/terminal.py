"""Leaderboards for people (a rich table) and for scripts (one JSON object per config)."""

from __future__ import annotations

import json
import math

from rich.markup import escape
from rich.table import Table

from ragbench.generation.answering import VERDICTS
from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures
from ragbench.results.outcomes import SweepResult


def leaderboard_table(result: SweepResult, measures: tuple[str, ...] = LEADERBOARD_MEASURES) -> Table:
    """Configs sorted by the primary measure, best first; failed configs last with their error."""
    answered = any("answer_accuracy" in o.metrics for o in result.outcomes)
    measures = leaderboard_measures({k for o in result.outcomes for k in o.metrics}, measures)
    if result.show:
        measures = tuple(result.show)
    elif answered:  # room for the answer columns
        measures = measures[:2]
    cols = [result.primary] + [m for m in measures if m != result.primary]
    table = Table(title=f"sweep {result.sweep_id}  ·  dataset {result.dataset_fingerprint}  ·  "
                        f"{result.seconds:.0f} s  ·  {result.vectors_computed} vectors computed")
    table.add_column("#", justify="right")
    table.add_column("config")
    for c in cols:
        table.add_column(c, justify="right", style="bold" if c == result.primary else None)
    table.add_column("queries", justify="right")
    table.add_column("unlabelled", justify="right")
    if answered:
        for c in ("EM", "F1", "contains", "accuracy", "answer∈ctx", "oracle P/Rank/Repr/Dil/Gen"):
            table.add_column(c, justify="right")

    def key(o):
        v = o.metrics.get(result.primary, math.nan)
        return (o.status != "finished", -(v if v == v else -1.0))

    for i, o in enumerate(sorted(result.outcomes, key=key), 1):
        if o.status == "failed":
            table.add_row(str(i), f"[red]{escape(o.name)}[/red]", f"[red]FAILED: {escape(o.error or '')}[/red]",
                          *[""] * (len(cols) + 1))
            continue
        vals = [o.metrics.get(c) for c in cols]
        row = [str(i), escape(o.name), *[_fmt(v) for v in vals], str(o.n_queries - o.n_unlabelled),
               str(o.n_unlabelled)]
        if answered:
            m = o.metrics
            verdicts = "/".join(str(int(m.get(f"oracle_{v}", 0))) for v in VERDICTS)
            row += [_fmt(m.get(k), 3) for k in ("answer_em", "answer_f1", "answer_contains", "answer_accuracy",
                                                "answer_in_context")] + [verdicts]
        table.add_row(*row)
    if result.n_failed:
        table.caption = f"[red]{result.n_failed} of {len(result.outcomes)} configs failed[/red]"
    return table


def _fmt(v, digits: int = 4) -> str:
    return f"{v:.{digits}f}" if v is not None and v == v else "–"


def json_lines(result: SweepResult) -> list[str]:
    """One JSON object per config: config_id, name, spec, status, metrics {name: mean}, n_queries, n_unlabelled."""
    return [json.dumps({"config_id": o.config_id, "name": o.name, "spec": o.spec, "status": o.status,
                        "error": o.error, "sweep_id": result.sweep_id,
                        "dataset_fingerprint": result.dataset_fingerprint,
                        "metrics": {k: (None if v != v else v) for k, v in o.metrics.items()},
                        "n_queries": o.n_queries, "n_unlabelled": o.n_unlabelled}, sort_keys=True)
            for o in result.outcomes]
