"""How stages run: the plain-Python :class:`LocalRunner`, or any :class:`StageRunner` (``flows/`` passes one that
wraps each stage in a Prefect task). Nothing in the library imports Prefect."""

from __future__ import annotations

from typing import Any, Callable, Protocol

from ragbench.core.retry import call_with_retries


class StageRunner(Protocol):
    def run(self, name: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any: ...


class LocalRunner:
    """Runs each stage in-process; transient errors (a server timeout) are retried with backoff."""

    def run(self, name, fn, /, *args, **kwargs):
        return call_with_retries(fn, *args, name=name, **kwargs)
