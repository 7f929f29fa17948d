"""How stages run: the plain-Python :class:`LocalRunner`, or any :class:`StageRunner` (``flows/`` passes one that
wraps each stage in a Prefect task). Nothing in the library imports Prefect.

The sweep is a graph of stages: :meth:`StageRunner.submit` starts a stage and returns a :class:`StageFuture`;
a future given as an argument (or in ``wait_for``) is an upstream dependency, resolved to its result before the
stage runs. A stage whose upstream failed does not run: its future raises :class:`UpstreamFailed`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Protocol

from ragbench.core.errors import RagbenchError
from ragbench.core.retry import call_with_retries


class UpstreamFailed(RagbenchError):
    """A stage did not run because a stage it depends on failed (that stage's future raises the cause)."""


class NotRun(RagbenchError):
    """A stage the sweep chose not to run (its budget: :class:`~ragbench.sweep.budget.OverBudget`): its configs
    are recorded as not run, not failed, and a runner that shows stage states (Prefect) shows it as not run."""


class StageFuture(Protocol):
    def result(self) -> Any: ...


class StageRunner(Protocol):
    def run(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...

    def submit(self, name: str, fn: Callable[..., Any], /, *args: Any, wait_for: Iterable[StageFuture] = (),
               **kwargs: Any) -> StageFuture: ...


class Finished:
    """A stage that already ran here: its value, or the exception it raised (re-raised by :meth:`result`)."""

    def __init__(self, value: Any = None, error: BaseException | None = None):
        self.value, self.error = value, error

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class LocalRunner:
    """Runs each stage in-process, at once, in the order submitted (so a sweep runs exactly as a loop would);
    transient errors (a server timeout) are retried with backoff."""

    def run(self, name, fn, /, *args, **kwargs):
        return call_with_retries(fn, *args, name=name, **kwargs)

    def submit(self, name, fn, /, *args, wait_for=(), **kwargs):
        upstream = [a for a in (*args, *kwargs.values(), *wait_for) if isinstance(a, Finished)]
        if any(f.error is not None for f in upstream):
            return Finished(error=UpstreamFailed(f"{name}: not run, a stage it depends on failed"))
        args = tuple(a.value if isinstance(a, Finished) else a for a in args)
        kwargs = {k: v.value if isinstance(v, Finished) else v for k, v in kwargs.items()}
        try:
            return Finished(self.run(name, fn, *args, **kwargs))
        except Exception as e:
            return Finished(error=e)


def submit(runner, name: str, fn: Callable[..., Any], /, *args: Any, wait_for: Iterable[StageFuture] = (),
           **kwargs: Any) -> StageFuture:
    """``runner.submit(...)``; a runner with only ``run`` (an older custom one) runs the stage at once, as
    :class:`LocalRunner` does."""
    if hasattr(runner, "submit"):
        return runner.submit(name, fn, *args, wait_for=wait_for, **kwargs)
    return _RunOnly(runner).submit(name, fn, *args, wait_for=wait_for, **kwargs)


class _RunOnly(LocalRunner):
    def __init__(self, runner):
        self.run = runner.run
