"""The spool: where a sweep keeps what it finished while another process holds ``results.duckdb``.

DuckDB lets one process write a file, and a notebook holding it open (even read-only) shuts every writer out. A
sweep does not wait for it: each finished config goes to ``<home>/spool/<sweep id>/<config id>/`` (its tables as
Parquet files and a ``manifest.json`` with its scalar fields and the SHA-256 of every file and of the manifest
itself), written into a temporary folder, fsynced and renamed into place, so an entry is complete or absent. What
the sweep itself would have written to ``sweeps`` (its start, its MLflow parent run, its final status) waits in
``sweep.json`` beside them.

Entries are merged when the file frees — before each later write of the sweep, at its end (with a bounded wait),
when the next sweep opens the store, and by ``ragbench doctor --repair`` — through the same calls a direct write
uses (:func:`ragbench.results.record.record`: DuckDB in one transaction that replaces the config's rows, then
MLflow), and an entry is deleted only after its transaction committed: an interrupted merge is repeated, never
doubled. An entry whose checksum does not match is moved to ``spool/.quarantine/`` with a warning and not merged;
its config is not in DuckDB, so the next sweep evaluates it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import ResultsSpooledError, StoreBusyError
from ragbench.core.hashing import file_sha256
from ragbench.core.locks import LockBusyError, file_lock
from ragbench.core.paths import within
from ragbench.core.progress import log
from ragbench.core.redact import redact, redact_obj
from ragbench.results.outcomes import ConfigFailure, ConfigResult
from ragbench.results.record import record, record_failure
from ragbench.results.store import ResultStore

SPOOL_FORMAT = 1
MANIFEST = "manifest.json"
SWEEP_STATE = "sweep.json"
#: the optional tables of a ConfigResult, by field
OPTIONAL_TABLES = ("diagnostics", "ann", "answers")


class SpoolDamaged(Exception):
    """A spool entry whose manifest or files do not match their checksums."""


@dataclass(frozen=True)
class SpoolEntry:
    path: Path
    sweep_id: str

    @property
    def name(self) -> str:
        return self.path.name


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True).encode()


def _write_json(path: Path, obj: dict) -> None:
    """Write ``obj`` atomically: a temporary file in the same folder, fsynced, renamed over ``path``."""
    write_text_atomically(path, json.dumps(obj, sort_keys=True, indent=1), durable=True)
    _fsync(path.parent)


class Spool:
    """The spool folder of a home (``<home>/spool``). Writers and mergers of one sweep's spool take its lock
    (``<home>/locks/spool-<sweep id>.lock``), so a merge never reads an entry being written."""

    def __init__(self, home: Path):
        self.home = Path(home)
        self.root = self.home / "spool"
        self.quarantine_root = self.root / ".quarantine"
        self.quarantined: list[Path] = []  # where this instance moved damaged entries

    def _lock(self, sweep_id: str, wait_seconds: float = 300.0):
        return file_lock(within(self.home / "locks", f"spool-{sweep_id}.lock", what="a spool lock"),
                         f"the spool of sweep {sweep_id}", wait_seconds=wait_seconds)

    def folder(self, sweep_id: str) -> Path:
        """``<home>/spool/<sweep id>``, refused (:class:`~ragbench.core.paths.PathEscapeError`) if the id would
        lead outside the spool (new sweep ids are slugs; this guards ids stored before they were)."""
        return within(self.root, sweep_id, what="the spool folder")

    def relative(self, path: Path) -> str:
        """``spool/<sweep id>/<entry>``: how log lines name a spool path."""
        return str(Path(path).relative_to(self.home))

    # ------------------------------------------------------------ reading the folder
    def sweep_ids(self) -> list[str]:
        """Sweeps with something in the spool."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def state(self, sweep_id: str) -> dict:
        """The sweep's pending ``sweeps`` writes (``begin``, ``mlflow_run_id``, ``status``, ``experiment``)."""
        path = self.folder(sweep_id) / SWEEP_STATE
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:  # written atomically: only a damaged disk gets here
            log.warning("spool: %s cannot be read (%s); the sweep's own row is left as DuckDB has it",
                        self.relative(path), e)
            return {}

    def entries(self, sweep_id: str) -> list[SpoolEntry]:
        """The sweep's complete entries, oldest first (a later entry of the same config replaces an earlier one)."""
        try:
            listing = list((self.folder(sweep_id)).iterdir())
        except (FileNotFoundError, NotADirectoryError):  # nothing spooled, or merged and removed meanwhile
            return []
        found: list[tuple[int, str, Path]] = []
        for p in listing:
            try:  # another process may merge (move) it meanwhile: then it is not pending any more
                if p.is_dir() and not p.name.startswith("."):
                    found.append((p.stat().st_mtime_ns, p.name, p))
            except FileNotFoundError:
                continue
        return [SpoolEntry(p, sweep_id) for _, _, p in sorted(found)]

    def pending(self, sweep_id: str) -> bool:
        """Whether the sweep has anything waiting to be merged."""
        return bool(self.entries(sweep_id)) or (self.folder(sweep_id) / SWEEP_STATE).is_file()

    def count(self) -> int:
        """Entries waiting in the whole spool."""
        return sum(len(self.entries(s)) for s in self.sweep_ids())

    # ------------------------------------------------------------ writing
    def update_state(self, sweep_id: str, **fields) -> Path:
        """Add ``fields`` to the sweep's pending ``sweeps`` writes (atomically); returns the file."""
        folder = self.folder(sweep_id)
        with self._lock(sweep_id):
            folder.mkdir(parents=True, exist_ok=True)
            _write_json(folder / SWEEP_STATE, {**self.state(sweep_id), **fields})
        return folder / SWEEP_STATE

    def put_result(self, sweep_id: str, result: ConfigResult) -> Path:
        """Spool a finished config: every table of ``result`` as Parquet, its scalar fields in the manifest."""
        tables = {"measures": result.measures, "rankings": result.rankings}
        tables |= {f: getattr(result, f) for f in OPTIONAL_TABLES if getattr(result, f) is not None}
        tables |= {f"artifact:{name}": df for name, df in result.artifacts.items()}
        fields = {"config_id": result.config_id, "name": result.name, "spec": result.spec,
                  "dataset_fingerprint": result.dataset_fingerprint, "n_queries": result.n_queries,
                  "n_unlabelled": result.n_unlabelled, "ms_per_query": result.ms_per_query,
                  "chunk_stats": result.chunk_stats, "eval_key": result.eval_key,
                  "measure_versions": result.measure_versions}
        return self._put(sweep_id, result.config_id, "result", fields, tables)

    def put_failure(self, sweep_id: str, config_id: str, name: str, spec: dict, dataset_fingerprint: str,
                    error: str) -> Path:
        """Spool a failed config (its error, credentials masked)."""
        fields = {"config_id": config_id, "name": name, "spec": redact_obj(spec),
                  "dataset_fingerprint": dataset_fingerprint, "error": redact(error)}
        return self._put(sweep_id, config_id, "failure", fields, {})

    def put_k_sweep(self, sweep_id: str, config_id: str, table: pl.DataFrame) -> Path:
        """Spool the sweep's k-sweep table (of its best config)."""
        return self._put(sweep_id, f"k_sweep-{config_id}", "k_sweep", {"config_id": config_id}, {"k_sweep": table})

    def put_screening(self, sweep_id: str, table: pl.DataFrame) -> Path:
        """Spool the screened sweep's screen rows (:mod:`ragbench.results.store_screening`)."""
        return self._put(sweep_id, "screening", "screening", {}, {"screening": table})

    def _put(self, sweep_id: str, name: str, kind: str, fields: dict, tables: dict[str, pl.DataFrame]) -> Path:
        folder = self.folder(sweep_id)
        with self._lock(sweep_id):
            folder.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=folder))
            files = {}
            for i, (key, df) in enumerate(tables.items()):
                path = tmp / f"{i}.parquet"
                df.write_parquet(path)
                _fsync(path)
                files[key] = {"file": path.name, "sha256": file_sha256(path)}
            body = {"format": SPOOL_FORMAT, "kind": kind, "sweep_id": sweep_id, "fields": fields, "tables": files,
                    "written_at": datetime.now(timezone.utc).isoformat()}
            _write_json(tmp / MANIFEST, {"sha256": hashlib.sha256(_canonical(body)).hexdigest(), "body": body})
            final = folder / name
            if final.exists():  # the same config spooled again in this sweep: the newer entry sorts after it
                final = folder / f"{name}~{time.time_ns()}"
            os.rename(tmp, final)
            _fsync(folder)
        return final

    # ------------------------------------------------------------ loading
    def load(self, entry: SpoolEntry) -> tuple[str, dict, dict[str, pl.DataFrame]]:
        """``(kind, fields, tables)`` of an entry, every checksum verified; raises :class:`SpoolDamaged`."""
        try:
            manifest = json.loads((entry.path / MANIFEST).read_text())
            body = manifest["body"]
            if hashlib.sha256(_canonical(body)).hexdigest() != manifest["sha256"]:
                raise SpoolDamaged("manifest checksum mismatch")
            tables = {}
            for key, meta in body["tables"].items():
                path = entry.path / meta["file"]
                if file_sha256(path) != meta["sha256"]:
                    raise SpoolDamaged(f"{meta['file']} ({key}): checksum mismatch")
                tables[key] = pl.read_parquet(path)
            return body["kind"], body["fields"], tables
        except SpoolDamaged:
            raise
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SpoolDamaged(f"unreadable: {str(e).splitlines()[0][:160] if str(e) else type(e).__name__}"
                               ) from None

    @staticmethod
    def config_result(fields: dict, tables: dict[str, pl.DataFrame]) -> ConfigResult:
        """The :class:`ConfigResult` a result entry holds (the inverse of :meth:`put_result`)."""
        return ConfigResult(
            fields["config_id"], fields["name"], fields["spec"], fields["dataset_fingerprint"], tables["measures"],
            tables["rankings"], fields["n_queries"], fields["n_unlabelled"], fields["ms_per_query"],
            chunk_stats=fields["chunk_stats"], **{f: tables.get(f) for f in OPTIONAL_TABLES},
            artifacts={k.removeprefix("artifact:"): v for k, v in tables.items() if k.startswith("artifact:")},
            eval_key=fields["eval_key"], measure_versions=fields.get("measure_versions"))

    def quarantine(self, entry: SpoolEntry, why: str) -> Path:
        """Move a damaged entry to ``spool/.quarantine/<sweep id>/`` and say so; its config is evaluated again."""
        target = (within(self.quarantine_root, entry.sweep_id, what="the spool quarantine")
                  / f"{entry.name}-{time.time_ns()}")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(entry.path, target)
        self.quarantined.append(target)
        log.warning("spool: %s is damaged (%s): moved to %s and not merged; the next sweep evaluates that config "
                    "again", self.relative(entry.path), why, self.relative(target))
        return target

    # ------------------------------------------------------------ merging
    def merge(self, store: ResultStore, sweep_id: str, tracker=None, parent_run: str | None = None) -> int:
        """Merge the sweep's spool into ``store``: its ``sweeps`` row, then every entry in one transaction each
        (then MLflow, when ``tracker`` and ``parent_run`` are given), deleting each entry only after its commit,
        then the sweep's final status. Returns the entries merged; raises :class:`StoreBusyError` (with what is
        left still spooled) when the file is held, :class:`LockBusyError` when another process is merging."""
        merged = 0
        with self._lock(sweep_id, wait_seconds=0):
            state = self.state(sweep_id)
            if state.get("begin"):
                store.begin_sweep(**state["begin"])
            if state.get("mlflow_run_id"):
                store.set_sweep_mlflow_run(sweep_id, state["mlflow_run_id"])
            for entry in self.entries(sweep_id):
                try:
                    kind, fields, tables = self.load(entry)
                except SpoolDamaged as e:
                    self.quarantine(entry, str(e))
                    continue
                if kind == "result":
                    record(self.config_result(fields, tables), sweep_id, store, tracker, parent_run)
                elif kind == "failure":
                    failure = ConfigFailure(fields["config_id"], fields["name"], fields["spec"],
                                            fields["dataset_fingerprint"], fields["error"])
                    record_failure(failure, sweep_id, store, tracker, parent_run)
                elif kind == "screening":
                    store.write_screening(sweep_id, tables["screening"])
                else:
                    store.write_k_sweep(sweep_id, fields["config_id"], tables["k_sweep"])
                # committed: only now may the spooled copy go (renamed first, so a kill mid-delete leaves no
                # half entry that would look damaged)
                gone = entry.path.with_name(f".merged-{entry.name}")
                os.rename(entry.path, gone)
                shutil.rmtree(gone)
                merged += 1
            if state.get("status"):
                store.finish_sweep(sweep_id, state["status"])
            (self.folder(sweep_id) / SWEEP_STATE).unlink(missing_ok=True)
            # no write is in progress while we hold the lock: these are from writes or merges that were killed
            for leftover in (self.folder(sweep_id)).glob(".*"):
                shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
            try:
                (self.folder(sweep_id)).rmdir()
            except OSError:  # something was spooled meanwhile
                pass
        if merged:
            log.info("spool: merged %d spooled result(s) of sweep %s into %s", merged, sweep_id, store.path.name)
        return merged


@dataclass(frozen=True)
class SpoolMerge:
    """What :func:`merge_spool` did: entries merged, damaged ones moved aside, and who holds the file when some
    could not be merged (None when the spool is empty now)."""

    merged: int
    quarantined: list[Path]
    holder: str | None


def merge_spool(settings, store: ResultStore) -> SpoolMerge:
    """Merge every sweep's spool of the home into ``store`` (the next sweep and ``ragbench doctor --repair`` call
    this before anything else), logging to MLflow the results of sweeps that had it on."""
    from ragbench.results.tracking import open_tracker

    spool, merged, holder = Spool(settings.home), 0, None
    for sweep_id in spool.sweep_ids():
        state = spool.state(sweep_id)
        tracker = None
        if state.get("experiment") and state.get("mlflow_run_id") and spool.entries(sweep_id):
            tracker = open_tracker(settings, state["experiment"])
        try:
            merged += spool.merge(store, sweep_id, tracker, state.get("mlflow_run_id"))
        except StoreBusyError as e:
            holder = e.holder
            break
        except LockBusyError:  # another process is merging it
            continue
    return SpoolMerge(merged, spool.quarantined, holder)


class SweepWriter:
    """Writes one sweep's rows: straight to DuckDB while it can, to the spool while another process holds the
    file. Before each write the spool of the sweep is merged if the file has freed, so rows keep their order of
    arrival and nothing waits longer than it must. ``tracker``/``parent_run`` are set once MLflow is open."""

    def __init__(self, store: ResultStore, spool: Spool, sweep_id: str):
        self.store, self.spool, self.sweep_id = store, spool, sweep_id
        self.tracker = None
        self.parent_run: str | None = None

    def _drain(self, wait_seconds: float = 0.0) -> str | None:
        """Merge this sweep's spool if the file is free now; None when nothing is left, else who holds the file."""
        if not self.spool.pending(self.sweep_id):
            return None
        try:
            self.spool.merge(self.store.with_wait(wait_seconds), self.sweep_id, self.tracker, self.parent_run)
        except StoreBusyError as e:
            return e.holder
        except LockBusyError:
            return "another process merging the spool"
        return None

    def _write(self, direct: Callable[[], object], spooled: Callable[[], Path], what: str = "",
               they: str = "they are") -> bool:
        """``direct()`` when the spool is empty and the file can be written, else ``spooled()``; True when direct."""
        holder = self._drain()
        if holder is None:
            try:
                direct()
                return True
            except StoreBusyError as e:
                holder = e.holder
        path = spooled()
        if what:
            log.warning("results.duckdb is held by %s; %s kept in %s; %s merged when it frees", holder, what,
                        self.spool.relative(path), they)
        return False

    def begin_sweep(self, **begin) -> None:
        """``ResultStore.begin_sweep`` (same arguments), or its row kept in the spool."""
        kept = {**begin, "spec": redact_obj(begin["spec"])}  # credentials never reach the spool either
        self._write(lambda: self.store.begin_sweep(**begin), lambda: self.spool.update_state(
            self.sweep_id, begin=kept, experiment=begin.get("experiment")), f"the start of sweep {self.sweep_id} is",
            "it is")

    def set_sweep_mlflow_run(self, run_id: str) -> None:
        self.parent_run = run_id
        self._write(lambda: self.store.set_sweep_mlflow_run(self.sweep_id, run_id),
                    lambda: self.spool.update_state(self.sweep_id, mlflow_run_id=run_id))

    def record(self, result: ConfigResult) -> None:
        """:func:`~ragbench.results.record.record` the config, or spool it (MLflow follows the merge)."""
        self._write(lambda: record(result, self.sweep_id, self.store, self.tracker, self.parent_run),
                    lambda: self.spool.put_result(self.sweep_id, result), f"results of config {result.label} are")

    def write_screening(self, table: pl.DataFrame) -> None:
        """The screen's rows (``ResultStore.write_screening``), or kept in the spool."""
        self._write(lambda: self.store.write_screening(self.sweep_id, table),
                    lambda: self.spool.put_screening(self.sweep_id, table), "the screen's rows are", "they are")

    def stored_screening(self) -> pl.DataFrame | None:
        """This sweep's screen rows as an earlier run of it stored them (a resumed sweep), or None (none stored, or
        the file is held by another process)."""
        try:
            return self.store.screening(self.sweep_id)
        except StoreBusyError:
            return None

    def record_failure(self, config_id: str, name: str, spec: dict, dataset_fingerprint: str, error: str) -> None:
        failure = ConfigFailure(config_id, name, spec, dataset_fingerprint, error)
        self._write(lambda: record_failure(failure, self.sweep_id, self.store, self.tracker, self.parent_run),
                    lambda: self.spool.put_failure(self.sweep_id, config_id, name, spec, dataset_fingerprint, error),
                    f"the failure of config {name} is", "it is")

    def write_k_sweep(self, config_id: str, table: pl.DataFrame) -> None:
        self._write(lambda: self.store.write_k_sweep(self.sweep_id, config_id, table),
                    lambda: self.spool.put_k_sweep(self.sweep_id, config_id, table), "the k sweep is", "it is")

    def finish(self, status: str, wait_seconds: float) -> None:
        """Set the sweep's final status, merging its spool first; waits up to ``wait_seconds`` for the file, saying
        for what, then raises :class:`ResultsSpooledError` (the results stay safe in the spool)."""
        if self._write(lambda: self.store.finish_sweep(self.sweep_id, status),
                       lambda: self.spool.update_state(self.sweep_id, status=status)):
            return
        n = len(self.spool.entries(self.sweep_id))
        holder = self._drain()
        if holder is not None and wait_seconds > 0:
            log.warning("sweep %s: waiting up to %.0f s for %s to close results.duckdb, to merge the %d result(s) "
                        "kept in %s", self.sweep_id, wait_seconds, holder, n,
                        self.spool.relative(self.spool.root / self.sweep_id))
            deadline = time.monotonic() + wait_seconds
            while holder is not None and time.monotonic() < deadline:
                time.sleep(min(1.0, max(deadline - time.monotonic(), 0.0)))
                holder = self._drain()
        if holder is None:
            return
        raise ResultsSpooledError(
            f"results.duckdb is still held by {holder}: the {n} result(s) of sweep {self.sweep_id} are safe in "
            f"{self.spool.root / self.sweep_id}; close that process, then the next `ragbench sweep` (this one or any "
            "other) or `ragbench doctor --repair` merges them", holder=holder)
