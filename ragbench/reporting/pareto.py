"""Quality against cost: the Pareto front of a sweep and the cheapest config tied with the best.

Every config carries cost measures (:mod:`ragbench.evaluation.cost`): ``latency_p50_ms``, ``latency_p95_ms``,
``index_bytes``, ``vector_bytes``, ``memory_bytes``, ``embed_seconds``. The front weighs three objectives: the
primary measure (higher is better), ``latency_p95_ms`` and ``memory_bytes`` (lower is better).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import polars as pl

from ragbench.core.measure_keys import MeasureMap

#: cost measures of a config, in the order tables show them
COST_COLUMNS = ("latency_p50_ms", "latency_p95_ms", "index_bytes", "vector_bytes", "memory_bytes", "embed_seconds")
#: the objectives the front minimises beside the primary measure
MINIMIZED = ("latency_p95_ms", "memory_bytes")


def pareto_front(points: pl.DataFrame, maximize: Sequence[str] = (), minimize: Sequence[str] = ()) -> list[bool]:
    """Which rows of ``points`` are on the Pareto front of the objectives ``maximize`` (higher is better) and
    ``minimize`` (lower is better).

    Dominance: row *a* dominates row *b* when *a* is at least as good as *b* on every objective and strictly
    better on at least one. A row is on the front when no other row dominates it. Rows equal on every objective
    do not dominate each other, so duplicates are on the front together or off it together. A row with a missing
    (null or NaN) objective cannot be compared: it is off the front and dominates nothing.
    """
    cols = [*maximize, *minimize]
    if not cols:
        raise ValueError("pareto_front needs at least one objective")
    signs = [1.0] * len(maximize) + [-1.0] * len(minimize)  # turn every objective into "higher is better"
    rows = [[None if v is None or (isinstance(v, float) and math.isnan(v)) else s * float(v)
             for v, s in zip(r, signs)] for r in points.select(cols).iter_rows()]
    complete = [all(v is not None for v in r) for r in rows]
    on_front = []
    for i, a in enumerate(rows):
        if not complete[i]:
            on_front.append(False)
            continue
        dominated = any(complete[j] and all(x >= y for x, y in zip(b, a)) and any(x > y for x, y in zip(b, a))
                        for j, b in enumerate(rows) if j != i)
        on_front.append(not dominated)
    return on_front


def cost_table(primary: str, primary_means: Mapping[str, float], tied: set[str],
               metrics: Mapping[str, MeasureMap], labels: Mapping[str, str]) -> pl.DataFrame:
    """One row per ranked config (``primary_means``: config id -> mean, best first): ``config_id, label,
    primary, <COST_COLUMNS>, tied_with_best`` (the best included), ``on_front`` (:func:`pareto_front` of the
    primary, ``latency_p95_ms`` and ``memory_bytes``) and ``cheapest_tied`` (:func:`cheapest_tied`)."""
    rows = [{"config_id": cid, "label": labels.get(cid, cid), "primary": mean,
             **{c: metrics.get(cid, MeasureMap()).get(c, math.nan) for c in COST_COLUMNS},
             "tied_with_best": cid in tied} for cid, mean in primary_means.items()]
    schema = {"config_id": pl.String, "label": pl.String, "primary": pl.Float64,
              **{c: pl.Float64 for c in COST_COLUMNS}, "tied_with_best": pl.Boolean}
    table = pl.DataFrame(rows, schema=schema)
    table = table.with_columns(pl.Series("on_front", pareto_front(table, ["primary"], MINIMIZED), pl.Boolean))
    cheapest = cheapest_tied(table)
    return table.with_columns((pl.col("config_id") == (cheapest or "")).alias("cheapest_tied"))


def cheapest_tied(table: pl.DataFrame) -> str | None:
    """Among the configs tied with the best on the primary measure (the best included), the one with the lowest
    ``latency_p95_ms``, then the lowest ``memory_bytes``, then the higher primary mean; None when none has a
    latency (results stored before cost measures existed)."""
    tied = table.filter(pl.col("tied_with_best") & pl.col("latency_p95_ms").is_not_nan()
                        & pl.col("latency_p95_ms").is_not_null())
    if tied.is_empty():
        return None
    return tied.sort(["latency_p95_ms", "memory_bytes", "primary", "config_id"],
                     descending=[False, False, True, False], nulls_last=True)["config_id"][0]


def human_bytes(n: float) -> str:
    """``1.5 MB`` style (powers of 1024), ``–`` for NaN."""
    if n is None or n != n:
        return "–"
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def milliseconds(v: float) -> str:
    """Milliseconds (or seconds) for people: one decimal from 1 up, two below; ``–`` for NaN."""
    return "–" if v is None or v != v else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


#: front configs named in the one-line summary (best primary first); the cost table lists every one
SUMMARY_FRONT = 3


def cost_summary(table: pl.DataFrame | None, primary: str) -> list[str]:
    """Two lines for people: the front, and the cheapest config tied with the best (or why there is none)."""
    if table is None or table.is_empty():
        return []
    if table["latency_p95_ms"].is_nan().all():
        return ["Cost: no latency stored for these configs (evaluated before cost measures existed; --fresh)."]
    front = table.filter(pl.col("on_front"))
    named = [f"{r['label']} ({r['primary']:.4f}, {milliseconds(r['latency_p95_ms'])} ms, "
             f"{human_bytes(r['memory_bytes'])})" for r in front.head(SUMMARY_FRONT).iter_rows(named=True)]
    more = (f"; and {front.height - SUMMARY_FRONT} more (the report's cost table marks them ◆)"
            if front.height > SUMMARY_FRONT else "")
    lines = [f"Pareto front ({primary} ↑, p95 latency ↓, memory ↓), {front.height} of {table.height} configs: "
             + "; ".join(named) + more]
    cheap = table.filter(pl.col("cheapest_tied"))
    if cheap.height:
        r = cheap.row(0, named=True)
        lines.append(f"Cheapest config tied with the best: {r['label']} ({primary} {r['primary']:.4f}, p95 "
                     f"{milliseconds(r['latency_p95_ms'])} ms, memory {human_bytes(r['memory_bytes'])})")
    return lines
