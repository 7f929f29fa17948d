"""The ``screening`` table of the results file: what a screened sweep (``search: {strategy: screen}``) decided.

One row per chunker x model pair: its mean primary value on the pooled sub-corpus, its difference from the leader,
the paired test's p-value and its Holm-adjusted one, whether it was kept (run in full) or screened out, and the size
of the pool (documents, chunks summed over the chunkers) and of the query set, the test's ``alpha`` and ``margin``
(NULL in files written before the margin: 0), what the pair's full embed was priced at when the leader was
chosen (``full_embed_cost`` in ``cost_unit``: ``seconds`` or ``chunks``; NULL in older files), and the test's
``alternative`` (``less``: one-sided; NULL in files written before it: two-sided). A sweep without a
screen has no rows. The screened-out configs themselves are in ``configs`` with status ``screened_out`` and the
evidence as error.
"""

from __future__ import annotations

import polars as pl

#: the columns of one screen row, in order
SCREENING_COLUMNS = {"chunker": pl.String, "model": pl.String, "mean": pl.Float64, "delta": pl.Float64,
                     "p": pl.Float64, "p_holm": pl.Float64, "kept": pl.Boolean, "leader": pl.Boolean,
                     "n_docs": pl.Int64, "n_chunks": pl.Int64, "n_queries": pl.Int64, "alpha": pl.Float64,
                     "margin": pl.Float64, "full_embed_cost": pl.Float64, "cost_unit": pl.String,
                     "alternative": pl.String}


class ScreeningTable:
    """The ``screening`` methods of :class:`ragbench.results.store.ResultStore` (they use its ``query`` and
    ``transaction``)."""

    def write_screening(self, sweep_id: str, table: pl.DataFrame) -> None:
        """Replace the sweep's screen rows (:data:`SCREENING_COLUMNS`) in one transaction: a resumed sweep's
        screen is the one that counts."""
        cols = list(SCREENING_COLUMNS)
        # rows spooled by an older version lack the newer columns: NULL, as the file's older rows read
        table = table.with_columns(pl.lit(None, dtype=t).alias(c) for c, t in SCREENING_COLUMNS.items()
                                   if c not in table.columns)
        with self.transaction() as con:
            con.execute("DELETE FROM screening WHERE sweep_id = ?", [sweep_id])
            con.register("incoming_screen", table.select(cols).cast(SCREENING_COLUMNS).to_arrow())
            try:
                con.execute(f"INSERT INTO screening (sweep_id, {', '.join(cols)}) SELECT ?, {', '.join(cols)} "
                            "FROM incoming_screen", [sweep_id])
            finally:
                con.unregister("incoming_screen")

    def screening(self, sweep_id: str) -> pl.DataFrame:
        """The sweep's screen rows, the leader first then best mean first (empty: the sweep had no screen)."""
        return self.query(f"SELECT {', '.join(SCREENING_COLUMNS)} FROM screening WHERE sweep_id = ? "
                          "ORDER BY leader DESC, mean DESC, chunker, model", [sweep_id])
