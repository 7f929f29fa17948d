"""The sweep's decision, before any work: which configs run, which reuse results an earlier sweep stored, which are
skipped because this sweep (resumed) already finished them, and why.

:func:`decide` is a pure function of the expanded configs, their evaluation keys and what the result store holds
for those keys (:class:`StoreHolds`); it returns a :class:`SweepPlan`, a plain data object the orchestrator
executes. Nothing here reads a file, loads a model or talks to a store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ragbench.config import RunConfig

Action = Literal["run", "reuse", "skip"]

#: why a config runs (or does not)
NOT_STORED = "no stored result with its evaluation key"
FRESH = "fresh: every config is evaluated anew"
UNREADABLE = "results.duckdb could not be read: nothing is resumed or reused"
SPOOLED = "this sweep's start waits in the spool: its earlier result cannot be copied before it"
COPY_FAILED = "results.duckdb was busy: its earlier result could not be copied into this sweep"
REUSED = "an earlier sweep stored it with the same evaluation key"
DONE = "already finished in this sweep (resumed)"


@dataclass(frozen=True)
class StoreHolds:
    """What the result store holds for this sweep's evaluation keys.

    ``results``: ``config_id -> (source, origin)`` for each config with a finished result under its key (as
    :meth:`~ragbench.results.store.ResultStore.reusable_configs` returns it): the sweep holding the rows (this
    sweep's own when it is resumed) and the sweep that evaluated them. ``fresh``: reuse nothing; ``readable``:
    False when the store could not be read; ``spooled``: this sweep's start waits in the spool, so rows of other
    sweeps cannot be copied into it yet."""

    sweep_id: str
    results: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    fresh: bool = False
    readable: bool = True
    spooled: bool = False


@dataclass(frozen=True)
class Decision:
    """One config's fate: ``run`` (evaluate it now), ``reuse`` (copy the rows of sweep ``source``, evaluated by
    sweep ``origin``) or ``skip`` (this sweep already holds it); ``reason`` says why in words."""

    config: RunConfig
    eval_key: str
    action: Action
    reason: str
    source: str | None = None
    origin: str | None = None

    @property
    def config_id(self) -> str:
        return self.config.config_id


@dataclass(frozen=True)
class SweepPlan:
    """Every config's :class:`Decision`, in config order."""

    sweep_id: str
    decisions: tuple[Decision, ...]

    def _of(self, action: Action) -> list[Decision]:
        return [d for d in self.decisions if d.action == action]

    @property
    def todo(self) -> list[RunConfig]:
        """The configs to evaluate now, in config order."""
        return [d.config for d in self._of("run")]

    @property
    def done(self) -> set[str]:
        """Config ids this (resumed) sweep already finished."""
        return {d.config_id for d in self._of("skip")}

    @property
    def reused(self) -> dict[str, str]:
        """``config_id -> origin`` (the sweep that evaluated it) of every reused config."""
        return {d.config_id: d.origin for d in self._of("reuse")}

    @property
    def stored(self) -> dict[str, tuple[str, str]]:
        """``config_id -> (source, origin)`` of every config not evaluated now (skipped or reused)."""
        return {d.config_id: (d.source, d.origin) for d in self.decisions if d.action != "run"}

    @property
    def eval_keys(self) -> dict[str, str]:
        return {d.config_id: d.eval_key for d in self.decisions}

    def blocked(self, reason: str) -> int:
        """How many configs run because of ``reason`` (e.g. :data:`SPOOLED`)."""
        return sum(d.reason == reason for d in self._of("run"))

    def without_reuse(self, reason: str) -> "SweepPlan":
        """The same plan with every reused config run instead, for ``reason`` (its rows could not be copied)."""
        return replace(self, decisions=tuple(
            replace(d, action="run", reason=reason, source=None, origin=None) if d.action == "reuse" else d
            for d in self.decisions))

    def explain(self) -> list[str]:
        """One line per config: ``<name>: <action> (<reason>)``, naming the sweep a reused result comes from."""
        return [f"{d.config.labels.text}: {d.action}" + (f" from {d.origin}" if d.action == "reuse" else "")
                + f" ({d.reason})" for d in self.decisions]


def decide(configs: Sequence[RunConfig], eval_keys: Mapping[str, str], holds: StoreHolds) -> SweepPlan:
    """Decide each config: ``skip`` when ``holds`` has it finished in this very sweep (a resume), ``reuse`` when
    another sweep stored it under the same evaluation key (unless ``holds.spooled``: then it runs), else ``run``.
    With ``holds.fresh`` or an unreadable store every config runs."""
    found = {} if holds.fresh or not holds.readable else holds.results
    default = FRESH if holds.fresh else NOT_STORED if holds.readable else UNREADABLE
    decisions = []
    for c in configs:
        key = eval_keys[c.config_id]
        if c.config_id not in found:
            decisions.append(Decision(c, key, "run", default))
            continue
        source, origin = found[c.config_id]
        if source == holds.sweep_id:
            decisions.append(Decision(c, key, "skip", DONE, source, origin))
        elif holds.spooled:
            decisions.append(Decision(c, key, "run", SPOOLED))
        else:
            decisions.append(Decision(c, key, "reuse", REUSED, source, origin))
    return SweepPlan(holds.sweep_id, tuple(decisions))
