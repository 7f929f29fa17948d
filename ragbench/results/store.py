"""Results store: a DuckDB file with every sweep, config, metric, per-query value and ranking, queryable with SQL.

Tables (see :data:`ragbench.results.store_schema.SCHEMA`): ``sweeps``, ``configs``, ``config_metrics``,
``query_metrics`` and ``rankings`` (the retrieved chunk ids and scores of every query of every config: the log line
RAG debugging asks for), plus the per-config side tables, ``k_sweep`` and ``promotions`` (what went to production:
:mod:`ragbench.results.store_promotions`). The DDL and the migrations of old files are in
:mod:`ragbench.results.store_schema`, the connections (waiting for another process, one transaction each) in
:mod:`ragbench.results.store_connection`; this module holds the sweeps, the configs and their results.

``configs.eval_key`` identifies what a finished config's results depend on (config, dataset fingerprint,
evaluation settings, evaluation code version: :func:`ragbench.sweep.evaluate.evaluation_key`); a later sweep with
the same key copies the rows instead of evaluating again (:meth:`ResultStore.reusable_configs`,
:meth:`ResultStore.copy_configs`), and ``configs.reused_from`` names the sweep that evaluated them.

Measures are stored under their keys (``ndcg_at_10``, :mod:`ragbench.core.measure_keys`); a file written when they
were stored as ``ndcg@10`` is rewritten to keys when opened
(:data:`~ragbench.results.store_schema.MEASURE_KEY_MIGRATION`), and methods that take a measure accept either
spelling.

These ``store*`` modules are the one owner of the schema: every DDL and SQL statement of the package lives in
them, behind named methods (a test scans the package for SQL elsewhere). :meth:`ResultStore.query` stays as a
read-only escape hatch for people and tests, not for library code.

DuckDB allows one writing process per file and blocks even readers while it is held, so the store opens a
connection only for each short transaction and retries while another process holds the file (a sweep waits only
briefly, then keeps its results in the spool, :mod:`ragbench.results.spool`). A config's rows are replaced in one
transaction: rerunning or resuming never duplicates them.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import polars as pl

from ragbench.core.measure_keys import measure_key
from ragbench.core.redact import redact, redact_obj
from ragbench.evaluation.means import query_means
from ragbench.results.outcomes import ConfigResult, failure_status
from ragbench.results.store_connection import StoreConnection
from ragbench.results.store_judgments import JudgmentsTable
from ragbench.results.store_promotions import PromotionsTable
from ragbench.results.store_queries import QueriesTable
from ragbench.results.store_schema import PER_CONFIG_TABLES
from ragbench.results.store_screening import ScreeningTable

_CONFIG_COLUMNS = ("sweep_id, config_id, name, spec_json, dataset_fingerprint, status, error, n_queries, n_unlabelled, "
                   "retrieval_ms_per_query, mlflow_run_id, finished_at, eval_key")


def _now() -> datetime:
    return datetime.now(timezone.utc)


class ResultStore(PromotionsTable, JudgmentsTable, QueriesTable, ScreeningTable, StoreConnection):
    """The DuckDB results file. Every method opens, uses and closes its own connection (:class:`StoreConnection`);
    the ``promotions`` methods come from :class:`PromotionsTable`, the ``assessor_agreement`` ones from
    :class:`JudgmentsTable`, the ``queries`` ones (question texts) from :class:`QueriesTable`."""

    # ---------------------------------------------------------------- sweeps
    def find_unfinished_sweep(self, spec_hash: str, dataset_fingerprint: str) -> str | None:
        """The newest sweep of this spec and data that did not finish: the one to resume."""
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT sweep_id FROM sweeps WHERE spec_hash = ? AND dataset_fingerprint = ? AND status = 'running' "
                "ORDER BY started_at DESC LIMIT 1", [spec_hash, dataset_fingerprint]).fetchall()
        return rows[0][0] if rows else None

    def begin_sweep(self, sweep_id: str, name: str, spec_hash: str, spec: dict, dataset_name: str,
                    dataset_fingerprint: str, experiment: str | None = None,
                    dataset_notes: dict | None = None) -> None:
        """Record a new sweep as ``running`` (a no-op if the id exists).

        ``dataset_notes``: facts about the questions the report needs (:attr:`ragbench.data.Dataset.notes`, e.g.
        synthetic vs real counts), stored as JSON (NULL when empty).

        ``experiment`` is the MLflow experiment the sweep logs to, so ``sync-mlflow`` uploads into the same one
        later (NULL in rows written before the column existed).
        """
        with self.connect() as con:
            con.execute(
                "INSERT INTO sweeps (sweep_id, name, spec_hash, spec_json, dataset_name, dataset_fingerprint, "
                "status, started_at, finished_at, mlflow_run_id, experiment, dataset_notes) "
                "VALUES (?, ?, ?, ?, ?, ?, 'running', ?, NULL, NULL, ?, ?) ON CONFLICT DO NOTHING",
                [sweep_id, name, spec_hash, json.dumps(redact_obj(spec), sort_keys=True), dataset_name, dataset_fingerprint,
                 _now(), experiment, json.dumps(dataset_notes, sort_keys=True) if dataset_notes else None])

    def set_sweep_mlflow_run(self, sweep_id: str, run_id: str | None) -> None:
        """Remember the sweep's MLflow parent run."""
        with self.connect() as con:
            con.execute("UPDATE sweeps SET mlflow_run_id = ? WHERE sweep_id = ?", [run_id, sweep_id])

    def finish_sweep(self, sweep_id: str, status: str) -> None:
        """Set the sweep's final ``status`` (``finished``, ``finished_with_failures``, ...) and ``finished_at``."""
        with self.connect() as con:
            con.execute("UPDATE sweeps SET status = ?, finished_at = ? WHERE sweep_id = ?",
                        [status, _now(), sweep_id])

    def sweep(self, sweep_id: str) -> dict | None:
        """The sweep's row (every column of ``sweeps``) as a dict, or None."""
        with self.connect(read_only=True) as con:
            cur = con.execute("SELECT * FROM sweeps WHERE sweep_id = ?", [sweep_id])
            cols = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return dict(zip(cols, rows[0])) if rows else None

    def sweep_spec(self, sweep_id: str) -> dict:
        """The sweep's stored spec (``sweeps.spec_json`` parsed); ``{}`` for an unknown sweep or an empty spec.

        Raises ``ValueError`` when the stored JSON is malformed.
        """
        row = self.sweep(sweep_id) or {}
        return json.loads(row.get("spec_json") or "{}")

    def latest_sweep_id(self, name: str | None = None) -> str | None:
        """The newest sweep (of that name, when given), or None."""
        with self.connect(read_only=True) as con:
            sql = "SELECT sweep_id FROM sweeps" + (" WHERE name = ?" if name else "") + \
                  " ORDER BY started_at DESC LIMIT 1"
            rows = con.execute(sql, [name] if name else []).fetchall()
        return rows[0][0] if rows else None

    def sweep_ids(self, prefix: str | None = None, limit: int | None = None) -> list[str]:
        """Sweep ids, newest first: those starting with ``prefix`` when given, at most ``limit`` of them."""
        sql = "SELECT sweep_id FROM sweeps" + (" WHERE starts_with(sweep_id, ?)" if prefix is not None else "") + \
              " ORDER BY started_at DESC" + (" LIMIT ?" if limit is not None else "")
        params = ([prefix] if prefix is not None else []) + ([limit] if limit is not None else [])
        with self.connect(read_only=True) as con:
            return [r[0] for r in con.execute(sql, params).fetchall()]

    def sweeps(self, sweep_id: str | None = None) -> pl.DataFrame:
        """``sweep_id, name, spec_json, dataset_fingerprint, status, experiment, mlflow_run_id`` of every sweep
        (or of ``sweep_id`` only). ``experiment`` is NULL for sweeps recorded before it was stored."""
        return self.query("SELECT sweep_id, name, spec_json, dataset_fingerprint, status, experiment, mlflow_run_id "
                          "FROM sweeps" + (" WHERE sweep_id = ?" if sweep_id else "") + " ORDER BY started_at",
                          [sweep_id] if sweep_id else [])

    def latest_sweep_with_config(self, config_id: str, dataset_fingerprint: str,
                                 prefer: str | None = None) -> str | None:
        """The sweep on ``dataset_fingerprint`` where ``config_id`` finished: ``prefer`` if it is one, else the newest.

        The promotion gate pairs production's per-query values from there.
        """
        with self.connect(read_only=True) as con:
            rows = con.execute(
                "SELECT c.sweep_id FROM configs c JOIN sweeps s USING (sweep_id) WHERE c.config_id = ? AND "
                "c.status = 'finished' AND s.dataset_fingerprint = ? ORDER BY (c.sweep_id = ?) DESC, "
                "s.started_at DESC LIMIT 1", [config_id, dataset_fingerprint, prefer]).fetchall()
        return rows[0][0] if rows else None

    def previous_sweep(self, sweep_id: str, statuses: tuple[str, ...]) -> str | None:
        """The newest sweep of the same name on the same dataset fingerprint as ``sweep_id``, started before it,
        whose status is one of ``statuses``; None when there is none."""
        rows = self.query(
            "SELECT p.sweep_id FROM sweeps p JOIN sweeps s ON p.name = s.name AND p.dataset_fingerprint = "
            "s.dataset_fingerprint WHERE s.sweep_id = ? AND p.sweep_id <> s.sweep_id AND p.started_at < s.started_at "
            "AND list_contains(?, p.status) ORDER BY p.started_at DESC LIMIT 1", [sweep_id, list(statuses)])
        return rows["sweep_id"][0] if rows.height else None

    # ---------------------------------------------------------------- configs
    def finished_configs(self, sweep_id: str) -> set[str]:
        """Ids of the sweep's configs that finished (a resumed sweep skips them)."""
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
        with self.transaction() as con:
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
            con.execute(f"INSERT INTO configs ({_CONFIG_COLUMNS}) VALUES (?, ?, ?, ?, ?, 'finished', NULL, ?, ?, "
                        "?, ?, ?, ?)",
                        [sweep_id, result.config_id, result.name, json.dumps(result.spec, sort_keys=True),
                         result.dataset_fingerprint, result.n_queries, result.n_unlabelled, result.ms_per_query,
                         mlflow_run_id, _now(), result.eval_key])
            if result.measure_versions is not None:
                con.execute("UPDATE configs SET measure_versions = ? WHERE sweep_id = ? AND config_id = ?",
                            [json.dumps(result.measure_versions, sort_keys=True), sweep_id, result.config_id])
            # the span family's unlabelled count (null without span measures), as config_metrics has it
            con.execute("UPDATE configs SET n_without_evidence = ? WHERE sweep_id = ? AND config_id = ?",
                        [result.n_without_evidence, sweep_id, result.config_id])

    def write_config_failure(self, sweep_id: str, config_id: str, name: str, spec: dict, dataset_fingerprint: str,
                             error: str, mlflow_run_id: str | None = None) -> None:
        """Record a failed config (its other rows removed) with the error, in one transaction."""
        with self.transaction() as con:
            for table in PER_CONFIG_TABLES:
                con.execute(f"DELETE FROM {table} WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            con.execute("DELETE FROM configs WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            con.execute(f"INSERT INTO configs ({_CONFIG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL, "
                        "NULL, ?, ?, NULL)",  # status: failed, or over_budget (not run: a budgeted sweep)
                        [sweep_id, config_id, name, json.dumps(redact_obj(spec), sort_keys=True), dataset_fingerprint,
                         failure_status(error), redact(error),
                         mlflow_run_id, _now()])

    def reusable_configs(self, eval_keys: dict[str, str], prefer: str | None = None) -> dict[str, tuple[str, str]]:
        """``config_id -> (sweep_id, origin)`` for each config of ``eval_keys`` (``config_id -> eval_key``) that has a
        finished result with the same evaluation key: the sweep holding it — ``prefer`` (the sweep being resumed)
        when it has one, else the newest sweep's — and the sweep that evaluated it (``reused_from``, or that same sweep).
        Configs finished before keys were stored (``eval_key`` NULL) never match."""
        if not eval_keys:
            return {}
        wanted = pl.DataFrame({"config_id": list(eval_keys), "eval_key": list(eval_keys.values())})
        with self.connect(read_only=True) as con:
            con.register("wanted", wanted.to_arrow())
            rows = con.execute(
                "SELECT c.config_id, c.sweep_id, COALESCE(c.reused_from, c.sweep_id) FROM configs c JOIN wanted w "
                "USING (config_id, eval_key) JOIN sweeps s USING (sweep_id) WHERE c.status = 'finished' "
                "QUALIFY row_number() OVER (PARTITION BY c.config_id ORDER BY (c.sweep_id = ?) DESC, "
                "s.started_at DESC, c.sweep_id DESC) = 1", [prefer]).fetchall()
        return {c: (s, o) for c, s, o in rows}

    def rejudgeable_configs(self, retrieval_keys: dict[str, str]) -> dict[str, tuple[str, str, int]]:
        """``config_id -> (sweep_id, origin, n_unlabelled)`` of the newest finished result of each config whose
        evaluation key's retrieval part (before ``+``: :func:`ragbench.sweep.evaluate.evaluation_key`) is
        ``retrieval_keys[config_id]``: the same rankings, judged on other labels."""
        if not retrieval_keys:
            return {}
        wanted = pl.DataFrame({"config_id": list(retrieval_keys), "base": list(retrieval_keys.values())})
        with self.connect(read_only=True) as con:
            con.register("wanted", wanted.to_arrow())
            rows = con.execute(
                "SELECT c.config_id, c.sweep_id, COALESCE(c.reused_from, c.sweep_id), c.n_unlabelled FROM configs c "
                "JOIN wanted w ON c.config_id = w.config_id AND split_part(c.eval_key, '+', 1) = w.base "
                "JOIN sweeps s USING (sweep_id) WHERE c.status = 'finished' QUALIFY row_number() OVER "
                "(PARTITION BY c.config_id ORDER BY s.started_at DESC, c.sweep_id DESC) = 1").fetchall()
        return {c: (s, o, n) for c, s, o, n in rows}

    def set_rejudged(self, sweep_id: str, config_id: str, diagnostics: pl.DataFrame, eval_key: str) -> None:
        """After a config's measures were re-judged on new labels: its per-query diagnostics (``query_id,
        first_relevant_rank, category``) replaced, and ``eval_key`` stored (last, so a crash before re-judges
        again)."""
        with self.transaction() as con:
            con.execute("DELETE FROM query_diagnostics WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            con.register("incoming", diagnostics.select("query_id", "first_relevant_rank", "category").to_arrow())
            con.execute("INSERT INTO query_diagnostics (sweep_id, config_id, query_id, first_relevant_rank, category) "
                        "SELECT ?, ?, query_id, first_relevant_rank, category FROM incoming", [sweep_id, config_id])
            con.unregister("incoming")
            con.execute("UPDATE configs SET eval_key = ? WHERE sweep_id = ? AND config_id = ?",
                        [eval_key, sweep_id, config_id])

    def measure_versions(self, sweep_id: str) -> dict[str, dict[str, int]]:
        """``config_id -> {measure: version}`` of the sweep's finished configs: the rank-measure versions their
        results were computed with (empty for results stored before versions: every measure at version 1)."""
        with self.connect(read_only=True) as con:
            rows = con.execute("SELECT config_id, measure_versions FROM configs WHERE sweep_id = ? AND "
                               "status = 'finished'", [sweep_id]).fetchall()
        return {c: json.loads(v) if v else {} for c, v in rows}

    def replace_measures(self, sweep_id: str, config_id: str, per_query: pl.DataFrame, summary: pl.DataFrame,
                         versions: dict[str, int]) -> None:
        """Replace some measures of a stored config in one transaction: the rows of every measure in ``summary``
        (``measure, mean, n, n_unlabelled``) and ``per_query`` (``query_id, query_class, measure, value``) take the
        place of that measure's stored rows, and ``versions`` becomes the config's measure versions."""
        keys = pl.DataFrame({"measure": summary["measure"].unique()}, schema={"measure": pl.String})
        with self.transaction() as con:
            con.register("replaced", keys.to_arrow())
            for table, df in (("query_metrics", per_query), ("config_metrics", summary)):
                con.execute(f"DELETE FROM {table} WHERE sweep_id = ? AND config_id = ? AND measure IN "
                            "(SELECT measure FROM replaced)", [sweep_id, config_id])
                con.register("incoming", df.to_arrow())
                cols = ", ".join(df.columns)
                con.execute(f"INSERT INTO {table} (sweep_id, config_id, {cols}) SELECT ?, ?, {cols} FROM incoming",
                            [sweep_id, config_id])
                con.unregister("incoming")
            con.unregister("replaced")
            con.execute("UPDATE configs SET measure_versions = ? WHERE sweep_id = ? AND config_id = ?",
                        [json.dumps(versions, sort_keys=True), sweep_id, config_id])

    def copy_configs(self, to_sweep: str, sources: dict[str, str]) -> None:
        """Copy each config's rows (every per-config table and its ``configs`` row) from ``sources[config_id]``
        (a sweep id) into ``to_sweep``, replacing any there, in one transaction. ``reused_from`` names the sweep
        that evaluated it (followed through earlier copies); ``mlflow_run_id`` stays that evaluation's run."""
        if not sources:
            return
        wanted = pl.DataFrame({"config_id": list(sources), "from_sweep": list(sources.values()),
                               "position": range(len(sources))})
        with self.transaction() as con:
            con.register("copied", wanted.to_arrow())
            for table in (*PER_CONFIG_TABLES, "configs"):  # set-based: two statements a table, whatever the configs
                con.execute(f"DELETE FROM {table} WHERE sweep_id = ? AND config_id IN (SELECT config_id FROM copied)",
                            [to_sweep])
                extra = ", COALESCE(reused_from, sweep_id) AS reused_from" if table == "configs" else ""
                con.execute(f"INSERT INTO {table} SELECT t.* REPLACE (CAST(? AS VARCHAR) AS sweep_id{extra}) "
                            f"FROM {table} t JOIN copied c ON c.config_id = t.config_id AND c.from_sweep = t.sweep_id "
                            "ORDER BY c.position, t.rowid", [to_sweep])  # in the order of ``sources``, as stored
            con.unregister("copied")

    def copy_k_sweep(self, from_sweep: str, to_sweep: str, config_id: str) -> bool:
        """Copy the k-sweep rows of ``config_id`` from ``from_sweep`` into ``to_sweep`` (replacing its own); False
        when ``from_sweep`` has none for that config."""
        with self.transaction() as con:
            n = con.execute("SELECT count(*) FROM k_sweep WHERE sweep_id = ? AND config_id = ?",
                            [from_sweep, config_id]).fetchall()[0][0]
            if n:
                con.execute("DELETE FROM k_sweep WHERE sweep_id = ?", [to_sweep])
                con.execute("INSERT INTO k_sweep SELECT * REPLACE (CAST(? AS VARCHAR) AS sweep_id) FROM k_sweep "
                            "WHERE sweep_id = ? AND config_id = ?", [to_sweep, from_sweep, config_id])
        return bool(n)

    def write_k_sweep(self, sweep_id: str, config_id: str, table: pl.DataFrame) -> None:
        """Replace the sweep's k-sweep rows (accuracy and recall per context size k) in one transaction."""
        cols = ["k", "n_queries", "accuracy", "em", "f1", "contains", "answer_in_context", "insufficient_rate",
                "mean_chunks", "mean_context_tokens", "recall", "recall_measure"]
        with self.transaction() as con:
            con.execute("DELETE FROM k_sweep WHERE sweep_id = ?", [sweep_id])
            con.register("incoming", table.select(cols).to_arrow())
            con.execute(f"INSERT INTO k_sweep (sweep_id, config_id, {', '.join(cols)}) SELECT ?, ?, "
                        f"{', '.join(cols)} FROM incoming", [sweep_id, config_id])
            con.unregister("incoming")

    def set_config_mlflow_run(self, sweep_id: str, config_id: str, run_id: str) -> None:
        """Remember the config's MLflow run (``sync-mlflow`` uploads the configs that have none)."""
        with self.connect() as con:
            con.execute("UPDATE configs SET mlflow_run_id = ? WHERE sweep_id = ? AND config_id = ?",
                        [run_id, sweep_id, config_id])

    def forget_mlflow_runs(self) -> list[str]:
        """Clear the MLflow run ids of every sweep that had some (its MLflow store was set aside: ``sync-mlflow``
        logs its configs again) and return those sweeps' ids."""
        with self.transaction() as con:
            ids = [r[0] for r in con.execute("SELECT DISTINCT sweep_id FROM configs WHERE mlflow_run_id IS NOT NULL "
                                             "UNION SELECT sweep_id FROM sweeps WHERE mlflow_run_id IS NOT NULL"
                                             ).fetchall()]
            con.execute("UPDATE configs SET mlflow_run_id = NULL WHERE mlflow_run_id IS NOT NULL")
            con.execute("UPDATE sweeps SET mlflow_run_id = NULL WHERE mlflow_run_id IS NOT NULL")
        return sorted(ids)

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

    def measure_means(self, sweep_id: str, measure: str) -> dict[str, float]:
        """``config_id -> mean`` of ``measure`` over the sweep's per-query values, NaN (unlabelled) excluded
        (:func:`~ragbench.evaluation.means.query_mean`: the same bits whatever order the rows come back in)."""
        rows = self.query("SELECT config_id, value FROM query_metrics WHERE sweep_id = ? AND measure = ?",
                          [sweep_id, measure])
        return dict(query_means(rows, "config_id").iter_rows())

    def without_evidence(self, sweep_id: str, config_id: str) -> int | None:
        """The config's count of queries without evidence (the span family's unlabelled count; None: no span
        measure was computed)."""
        rows = self.query("SELECT n_without_evidence FROM configs WHERE sweep_id = ? AND config_id = ?",
                          [sweep_id, config_id])
        return rows["n_without_evidence"][0] if rows.height else None

    def query(self, sql: str, params: list | None = None) -> pl.DataFrame:
        """Run SQL read-only and return a polars DataFrame.

        The escape hatch for people and tests exploring the file; library code uses the named methods.
        """
        with self.connect(read_only=True) as con:
            return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())

    def leaderboard(self, sweep_id: str) -> pl.DataFrame:
        """One row per config of the sweep: status, counts, and each measure's mean as a column.

        Columns ``config_id, name, status, error, n_queries, n_unlabelled, retrieval_ms_per_query, spec_json,
        mlflow_run_id, n_without_evidence`` (the span family's unlabelled count), then one column per stored
        measure (``config_metrics.mean``; null for failed configs).
        This is the one config-level table the report and the promotion gate read.
        """
        configs = self.query("SELECT config_id, name, status, error, n_queries, n_unlabelled, "
                             "retrieval_ms_per_query, spec_json, mlflow_run_id, n_without_evidence FROM configs "
                             "WHERE sweep_id = ?",
                             [sweep_id])
        metrics = self.query("SELECT config_id, measure, mean FROM config_metrics WHERE sweep_id = ?", [sweep_id])
        if metrics.height:
            # "first": a stray duplicate row must not stop the report or the gate (writes replace a config's rows)
            wide = metrics.pivot(on="measure", index="config_id", values="mean", aggregate_function="first")
            configs = configs.join(wide, on="config_id", how="left")
        return configs

    def config(self, sweep_id: str, config_id: str) -> dict | None:
        """The config's row (every column of ``configs``) as a dict, or None."""
        with self.connect(read_only=True) as con:
            cur = con.execute("SELECT * FROM configs WHERE sweep_id = ? AND config_id = ?", [sweep_id, config_id])
            cols = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return dict(zip(cols, rows[0])) if rows else None

    def config_names(self, sweep_id: str) -> dict[str, str]:
        """``config_id -> name`` of every config of the sweep (failed ones included), in stored order."""
        with self.connect(read_only=True) as con:
            return dict(con.execute("SELECT config_id, name FROM configs WHERE sweep_id = ?", [sweep_id]).fetchall())

    def config_status_counts(self, sweep_id: str) -> dict[str, int]:
        """``status -> configs`` of the sweep's stored configs (finished, failed, over_budget, screened_out)."""
        with self.connect(read_only=True) as con:
            return dict(con.execute("SELECT status, count(*) FROM configs WHERE sweep_id = ? GROUP BY status",
                                    [sweep_id]).fetchall())

    def table_counts(self) -> dict[str, int]:
        """Rows per table: reads every table once (a damaged file fails here)."""
        with self.connect(read_only=True) as con:
            tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                                "WHERE table_schema = 'main'").fetchall()]
            return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}

    def pending_mlflow_configs(self, sweep_id: str) -> pl.DataFrame:
        """The sweep's configs with no MLflow run yet (MLflow was down): ``config_id, name, spec_json, status,
        error, n_queries, n_unlabelled, retrieval_ms_per_query``."""
        return self.query("SELECT config_id, name, spec_json, status, error, n_queries, n_unlabelled, "
                          "retrieval_ms_per_query FROM configs WHERE sweep_id = ? AND mlflow_run_id IS NULL",
                          [sweep_id])

    def config_means(self, sweep_id: str, config_id: str) -> dict[str, float]:
        """``measure -> mean`` of one config (``config_metrics``)."""
        with self.connect(read_only=True) as con:
            return dict(con.execute("SELECT measure, mean FROM config_metrics WHERE sweep_id = ? AND config_id = ?",
                                    [sweep_id, config_id]).fetchall())

    def chunk_stats(self, sweep_id: str, config_id: str | None = None) -> pl.DataFrame:
        """``config_id, stat, value`` of the sweep's chunk statistics (of one config when ``config_id`` is given)."""
        return self.query("SELECT config_id, stat, value FROM chunk_stats WHERE sweep_id = ?"
                          + (" AND config_id = ?" if config_id is not None else ""),
                          [sweep_id] + ([config_id] if config_id is not None else []))

    def query_metrics(self, sweep_id: str, config_id: str, query_id: str | None = None) -> pl.DataFrame:
        """``query_id, measure, value, query_class`` of one config: every query in stored order, or one query's
        measures sorted by name."""
        if query_id is None:
            return self.query("SELECT query_id, measure, value, query_class FROM query_metrics WHERE sweep_id = ? "
                              "AND config_id = ?", [sweep_id, config_id])
        return self.query("SELECT query_id, measure, value, query_class FROM query_metrics WHERE sweep_id = ? AND "
                          "config_id = ? AND query_id = ? ORDER BY measure", [sweep_id, config_id, query_id])

    def rankings(self, sweep_id: str, config_id: str, query_id: str | None = None) -> pl.DataFrame:
        """``query_id, rank, chunk_id, doc_id, score`` of one config: every query in stored order, or one query's
        ranking best first."""
        if query_id is None:
            return self.query("SELECT query_id, rank, chunk_id, doc_id, score FROM rankings WHERE sweep_id = ? AND "
                              "config_id = ?", [sweep_id, config_id])
        return self.query("SELECT query_id, rank, chunk_id, doc_id, score FROM rankings WHERE sweep_id = ? AND "
                          "config_id = ? AND query_id = ? ORDER BY rank", [sweep_id, config_id, query_id])

    def measure_values(self, sweep_id: str, config_id: str, measure: str) -> pl.DataFrame:
        """``query_id, value`` of one measure (either spelling) of one config (the promotion gate pairs these by
        query)."""
        return self.query("SELECT query_id, value FROM query_metrics WHERE sweep_id = ? AND config_id = ? AND "
                          "measure = ?", [sweep_id, config_id, measure_key(measure)])

    def per_query_values(self, sweep_id: str, measures: list[str] | None = None) -> pl.DataFrame:
        """``config_id, query_id, query_class, measure, value`` of the sweep's finished configs (of ``measures``
        only, when given, in either spelling): the input of every paired test."""
        sql = ("SELECT q.config_id, q.query_id, q.query_class, q.measure, q.value FROM query_metrics q JOIN configs c "
               "USING (sweep_id, config_id) WHERE q.sweep_id = ? AND c.status = 'finished'")
        if measures is None:
            return self.query(sql, [sweep_id])
        return self.query(sql + " AND list_contains(?, q.measure)", [sweep_id, [measure_key(m) for m in measures]])
