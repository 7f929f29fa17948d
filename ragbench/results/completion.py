"""Finished or not: whether a sweep ran to its end, and how many of its configs are done.

A sweep is recorded ``running`` when it starts (``sweeps.status``) and gets its final status — ``finished`` or
``finished_with_failures`` — only when every config has been evaluated (:meth:`ResultStore.finish_sweep`). A sweep
killed part-way therefore stays ``running`` with no live process: that is how the next sweep of the same spec finds
it to resume (:meth:`ResultStore.find_unfinished_sweep`), and how ``promote``, ``report`` and ``gate`` tell that it
is unfinished. A config is *done* when it has a row in ``configs`` (finished, failed with its error, or screened out
on the screen's evidence); the total is the size of the sweep's grid (its stored spec, expanded). A budgeted sweep
that stopped records the configs it did not start (``over_budget``) and a final status, yet it is not finished
either: its best may be among the configs it never started, and the next run of its config continues it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ragbench.results.store import ResultStore

FINAL_STATUSES = ("finished", "finished_with_failures")


@dataclass(frozen=True)
class SweepCompletion:
    """Whether ``sweep_id`` finished: its stored ``status``, ``configs_done`` (finished, failed or screened out)
    of ``configs_total`` (None when the stored spec cannot be expanded), ``live_pid``, the process running it
    now (None when none runs it: a ``running`` sweep without one was interrupted), and ``over_budget``, the
    configs a budget did not start."""

    sweep_id: str
    status: str
    configs_done: int
    configs_total: int | None
    live_pid: int | None = None
    over_budget: int = 0

    @property
    def finished(self) -> bool:
        """True once the sweep recorded a final status and no config was left over budget (every config
        evaluated, failed ones included)."""
        return self.status in FINAL_STATUSES and not self.over_budget

    @property
    def counts(self) -> str:
        """``1 of 6 configs`` (``1 of ? configs`` when the total is unknown)."""
        total = self.configs_total
        return f"{self.configs_done} of ? configs" if total is None else f"{self.configs_done} of {total} configs"

    @property
    def text(self) -> str:
        """``unfinished: 1 of 6 configs``, or ``finished: 6 of 6 configs``."""
        return f"{'finished' if self.finished else 'unfinished'}: {self.counts}"

    @property
    def why(self) -> str:
        """Why it is unfinished, in words: still running (pid), or interrupted (how to resume)."""
        if self.finished:
            return "finished"
        if self.status in FINAL_STATUSES:
            return (f"{self.over_budget} not run: over budget; run `ragbench sweep` on its config again to "
                    "continue it")
        if self.live_pid is not None:
            return f"still running (pid {self.live_pid})"
        return "interrupted; run `ragbench sweep` on its config again to resume it"

    def as_dict(self) -> dict:
        """``finished, configs_done, configs_total`` (the report's JSON fields)."""
        return {"finished": self.finished, "configs_done": self.configs_done, "configs_total": self.configs_total}


def _grid_size(spec_json: str | None) -> int | None:
    """The number of configs of a stored sweep spec, or None when it cannot be parsed (an empty or foreign spec)."""
    from ragbench.config import SweepConfig

    try:
        spec = json.loads(spec_json or "{}")
    except ValueError:
        return None
    if isinstance(spec, dict) and "recovered" in spec:  # rebuilt by `doctor --repair`: the grid size it kept
        return (spec["recovered"] or {}).get("configs_total")
    try:
        return len(SweepConfig.model_validate(spec).expand())
    except Exception:  # a spec this process cannot read (a kind registered elsewhere, masked values): unknown
        return None


def _live_pid(home: Path, spec_hash: str | None, fingerprint: str | None) -> int | None:
    """The pid that last took the sweep's lock (``locks/sweep-<spec>-<data>.lock``), if that process still lives."""
    if not spec_hash or not fingerprint:
        return None
    try:
        pid = int(json.loads((home / "locks" / f"sweep-{spec_hash}-{fingerprint}.lock").read_text())["pid"])
        os.kill(pid, 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid


def sweep_completion(store: ResultStore, sweep_id: str) -> SweepCompletion | None:
    """How far ``sweep_id`` got (see the module docstring), or None for an unknown sweep."""
    row = store.sweep(sweep_id)
    if row is None:
        return None
    statuses = store.config_status_counts(sweep_id)
    n_rows, over = sum(statuses.values()), statuses.get("over_budget", 0)
    status = row.get("status") or "running"
    pid = None if status in FINAL_STATUSES else _live_pid(store.path.parent, row.get("spec_hash"),
                                                          row.get("dataset_fingerprint"))
    total = _grid_size(row.get("spec_json"))
    if total is None and status in FINAL_STATUSES:  # a sweep with a final status stored a row per config
        total = n_rows
    return SweepCompletion(sweep_id, status, n_rows - over, total, pid, over)
