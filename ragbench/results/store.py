"""Results store: a DuckDB file with every sweep, config, metric, per-query value and ranking, queryable with SQL.

Tables (see :data:`SCHEMA`): ``sweeps``, ``configs``, ``config_metrics``, ``query_metrics`` and ``rankings`` (the
retrieved chunk ids and scores of every query of every config: the log line RAG debugging asks for).

DuckDB allows one writing process per file and blocks even readers while it is held, so the store opens a
connection only for each short transaction and retries while another process holds the file. A config's rows are
replaced in one transaction: rerunning or resuming never duplicates them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import polars as pl

from ragbench.core.errors import StoreBusyError
from ragbench.results.outcomes import ConfigResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id VARCHAR PRIMARY KEY, name VARCHAR, spec_hash VARCHAR, spec_json VARCHAR, dataset_name VARCHAR,
    dataset_fingerprint VARCHAR, status VARCHAR, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
    mlflow_run_id VARCHAR);
CREATE TABLE IF NOT EXISTS configs (
    sweep_id VARCHAR, config_id VARCHAR, name VARCHAR, spec_json VARCHAR, dataset_fingerprint VARCHAR,
    status VARCHAR, error VARCHAR, n_queries INTEGER, n_unlabelled INTEGER, retrieval_ms_per_query DOUBLE,
    mlflow_run_id VARCHAR, finished_at TIMESTAMPTZ, PRIMARY KEY (sweep_id, config_id));
CREATE TABLE IF NOT EXISTS config_metrics (
    sweep_id VARCHAR, config_id VARCHAR, measure VARCHAR, mean DOUBLE, n INTEGER, n_unlabelled INTEGER);
CREATE TABLE IF NOT EXISTS query_metrics (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, query_class VARCHAR, measure VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS chunk_stats (
    sweep_id VARCHAR, config_id VARCHAR, stat VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS query_diagnostics (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, first_relevant_rank INTEGER, category VARCHAR);
CREATE TABLE IF NOT EXISTS ann_fidelity (
    sweep_id VARCHAR, config_id VARCHAR, hnsw_ef INTEGER, configured BOOLEAN, k INTEGER, depth INTEGER,
    recall_vs_exact DOUBLE, ms_per_query_ann DOUBLE, ms_per_query_exact DOUBLE);
CREATE TABLE IF NOT EXISTS answers (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, query_class VARCHAR, answerable BOOLEAN,
    n_chunks INTEGER, chunk_ids VARCHAR[], context_tokens INTEGER, prompt_tokens INTEGER, answer VARCHAR,
    em DOUBLE, f1 DOUBLE, contains DOUBLE, insufficient BOOLEAN, correct BOOLEAN, answer_in_context DOUBLE,
    cached BOOLEAN, seconds DOUBLE, b_answer VARCHAR, b_correct BOOLEAN, gold_in_context BOOLEAN,
    gold_in_pool BOOLEAN, verdict VARCHAR);
CREATE TABLE IF NOT EXISTS k_sweep (
    sweep_id VARCHAR, config_id VARCHAR, k INTEGER, n_queries INTEGER, accuracy DOUBLE, em DOUBLE, f1 DOUBLE,
    contains DOUBLE, answer_in_context DOUBLE, insufficient_rate DOUBLE, mean_chunks DOUBLE,
    mean_context_tokens DOUBLE, recall DOUBLE, recall_measure VARCHAR);
CREATE TABLE IF NOT EXISTS rankings (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, rank INTEGER, chunk_id VARCHAR, doc_id VARCHAR,
    score DOUBLE);
"""

PER_CONFIG_TABLES = ("config_metrics", "query_metrics", "rankings", "chunk_stats", "query_diagnostics",
                     "ann_fidelity", "answers")


def _now() -> datetime:
    return datetime.now(timezone.utc)


class ResultStore:
    """The DuckDB results file. Every method opens, uses and closes its own connection."""

    def __init__(self, path: Path, wait_seconds: float = 600.0):
        self.path = Path(path)
        self.wait_seconds = wait_seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.connect() as con:
            con.execute(SCHEMA)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; waits (with backoff) while another process holds the file."""
        deadline, delay = time.monotonic() + self.wait_seconds, 0.05
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only and self.path.exists())
                break
            except duckdb.IOException as e:
                if "lock" not in str(e).lower() or time.monotonic() > deadline:
                    if "lock" in str(e).lower():
                        raise StoreBusyError(f"{self.path} is held by another process for more than "
                                             f"{self.wait_seconds:.0f} s: {e}") from None
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        try:
            yield con
        finally:
            con.close()

    # ---------------------------------------------------------------- sweeps
    def find_unfinished_sweep(self, spec_hash: str, dataset_fingerprint: str) -> str | None:
        """The newest sweep of this spec and data that did not finish: the one to resume."""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT sweep_id FROM sweeps WHERE spec_hash = ? AND dataset_fingerprint = ? AND status = 'running' "
                "ORDER BY started_at DESC LIMIT 1", [spec_hash, dataset_fingerprint]).fetchall()
        return rows[0][0] if rows else None

    def begin_sweep(self, sweep_id: str, name: str, spec_hash: str, spec: dict, dataset_name: str,
                    dataset_fingerprint: str) -> None:
        with self.connect() as con:
            con.execute(
                "INSERT INTO sweeps VALUES (?, ?, ?, ?, ?, ?, 'running', ?, NULL, NULL) ON CONFLICT DO NOTHING",
                [sweep_id, name, spec_hash, json.dumps(spec, sort_keys=True), dataset_name, dataset_fingerprint,
                 _now()])

    def set_sweep_mlflow_run(self, sweep_id: str, run_id: str | None) -> None:
        with self.connect() as con:
            con.execute("UPDATE sweeps SET mlflow_run_id = ? WHERE sweep_id = ?", [run_id, sweep_id])

    def finish_sweep(self, sweep_id: str, status: str) -> None:
        with self.connect() as con:
            con.execute("UPDATE sweeps SET status = ?, finished_at = ? WHERE sweep_id = ?",
                        [status, _now(), sweep_id])

    def sweep(self, sweep_id: str) -> dict | None:
        with self.connect(read_only=True) as con:
            cur = con.execute("SELECT * FROM sweeps WHERE sweep_id = ?", [sweep_id])
            cols = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return dict(zip(cols, rows[0])) if rows else None

    def latest_sweep_id(self, name: str | None = None) -> str | None:
        with self.connect(read_only=True) as con:
            sql = "SELECT sweep_id FROM sweeps" + (" WHERE name = ?" if name else "") + \
                  " ORDER BY started_at DESC LIMIT 1"
            rows = con.execute(sql, [name] if name else []).fetchall()
        return rows[0][0] if rows else None

    # ---------------------------------------------------------------- configs
    def finished_configs(self, sweep_id: str) -> set[str]:
        with self.connect(read_only=True) as con:
            rows = con.execute("SELECT config_id FROM configs WHERE sweep_id = ? AND status = 'finished'",
                               [sweep_id]).fetchall()
        return {r[0] for r in rows}

    def write_config(self, sweep_id: str, result: ConfigResult, mlflow_run_id: str | None = None) -> None:
        """Replace this config's rows (all tables) in one transaction: complete or absent, never doubled."""
        key = {"sweep_id": sweep_id, "config_id": result.config_id}
        stats = result.chunk_stats
        tables = {
            "config_metrics": result.summary().select("measure", "mean", "n", "n_unlabelled"),
            "query_metrics": result.per_query.select("query_id", "query_class", "measure", "value"),
            "rankings": result.rankings.select("query_id", "rank", "chunk_id", "doc_id", "score"),
            "chunk_stats": pl.DataFrame({"stat": list(stats), "value": list(stats.values())},
                                        schema={"stat": pl.String, "value": pl.Float64}),
        }
        if result.diagnostics is not None:
            tables["query_diagnostics"] = result.diagnostics.select("query_id", "first_relevant_rank", "category")
        if result.ann is not None:
            tables["ann_fidelity"] = result.ann.select("hnsw_ef", "configured", "k", "depth", "recall_vs_exact",
                                                       "ms_per_query_ann", "ms_per_query_exact")
        if result.answers is not None:
            tables["answers"] = result.answers
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                for table in PER_CONFIG_TABLES:
                    con.execute(f"DELETE FROM {table} WHERE sweep_id = ? AND config_id = ?",
                                [sweep_id, result.config_id])
                for table, df in tables.items():
                    arrow = df.with_columns(**{k: pl.lit(v) for k, v in key.items()}).to_arrow()
                    con.register("incoming", arrow)
                    cols = ", ".join(["sweep_id", "config_id", *df.columns])
                    con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM incoming")
                    con.unregister("incoming")
                con.execute("DELETE FROM configs WHERE sweep_id = ? AND config_id = ?", [sweep_id, result.config_id])
                con.execute("INSERT INTO configs VALUES (?, ?, ?, ?, ?, 'finished', NULL, ?, ?, ?, ?, ?)",
                            [sweep_id, result.config_id, result.name, json.dumps(result.spec, sort_keys=True),
                             result.dataset_fingerprint, result.n_queries, result.n_unlabelled, result.ms_per_query,
                             mlflow_run_id, _now()])
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def write_config_failure(self, sweep_id: str, config_id: str, name: str, spec: dict, dataset_fingerprint: str,
                             error: str, mlflow_run_id: str | None = None) -> None:
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            for table in PER_CONFIG_TABLES:
                con.execute(f"DELETE FROM {table} WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            con.execute("DELETE FROM configs WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            con.execute("INSERT INTO configs VALUES (?, ?, ?, ?, ?, 'failed', ?, NULL, NULL, NULL, ?, ?)",
                        [sweep_id, config_id, name, json.dumps(spec, sort_keys=True), dataset_fingerprint, error,
                         mlflow_run_id, _now()])
            con.execute("COMMIT")

    def write_k_sweep(self, sweep_id: str, config_id: str, table: pl.DataFrame) -> None:
        """Replace the sweep's k-sweep rows (accuracy and recall per context size k) in one transaction."""
        cols = ["k", "n_queries", "accuracy", "em", "f1", "contains", "answer_in_context", "insufficient_rate",
                "mean_chunks", "mean_context_tokens", "recall", "recall_measure"]
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            con.execute("DELETE FROM k_sweep WHERE sweep_id = ?", [sweep_id])
            con.register("incoming", table.select(cols).to_arrow())
            con.execute(f"INSERT INTO k_sweep (sweep_id, config_id, {', '.join(cols)}) SELECT ?, ?, "
                        f"{', '.join(cols)} FROM incoming", [sweep_id, config_id])
            con.unregister("incoming")
            con.execute("COMMIT")

    def set_config_mlflow_run(self, sweep_id: str, config_id: str, run_id: str) -> None:
        with self.connect() as con:
            con.execute("UPDATE configs SET mlflow_run_id = ? WHERE sweep_id = ? AND config_id = ?",
                        [run_id, sweep_id, config_id])

    # ---------------------------------------------------------------- reading
    def stored_config_metrics(self, sweep_id: str) -> dict[str, tuple[dict[str, float], int, int]]:
        """``config_id -> (metrics, n_queries, n_unlabelled)`` of the sweep's stored configs; metrics hold every
        measure's mean and the chunk statistics as ``chunkstat_<stat>``."""
        board = self.query("SELECT config_id, measure, mean FROM config_metrics WHERE sweep_id = ?", [sweep_id])
        stats = self.query("SELECT config_id, stat, value FROM chunk_stats WHERE sweep_id = ?", [sweep_id])
        counts = self.query("SELECT config_id, n_queries, n_unlabelled FROM configs WHERE sweep_id = ?", [sweep_id])
        by_cfg: dict[str, dict[str, float]] = {}
        for c, m, v in board.iter_rows():
            by_cfg.setdefault(c, {})[m] = v
        for c, m, v in stats.iter_rows():
            by_cfg.setdefault(c, {})[f"chunkstat_{m}"] = v
        return {c: (by_cfg.get(c, {}), q or 0, u or 0) for c, q, u in counts.iter_rows()}

    def query(self, sql: str, params: list | None = None) -> pl.DataFrame:
        """Run SQL read-only and return a polars DataFrame."""
        with self.connect(read_only=True) as con:
            return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())

    def leaderboard(self, sweep_id: str) -> pl.DataFrame:
        """One row per config of the sweep: status, counts, and each measure's mean as a column."""
        configs = self.query("SELECT config_id, name, status, error, n_queries, n_unlabelled, "
                             "retrieval_ms_per_query, spec_json, mlflow_run_id FROM configs WHERE sweep_id = ?",
                             [sweep_id])
        metrics = self.query("SELECT config_id, measure, mean FROM config_metrics WHERE sweep_id = ?", [sweep_id])
        if metrics.height:
            wide = metrics.pivot(on="measure", index="config_id", values="mean")
            configs = configs.join(wide, on="config_id", how="left")
        return configs
