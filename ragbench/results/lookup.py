"""Finding a sweep and a config the way people name them: ``latest``, an id, a unique id prefix, a name, or a
config's rank on the leaderboard."""

from __future__ import annotations

import difflib
import json
import re

import polars as pl

from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import measure_key
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


RANK = re.compile(r"^#?(\d{1,3})$")


def ranked_config_ids(store: ResultStore, sweep_id: str, primary: str | None = None) -> list[str]:
    """The sweep's finished configs, best first by the mean of ``primary`` (default: the sweep's), ties by id:
    the order of every leaderboard, so rank N here is row N there."""
    key = measure_key(primary) if primary else sweep_primary(store, sweep_id)
    board = store.leaderboard(sweep_id).filter(pl.col("status") == "finished")
    if key not in board.columns:
        return sorted(board["config_id"].to_list())
    board = board.with_columns(pl.col(key).fill_nan(None))
    return board.sort([key, "config_id"], descending=[True, False], nulls_last=True)["config_id"].to_list()


def resolve_config_id(store: ResultStore, sweep_id: str, config: str, *, primary: str | None = None) -> str:
    """A config of the sweep by leaderboard rank (``1``, ``#3``: one to three digits), id, exact label (the name
    every surface shows, :func:`ragbench.config.labels.config_label`) or stored name, unique id prefix or unique
    substring of either (case-insensitive). An ambiguous or unknown reference fails with the candidates ("did you
    mean ...", by label) rather than guessing."""
    from ragbench.config.labels import config_label

    board = store.leaderboard(sweep_id)
    stored = dict(zip(board["config_id"].to_list(), board["name"].to_list()))
    names = {c: config_label(json.loads(s or "{}"), n)
             for c, n, s in board.select("config_id", "name", "spec_json").iter_rows()}
    rows = pl.DataFrame({"config_id": list(names), "name": [stored[c] for c in names], "label": list(names.values())},
                        schema={"config_id": pl.String, "name": pl.String, "label": pl.String})

    def show(ids) -> str:
        return "; ".join(f"{c[:12]} ({names[c]})" for c in ids)

    m = RANK.match(config.strip())
    if m:
        order = ranked_config_ids(store, sweep_id, primary)
        rank = int(m.group(1))
        if 1 <= rank <= len(order):
            return order[rank - 1]
        raise RagbenchError(f"rank {rank} is not on the leaderboard of sweep {sweep_id}: it has {len(order)} "
                            f"finished config(s); the best is rank 1 ({show(order[:1]) or 'none'})")
    exact = rows.filter((pl.col("config_id") == config) | (pl.col("name") == config) | (pl.col("label") == config))
    if exact.height == 1:
        return exact["config_id"][0]
    prefix = rows.filter(pl.col("config_id").str.starts_with(config))
    if prefix.height == 1 and not exact.height:
        return prefix["config_id"][0]
    part = rows.filter(pl.col("name").str.to_lowercase().str.contains(config.lower(), literal=True)
                       | pl.col("label").str.to_lowercase().str.contains(config.lower(), literal=True))
    if part.height == 1 and not (exact.height or prefix.height):
        return part["config_id"][0]
    candidates = (exact if exact.height else prefix if prefix.height else part)["config_id"].to_list()
    if candidates:
        raise RagbenchError(f"config {config!r} is ambiguous in sweep {sweep_id}: {len(candidates)} configs match. "
                            f"Did you mean: {show(candidates[:10])}{' ...' if len(candidates) > 10 else ''}? "
                            "Give more of the id, the exact name, or the leaderboard rank (e.g. 1)")
    close = difflib.get_close_matches(config, [*names.values(), *stored.values()], n=3, cutoff=0.5)
    hint = (f"Did you mean: {show([c for c in names if names[c] in close or stored[c] in close])}? "
            if close else "")
    raise RagbenchError(f"config {config!r} not found in sweep {sweep_id}. {hint}Its configs: "
                        f"{show(list(names)) or 'none'}")


def sweep_primary(store: ResultStore, sweep_id: str) -> str:
    """The key of the sweep's configured primary measure (``metrics.primary`` of its spec), default
    ``ndcg_at_10``."""
    try:
        return measure_key(store.sweep_spec(sweep_id).get("metrics", {}).get("primary") or "ndcg@10")
    except ValueError:
        return "ndcg_at_10"
