"""Retry policy shared by every orchestrator: transient errors (a server timeout) are retried with backoff, a
bounded number of times, permanent ones (a bad config, a model that cannot load, out of memory) are not; and the
reachability check of a server a command needs (:func:`check_server`), done once, before any heavy work."""

from __future__ import annotations

import socket
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

from ragbench.core.errors import RagbenchError
from ragbench.core.progress import log
from ragbench.core.redact import redact

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


# ---------------------------------------------------------------- is a server there? (checked before heavy work)
#: seconds a reachability check waits for a TCP connect and for the answer to one cheap request
SERVER_CHECK_TIMEOUT_S = 3.0
_DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "postgres": 5432, "tcp": 8786, "tls": 8786}


class ServerUnreachable(RagbenchError):
    """A server a command needs does not answer; the message names what it is for and where, on one line."""


def _reason(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, socket.gaierror):
        return "unknown host"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError):
        return "connection reset"
    return (getattr(exc, "strerror", None) or str(exc) or type(exc).__name__).splitlines()[0][:200]


def _address(url: str) -> tuple[str, int]:
    # host:port without a scheme is how Qdrant and Dask clients also accept an address
    parts = urllib.parse.urlsplit(url if "://" in url else f"tcp://{url}")
    scheme = parts.scheme.split("+")[0].lower()  # postgresql+psycopg2 -> postgresql
    try:
        port = parts.port
    except ValueError:
        port = None
    if not parts.hostname or (port is None and scheme not in _DEFAULT_PORTS):
        raise ServerUnreachable(f"{url}: not a server address (expected scheme://host:port)")
    return parts.hostname, port or _DEFAULT_PORTS[scheme]


def check_server(url: str, what: str, http_path: str | None = None, timeout: float = SERVER_CHECK_TIMEOUT_S,
                 purpose: str = "") -> None:
    """Raise :class:`ServerUnreachable` ("the <what> <url> [for <purpose>] does not answer: <reason>", a key in
    the URL masked) unless ``url`` answers within ``timeout`` seconds: a TCP connect to its host and port, then for ``http(s)`` one GET of ``http_path``
    appended to the URL (any HTTP status counts as an answer: the server is there; what it says is the caller's
    business). Never retried: a sweep fails before any chunking or embedding instead of minutes later."""
    host, port = _address(url)
    shown = redact(url) + (f" for {purpose}" if purpose else "")  # a key in the URL never reaches the message
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ServerUnreachable(f"the {what} {shown} does not answer: {_reason(e, timeout)}") from None
    if http_path is None or not url.lower().startswith(("http://", "https://")):
        return
    import http.client
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(_without_userinfo(url).rstrip("/") + http_path, timeout=timeout):
            pass
    except urllib.error.HTTPError:  # 401, 404 ...: an answer all the same
        return
    except (OSError, ValueError, http.client.HTTPException) as e:
        cause = e.reason if isinstance(getattr(e, "reason", None), BaseException) else e  # URLError wraps it
        raise ServerUnreachable(f"the {what} {shown} does not answer: {_reason(cause, timeout)}") from None


def _without_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
