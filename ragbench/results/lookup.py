"""Finding a sweep and a config the way people name them: ``latest``, an id, a unique id prefix, or a name."""

from __future__ import annotations

import polars as pl

from ragbench.core.errors import RagbenchError
from ragbench.core.measures import measure_key
from ragbench.results.store import ResultStore


def resolve_sweep_id(store: ResultStore, sweep: str) -> str:
    """``latest`` or a sweep id (a unique prefix is accepted); the error lists recent sweeps."""
    if sweep == "latest":
        sid = store.latest_sweep_id()
        if sid is None:
            raise RagbenchError(f"no sweeps in {store.path}; run `ragbench sweep CONFIG` first")
        return sid
    if store.sweep(sweep):
        return sweep
    found = store.sweep_ids(prefix=sweep)
    if len(found) == 1:
        return found[0]
    recent = store.sweep_ids(limit=5)
    what = "is ambiguous" if found else "not found"
    raise RagbenchError(f"sweep {sweep!r} {what} in {store.path}; recent sweeps: {', '.join(recent) or 'none'}")


def resolve_config_id(store: ResultStore, sweep_id: str, config: str) -> str:
    """A config of the sweep by id, exact name, unique id prefix or unique name substring (case-insensitive); the
    error lists the sweep's configs."""
    names = store.config_names(sweep_id)
    rows = pl.DataFrame({"config_id": list(names), "name": list(names.values())},
                        schema={"config_id": pl.String, "name": pl.String})
    exact = rows.filter((pl.col("config_id") == config) | (pl.col("name") == config))
    if exact.height == 1:
        return exact["config_id"][0]
    prefix = rows.filter(pl.col("config_id").str.starts_with(config))
    if prefix.height == 1 and not exact.height:
        return prefix["config_id"][0]
    part = rows.filter(pl.col("name").str.to_lowercase().str.contains(config.lower(), literal=True))
    if part.height == 1 and not (exact.height or prefix.height):
        return part["config_id"][0]
    prefix = prefix if prefix.height else part
    listing = "; ".join(f"{c} ({n})" for c, n in rows.iter_rows())
    what = "is ambiguous" if (exact.height or prefix.height) else "not found"
    raise RagbenchError(f"config {config!r} {what} in sweep {sweep_id}; its configs: {listing or 'none'}")


def sweep_primary(store: ResultStore, sweep_id: str) -> str:
    """The key of the sweep's configured primary measure (``metrics.primary`` of its spec), default
    ``ndcg_at_10``."""
    try:
        return measure_key(store.sweep_spec(sweep_id).get("metrics", {}).get("primary") or "ndcg@10")
    except ValueError:
        return "ndcg_at_10"
