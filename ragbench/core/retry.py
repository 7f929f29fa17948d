"""Retry policy shared by every orchestrator: transient errors (a server timeout) are retried with backoff,
permanent ones (a bad config, a model that cannot load, out of memory) are not."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ragbench.core.progress import log

TRANSIENT_TYPES: tuple[type[BaseException], ...] = (ConnectionError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """Connection failures and timeouts (also httpx's), or any exception marked ``transient = True``."""
    if getattr(exc, "transient", False) or isinstance(exc, TRANSIENT_TYPES):
        return True
    try:
        import httpx

        return isinstance(exc, (httpx.TimeoutException, httpx.NetworkError))
    except ImportError:  # pragma: no cover
        return False


def call_with_retries(fn: Callable[..., Any], *args: Any, delays: Sequence[float] = (2.0, 10.0),
                      name: str = "", **kwargs: Any) -> Any:
    """Call ``fn``; on a transient error wait ``delays[i]`` and try again (``len(delays)`` retries)."""
    for attempt in range(len(delays) + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if attempt == len(delays) or not is_transient(e):
                raise
            log.warning("%s: transient error (%s); retrying in %.0f s", name or fn.__name__, e, delays[attempt])
            time.sleep(delays[attempt])
