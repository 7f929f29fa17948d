"""The connection side of the results file: short-lived DuckDB connections that wait for another process.

DuckDB allows one writing process per file and blocks even readers while it is held, so every statement of the
store runs on a connection opened for one short transaction, retried with backoff while another process holds the
file (who holds it is named from DuckDB's lock error and ``/proc``). The first connection that may write creates
the tables and migrates old files (:mod:`ragbench.results.store_schema`, then the stored values:
:mod:`ragbench.results.store_migrations`). A :meth:`StoreConnection.reading` block shares one connection between its
reads.
"""

from __future__ import annotations

import copy
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Self

import duckdb

from ragbench.core.errors import StoreBusyError, StoreDamagedError
from ragbench.core.progress import log
from ragbench.results.store_migrations import migrate_values
from ragbench.results.store_schema import MEASURE_KEY_MIGRATION, SCHEMA

#: what a failing disk or volume raises through the store: reported as a storage error, with its cause
STORAGE_ERRORS = (OSError, duckdb.Error)
#: what DuckDB says of a file it cannot read back: a broken header, a failed block checksum, a cut-off file
DAMAGE = re.compile(r"not a valid DuckDB database|Corrupt database file|does not match stored checksum|"
                    r"Could not read enough bytes|database file .* is (corrupt|truncated)", re.I)


def damage_of(e: BaseException) -> str | None:
    """The first line of a DuckDB error that says the file is damaged, else None (a lock, a full disk, SQL)."""
    if isinstance(e, duckdb.Error) and DAMAGE.search(str(e)):
        return str(e).strip().splitlines()[0][:200]
    return None


def _sqlite_reader(path: Path):
    """A connection that only reads the SQLite file ``path``, opened read-write all the same (never creating it): a
    writer killed mid-transaction leaves a hot journal that the next connection must roll back, and a read-only one
    cannot (``attempt to write a readonly database``: no damage, and MLflow opens the file fine)."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30)


def sqlite_damage(path: Path, thorough: bool = False) -> str | None:
    """Why the SQLite file ``path`` (the MLflow store) cannot be read (``file is not a database``, ``database disk
    image is malformed``), or None when it reads (or does not exist yet). ``thorough`` runs ``PRAGMA quick_check`` over
    every page (``ragbench doctor``); otherwise only the header and the schema are read (milliseconds). Here
    because every statement of the package lives in the store's modules."""
    if not path.is_file():
        return None
    try:
        with closing(_sqlite_reader(path)) as con:
            con.execute("SELECT count(*) FROM sqlite_master").fetchall()
            if thorough:
                verdict = con.execute("PRAGMA quick_check").fetchall()
                if verdict and verdict[0][0] != "ok":
                    return f"quick_check: {verdict[0][0]}"[:200]
    except sqlite3.OperationalError as e:  # locked or busy: not damage
        return None if "locked" in str(e) or "busy" in str(e) else str(e).splitlines()[0][:200]
    except sqlite3.DatabaseError as e:
        return str(e).splitlines()[0][:200]
    return None


def active_mlflow_children(path: Path, parent_run: str, config_tag: str) -> set[str] | None:
    """The ``config_tag`` values of the active child runs of ``parent_run`` in the SQLite MLflow store ``path``,
    when the parent is an active run of an active experiment (nothing deleted in MLflow's UI or API, nor purged by
    ``mlflow gc``); the empty set when it is not; None when the store cannot be read."""
    try:
        with closing(_sqlite_reader(path)) as con:
            rows = con.execute(
                "SELECT c.value FROM runs parent JOIN experiments e USING (experiment_id) "
                "JOIN tags p ON p.key = 'mlflow.parentRunId' AND p.value = parent.run_uuid "
                "JOIN runs child ON child.run_uuid = p.run_uuid "
                "JOIN tags c ON c.run_uuid = child.run_uuid AND c.key = ? "
                "WHERE parent.run_uuid = ? AND parent.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active' "
                "AND child.lifecycle_stage = 'active'", (config_tag, parent_run)).fetchall()
    except sqlite3.Error:
        return None
    return {r[0] for r in rows}


def restamp_mlflow_default_experiment(path: Path, artifact_location: str, now_ms: int) -> None:
    """Set MLflow's Default experiment (id 0) in the SQLite store ``path`` to ``artifact_location``, created at
    ``now_ms``: a store copied from a template (:mod:`ragbench.results.mlflow_seed`) then reads as MLflow would have
    made it in this process. Raises ``sqlite3.Error`` when ``path`` is no MLflow store."""
    with closing(sqlite3.connect(path)) as con, con:
        con.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                    "WHERE experiment_id = 0", (artifact_location, now_ms, now_ms))


def _lock_holder(message: str) -> str:
    """``pid N (command)`` from DuckDB's lock error (``... Conflicting lock is held in <exe> (PID N) ...``); the
    command line comes from ``/proc`` when the process is visible, else the executable DuckDB names."""
    m = re.search(r"held in (.*?) \(PID (\d+)\)", message)
    if not m:
        return "pid unknown"
    exe, pid = m.group(1), m.group(2)
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    cmd = " ".join((cmd or exe).split())  # one line, whatever the command held
    return f"pid {pid} ({cmd[:120]}{'…' if len(cmd) > 120 else ''})"


def check_results_file(path: Path) -> None:
    """Raise :class:`StoreDamagedError` when the results file exists but cannot be opened (one try: a file
    another process holds passes; the store then waits or spools as usual)."""
    if Path(path).is_file():
        StoreConnection(path, 0.0, busy_ok=True)


class StoreConnection:
    """Opens the DuckDB results file for each short transaction; the base of
    :class:`ragbench.results.store.ResultStore`."""

    def __init__(self, path: Path, wait_seconds: float = 600.0, *, busy_ok: bool = False):
        """Open (and create or migrate) the file. ``wait_seconds``: how long each connection waits for another
        process holding the file. ``busy_ok``: when the file stays busy, open anyway and create or migrate the
        schema with the first write that gets through (a sweep then spools its results meanwhile)."""
        self.path = Path(path)
        self.wait_seconds = wait_seconds
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._schema_ready = False
        self._reader = threading.local()  # the connection a reading() block shares, per thread
        try:
            with self.connect():
                pass
        except StoreBusyError:
            if not busy_ok:
                raise

    def with_wait(self, wait_seconds: float) -> Self:
        """The same store whose connections wait at most ``wait_seconds`` for another process (0: try once)."""
        other = copy.copy(self)
        other.wait_seconds = wait_seconds
        return other

    @contextmanager
    def connect(self, read_only: bool = False, wait_seconds: float | None = None
                ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A short-lived connection; waits (with backoff) up to ``wait_seconds`` (default: the store's) while
        another process holds the file, saying so after 2 s, then raises :class:`StoreBusyError` naming it."""
        shared = getattr(self._reader, "con", None)
        if shared is not None:  # inside reading(): its connection serves every statement of this thread
            yield shared
            return
        wait = self.wait_seconds if wait_seconds is None else wait_seconds
        start, delay, told = time.monotonic(), 0.05, False
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=read_only and self.path.exists())
                break
            except duckdb.Error as e:
                if (cause := damage_of(e)) is not None:
                    raise StoreDamagedError(self.path, cause) from None
                if not isinstance(e, duckdb.IOException) or "lock" not in str(e).lower():
                    raise
                holder = _lock_holder(str(e))
                waited = time.monotonic() - start
                if waited >= wait:
                    raise StoreBusyError(f"{self.path} is held by another process ({holder}) for more than "
                                         f"{wait:.0f} s; close it (a notebook or `duckdb` shell holding the file "
                                         "blocks writers) and run again: finished work is kept",
                                         holder=holder) from None
                if not told and waited > 2:
                    log.warning("%s is held by another process (%s): waiting up to %.0f s for it to close the "
                                "file", self.path, holder, wait)
                    told = True
                time.sleep(min(delay, max(wait - waited, 0.01)))
                delay = min(delay * 2, 2.0)
        try:
            if not self._schema_ready and not (read_only and self.path.exists()):
                con.execute(SCHEMA)
                con.execute(MEASURE_KEY_MIGRATION)
                migrate_values(con)
                self._schema_ready = True
            yield con
        except duckdb.Error as e:  # a block that fails its checksum is found when a statement reads it
            if (cause := damage_of(e)) is not None:
                raise StoreDamagedError(self.path, cause) from None
            raise
        finally:
            con.close()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A block whose statements (in this thread) share one connection: a report's dozen reads open the file
        once, not a dozen times (~8 ms each). Other processes wait for the block to end; keep it short."""
        if getattr(self._reader, "con", None) is not None:  # nested: the outer block's connection
            yield
            return
        with self.connect() as con:
            self._reader.con = con
            try:
                yield
            finally:
                self._reader.con = None

    @contextmanager
    def transaction(self, wait_seconds: float | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection inside one transaction: committed when the block ends, rolled back when it raises. The
        block's own error is what propagates (a full disk also ends the transaction, and a failing ROLLBACK must
        not hide why). ``wait_seconds`` as in :meth:`connect`."""
        with self.connect(wait_seconds=wait_seconds) as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass
                raise
