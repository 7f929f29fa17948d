"""Migrations that rewrite stored *values* of an old results file (the schema's own are in
:mod:`ragbench.results.store_schema`): each runs once per file, inside one transaction, and is recorded by name in
the ``migrations`` table, so a file is never migrated twice and a new file records them all as done.

* ``exact_means``: a config's stored means (``config_metrics.mean``) became the exact mean of its per-query values
  rounded once (:func:`ragbench.evaluation.means.query_mean`). Means stored before were floating-point sums in
  whatever order polars or DuckDB read the rows, up to a few ulps away; the leaderboard's order ("#N") and the tie
  rule (equal means: the smaller config id) read them, so they are recomputed from ``query_metrics``. A stored mean
  further from the exact one than rounding can explain was not the mean of those rows and is left alone.
"""

from __future__ import annotations

import duckdb
import polars as pl

from ragbench.core.progress import log
from ragbench.evaluation.means import query_means

EXACT_MEANS = "exact_means"
#: a stored mean this far (relative, at least absolute) from the exact one is not a rounding of it
ROUNDING_TOLERANCE = 1e-9


def migrate_values(con: duckdb.DuckDBPyConnection) -> None:
    """Run every value migration the file has not had yet, each in its own transaction."""
    done = {row[0] for row in con.execute("SELECT name FROM migrations").fetchall()}
    for name, migration in ((EXACT_MEANS, _exact_means),):
        if name in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            migration(con)
            con.execute("INSERT INTO migrations VALUES (?, now())", [name])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _exact_means(con: duckdb.DuckDBPyConnection) -> None:
    """Recompute ``config_metrics.mean`` from ``query_metrics``, one config at a time (its rows fit in memory)."""
    configs = con.execute("SELECT DISTINCT sweep_id, config_id FROM config_metrics").fetchall()
    if configs:
        log.info("results file: recomputing the stored means of %d configs exactly (once per file)", len(configs))
    changed = 0
    for sweep_id, config_id in configs:
        rows = _frame(con, "SELECT measure, value FROM query_metrics WHERE sweep_id = ? AND config_id = ? AND measure "
                      "IN (SELECT measure FROM config_metrics WHERE sweep_id = ? AND config_id = ?)",
                      [sweep_id, config_id, sweep_id, config_id])
        if rows.is_empty():
            continue
        stored = _frame(con, "SELECT measure, mean AS stored FROM config_metrics WHERE sweep_id = ? AND config_id = ? "
                        "AND mean IS NOT NULL", [sweep_id, config_id])
        redone = query_means(rows, "measure").join(stored, on="measure").filter(
            pl.col("mean").is_not_nan() & (pl.col("mean") != pl.col("stored"))
            & ((pl.col("mean") - pl.col("stored")).abs()
               <= ROUNDING_TOLERANCE * pl.max_horizontal(pl.col("stored").abs(), pl.lit(1.0))))
        if redone.is_empty():
            continue
        con.register("redone", redone.select("measure", "mean").to_arrow())
        con.execute("UPDATE config_metrics SET mean = redone.mean FROM redone WHERE config_metrics.sweep_id = ? "
                    "AND config_metrics.config_id = ? AND config_metrics.measure = redone.measure",
                    [sweep_id, config_id])
        con.unregister("redone")
        changed += redone.height
    if changed:
        log.info("results file: %d stored means moved to the exact mean (by rounding only)", changed)


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list) -> pl.DataFrame:
    return pl.from_arrow(con.sql(sql, params=params).to_arrow_table())
