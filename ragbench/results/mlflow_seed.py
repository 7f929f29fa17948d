"""A new home's SQLite MLflow store, copied from a template instead of migrated.

MLflow makes a SQLite store by creating its tables and running every alembic migration of its schema: 2-8 s on
2 shared cores, paid by the first sweep of every new home, the largest fixed cost of a cold sweep after the model.
The empty store it leaves depends only on the MLflow version, so it is made once per version in ragbench's tools folder
(:func:`template_path`) and copied into each new home; MLflow then finds the schema current and migrates nothing.
A template MLflow cannot open is removed and the store made the old way (:func:`drop_template`).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path


def template_path(folder: Path) -> Path:
    """The empty store of the installed MLflow version in ``folder`` (ragbench passes ``<tools dir>/mlflow``, by
    default ``~/.cache/ragbench/tools/mlflow``)."""
    import mlflow

    return folder / f"empty-{mlflow.__version__}.db"


def seed_store(path: Path, folder: Path) -> bool:
    """Copy the installed MLflow's empty store to ``path`` when no file is there (making the template first when the
    cache lacks it); True when copied. The copy lands under a temporary name and is renamed, so no reader sees half
    a file; call it under the store's lock."""
    if path.exists():
        return False
    template = template_path(folder)
    if not template.exists():
        _make_template(template)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.seed")
    shutil.copyfile(template, partial)
    try:
        _as_made_here(partial)
    except sqlite3.Error:  # not a store: made again next time
        partial.unlink(missing_ok=True)
        drop_template(folder)
        raise
    os.replace(partial, path)
    return True


def _as_made_here(db: Path) -> None:
    """MLflow's Default experiment (id 0) as MLflow would have made it in this process: artifacts under
    ``<working folder>/mlruns/0``, created now."""
    from ragbench.results.store_connection import restamp_mlflow_default_experiment

    restamp_mlflow_default_experiment(db, str(Path.cwd() / "mlruns" / "0"), int(time.time() * 1000))


def drop_template(folder: Path) -> None:
    """Remove the installed MLflow's template from ``folder`` (MLflow could not open a store copied from it)."""
    template_path(folder).unlink(missing_ok=True)


def _make_template(template: Path) -> None:
    """Let MLflow create and migrate an empty store in a temporary folder beside ``template``, then rename it there
    (two processes making it at once each rename a whole file)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    template.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=template.parent) as tmp:
        db = Path(tmp) / "empty.db"
        store = SqlAlchemyStore(f"sqlite:///{db}", (Path(tmp) / "artifacts").as_uri())
        store.engine.dispose()
        os.replace(db, template)
