"""``ragbench doctor``: check a whole home — caches, Qdrant collections, the DuckDB results, the MLflow store — and,
with ``repair``, set aside what is damaged so that the next sweep recomputes it.

What is checked:

* every chunk table, vector segment and converted document against the SHA-256 in its name (and its columns);
* every embedded Qdrant collection: complete (its marker), the point count, and a seeded sample of stored vectors
  equal to the cached vectors of the same chunks; an incomplete or damaged collection is deleted by ``repair``
  (the next sweep that needs it rebuilds it from the vector cache);
* the DuckDB file opens and every table reads; configs that never reached MLflow are counted
  (``ragbench sync-mlflow`` uploads them); results a sweep kept in the spool while the file was busy
  (:mod:`ragbench.results.spool`) are counted and checked, and ``repair`` merges them (a damaged one is
  quarantined);
* the MLflow store answers (a local ``mlflow.db`` is read page by page).

A damaged ``results.duckdb`` or ``mlflow.db`` (a broken header, a failed checksum) is, with ``repair``, set aside
(renamed ``<name>.damaged-<UTC time>``, never deleted) and replaced by a new one refilled from what survives
(:mod:`ragbench.results.recover`): DuckDB from the MLflow runs and the spool, MLflow from DuckDB. What could not
be recovered is listed in :attr:`DoctorReport.lost`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ragbench.core.cache import ChunkCache, DocumentCache, PlotCache, StatsCache, VectorCache
from ragbench.core.hashing import text_hash
from ragbench.core.schemas import index_texts
from ragbench.core.settings import Settings
from ragbench.index.build import matches_cache
from ragbench.index.qdrant import EdgeIndex


@dataclass(frozen=True)
class Finding:
    component: str  # cache | collections | results | mlflow
    item: str
    problem: str
    action: str  # what repair did, or what to do


@dataclass
class DoctorReport:
    """What was checked (counts), what was found (and done), and what a repair could not recover."""

    checked: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """No problem left (repaired ones included as fixed)."""
        return all(f.action.startswith(("quarantined", "deleted", "set aside")) for f in self.findings)


REPAIR = "run `ragbench doctor --repair` (sets it aside, renamed, and rebuilds it from what survives)"


def _rebuild_results(settings: Settings, path: Path, cause: str, report: DoctorReport):
    """Set the damaged results file aside and refill a new one from the MLflow runs (the spool follows)."""
    from ragbench.results.recover import refill_from_mlflow, set_aside
    from ragbench.results.store import ResultStore
    from ragbench.results.store_connection import sqlite_damage
    from ragbench.results.tracking import default_tracking_uri, sqlite_store_path

    aside = set_aside(path)
    store = ResultStore(path, settings.results_busy_wait_s)
    uri = default_tracking_uri(settings)
    mlflow_file = sqlite_store_path(uri)
    if mlflow_file is not None and (not mlflow_file.is_file() or sqlite_damage(mlflow_file, thorough=True)):
        got, source = None, "nothing from MLflow (no readable mlflow.db)"
        report.lost.append("every result that was only in results.duckdb: rerun the sweeps (caches make it cheap)")
    else:
        try:
            got = refill_from_mlflow(uri, store)
            source = f"{got.sweeps} sweep(s) and {got.configs} config(s) from the MLflow runs"
            report.lost.extend(got.lost)
        except Exception as e:
            got, source = None, f"nothing from MLflow ({str(e).splitlines()[0][:160]})"
            report.lost.append("every result that was only in results.duckdb: rerun the sweeps")
    report.findings.append(Finding("results", str(path), f"damaged: {cause}",
                                   f"set aside as {aside.name}; a new one refilled with {source}"))
    return store


def _rebuild_mlflow(settings: Settings, path: Path, cause: str, report: DoctorReport) -> None:
    """Set the damaged MLflow store aside and log every sweep of DuckDB into a new one (``sync-mlflow``)."""
    from ragbench.results.recover import set_aside
    from ragbench.results.store import ResultStore
    from ragbench.results.sync import sync_mlflow

    aside = set_aside(path)
    db = Path(settings.home) / "results.duckdb"
    done = "a new one"
    try:
        if db.is_file():
            store = ResultStore(db, settings.results_busy_wait_s)
            sweeps = store.forget_mlflow_runs()
            n = sum(sync_mlflow(settings, sid) for sid in sweeps)
            done = f"a new one refilled from results.duckdb: {n} config run(s) of {len(sweeps)} sweep(s)"
    except Exception as e:  # DuckDB damaged too or busy: the new store stays empty; sync-mlflow refills it later
        done = f"a new, empty one ({str(e).splitlines()[0][:160]}; `ragbench sync-mlflow` refills it later)"
    report.findings.append(Finding("mlflow", str(path), f"damaged: {cause}", f"set aside as {aside.name}; {done}"))
    report.lost.append("the MLflow model registry (promoted versions, alias production) and the report artifacts "
                       "of parent runs: promote again; reports stay in <home>/reports")


def _cache(settings: Settings, repair: bool, report: DoctorReport) -> None:
    root = Path(settings.home) / "cache"
    for what, cache in (("chunk tables", ChunkCache(root)), ("vector segments", VectorCache(root)),
                        ("converted documents", DocumentCache(root)), ("report plots", PlotCache(root)),
                        ("report statistics", StatsCache(root))):
        n, damaged = cache.verify(repair=repair)
        report.checked[what] = n
        for path, why in damaged.items():
            report.findings.append(Finding("cache", str(path), why, "quarantined; recomputed by the next sweep"
                                           if repair else "run `ragbench doctor --repair`"))


def _collections(settings: Settings, repair: bool, report: DoctorReport) -> None:
    if settings.qdrant_url:  # a server checks its own storage
        report.checked["collections"] = 0
        return
    index, root = EdgeIndex(settings.home), Path(settings.home) / "cache"
    chunks_cache, vectors = ChunkCache(root), VectorCache(root, quarantine=repair)
    names = index.names()
    report.checked["collections"] = len(names)
    for name in names:
        meta = index.meta(name)
        problem = "incomplete (a build was interrupted)" if meta is None else None
        if problem is None and meta.chunks_key:
            chunks = chunks_cache.peek(meta.chunks_key)
            if chunks is not None:
                hashes = [text_hash(meta.document_prompt + t) for t in index_texts(chunks)]
                try:
                    problem = matches_cache(index, name, hashes, vectors, meta.model_key, meta.distance)
                except KeyError:  # its cached vectors are gone or damaged: it cannot be vouched for, only counted
                    problem = None
                except Exception as e:
                    problem = f"cannot be read ({str(e).splitlines()[0][:160]})"
        if problem:
            if repair:
                index.drop(name)
            report.findings.append(Finding("collections", name, problem, "deleted; rebuilt by the next sweep"
                                           if repair else "run `ragbench doctor --repair`"))
    index.close()


def _results(settings: Settings, repair: bool, report: DoctorReport) -> None:
    from ragbench.core.errors import StoreBusyError, StoreDamagedError
    from ragbench.results.spool import Spool, SpoolDamaged, merge_spool
    from ragbench.results.store import ResultStore

    path, spool = Path(settings.home) / "results.duckdb", Spool(settings.home)
    spooled = spool.count()
    report.checked["spooled results"] = spooled
    if not path.is_file() and not spooled:
        report.checked["result tables"] = 0
        return
    try:
        store = ResultStore(path, settings.results_busy_wait_s)
        counts = store.table_counts()
    except StoreDamagedError as e:
        if not repair:
            report.findings.append(Finding("results", str(path), f"damaged: {e.cause}", REPAIR))
            return
        store = _rebuild_results(settings, path, e.cause, report)
        counts = store.table_counts()
    except StoreBusyError as e:
        report.findings.append(Finding("results", str(path), f"held by {e.holder}"
                                       + (f"; {spooled} result(s) wait in {spool.root}" if spooled else ""),
                                       "close that process, then run `ragbench doctor --repair`"))
        return
    except Exception as e:
        report.findings.append(Finding("results", str(path), f"cannot be read: {str(e).splitlines()[0][:200]}",
                                       "move the file aside; rerun the sweeps (caches make it cheap)"))
        return
    report.checked["result tables"] = len(counts)
    if spooled and repair:
        done = merge_spool(settings, store.with_wait(0))
        for q in done.quarantined:
            report.findings.append(Finding("results", str(q), "damaged spooled result (checksum mismatch)",
                                           "quarantined; the next sweep evaluates that config again"))
        left = spool.count()
        if left:
            report.findings.append(Finding("results", str(spool.root), f"{left} spooled result(s) not merged: "
                                           f"results.duckdb is held by {done.holder or 'another process'}",
                                           "close that process, then run `ragbench doctor --repair`"))
    elif spooled:
        for sweep_id in spool.sweep_ids():
            for entry in spool.entries(sweep_id):
                try:
                    spool.load(entry)
                except SpoolDamaged as e:
                    report.findings.append(Finding("results", str(entry.path), f"damaged spooled result ({e})",
                                                   "run `ragbench doctor --repair` (quarantines it)"))
        report.findings.append(Finding("results", str(spool.root), f"{spooled} result(s) wait in the spool "
                                       "(results.duckdb was busy when they finished)",
                                       "run `ragbench doctor --repair` or any `ragbench sweep` to merge them"))
    logged = store.sweeps().filter(pl.col("experiment").is_not_null())["sweep_id"]  # sweeps with MLflow on
    pending = sum(len(store.pending_mlflow_configs(sid)) for sid in logged)
    if pending:
        report.findings.append(Finding("results", str(path), f"{pending} config(s) are in DuckDB but not in MLflow",
                                       "run `ragbench sync-mlflow`"))


def _mlflow(settings: Settings, repair: bool, report: DoctorReport) -> None:
    from ragbench.results.store_connection import sqlite_damage
    from ragbench.results.tracking import default_tracking_uri, sqlite_store_path

    uri = default_tracking_uri(settings)
    if uri.startswith("sqlite:") and not (Path(settings.home) / "mlflow.db").is_file():
        report.checked["mlflow experiments"] = 0
        return
    path = sqlite_store_path(uri)
    cause = sqlite_damage(path, thorough=True) if path is not None else None
    if cause is not None:
        if not repair:
            report.findings.append(Finding("mlflow", str(path), f"damaged: {cause}", REPAIR))
            return
        _rebuild_mlflow(settings, path, cause, report)
    try:
        from mlflow.tracking import MlflowClient

        report.checked["mlflow experiments"] = len(MlflowClient(tracking_uri=uri).search_experiments())
    except Exception as e:
        report.findings.append(Finding("mlflow", uri, f"does not answer: {str(e).splitlines()[0][:200]}",
                                       "check the server or the store file"))


def examine(settings: Settings, repair: bool = False) -> DoctorReport:
    """Check the home of ``settings``; with ``repair``, quarantine damaged cache entries and delete damaged
    collections (both are recomputed by the next sweep that needs them), merge spooled results into DuckDB, and set
    a damaged ``results.duckdb`` or ``mlflow.db`` aside, rebuilding it from what survives."""
    report = DoctorReport()
    _cache(settings, repair, report)
    _collections(settings, repair, report)
    _results(settings, repair, report)
    _mlflow(settings, repair, report)
    return report
