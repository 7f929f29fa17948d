"""The ``queries`` table of the results file: the text of every question, keyed by (dataset fingerprint, query id).

A sweep writes its dataset's questions once (:meth:`QueriesTable.write_query_texts`: rows already stored for the
fingerprint are kept, new ids added), so ``explain``, the report, MLflow's per-query tables and the judgment pool show
a question by its text beside its id, and ``explain`` can find a query by a part of its text. The fingerprint covers
the questions, so one (fingerprint, id) has one text.
"""

from __future__ import annotations

import polars as pl


class QueriesTable:
    """The ``queries`` methods of :class:`ragbench.results.store.ResultStore` (they use its ``query`` and
    ``transaction``)."""

    def write_query_texts(self, dataset_fingerprint: str, queries: pl.DataFrame) -> int:
        """Store ``query_id, text`` (and ``query_class`` when the frame has it) of ``queries`` under
        ``dataset_fingerprint``, adding only the ids not stored yet; returns how many rows were added."""
        cols = [c for c in ("query_id", "text", "query_class") if c in queries.columns]
        frame = queries.select(cols).unique("query_id", keep="first", maintain_order=True)
        if "query_class" not in cols:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias("query_class"))
        frame = frame.with_columns(pl.lit(dataset_fingerprint).alias("dataset_fingerprint"))
        with self.transaction() as con:
            con.register("incoming_queries", frame.to_arrow())
            try:
                before = con.execute("SELECT count(*) FROM queries WHERE dataset_fingerprint = ?",
                                     [dataset_fingerprint]).fetchall()[0][0]
                con.execute("INSERT INTO queries (dataset_fingerprint, query_id, text, query_class) "
                            "SELECT i.dataset_fingerprint, i.query_id, i.text, i.query_class FROM incoming_queries i "
                            "WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.dataset_fingerprint = "
                            "i.dataset_fingerprint AND q.query_id = i.query_id)").fetchall()
                after = con.execute("SELECT count(*) FROM queries WHERE dataset_fingerprint = ?",
                                    [dataset_fingerprint]).fetchall()[0][0]
            finally:
                con.unregister("incoming_queries")
        return after - before

    def query_texts(self, dataset_fingerprint: str) -> dict[str, str]:
        """``query_id -> question text`` of the dataset ``dataset_fingerprint`` (empty when none was stored:
        a sweep written before the table existed)."""
        rows = self.query("SELECT query_id, text FROM queries WHERE dataset_fingerprint = ? ORDER BY query_id",
                          [dataset_fingerprint])
        return dict(rows.iter_rows()) if rows.height else {}
