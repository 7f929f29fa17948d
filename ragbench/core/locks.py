"""Inter-process locks (``fcntl.flock``): released by the kernel when the holder dies, even by SIGKILL."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ragbench.core.errors import RagbenchError


class LockBusyError(RagbenchError):
    """Another live process holds the lock."""


def _holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}


def acquire_lock(path: Path, what: str, *, wait_seconds: float = 0.0,
                 on_wait: Callable[[str], None] | None = None) -> int:
    """Take an exclusive lock on ``path`` and return its descriptor (``os.close`` releases it). Waits up to
    ``wait_seconds``; ``on_wait`` is told once, naming the holder, when the lock is busy; then raises
    :class:`LockBusyError` naming the holder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_seconds
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(path)
                who = f"pid {holder.get('pid', '?')}, since {holder.get('since', '?')}"
                if time.monotonic() >= deadline:
                    raise LockBusyError(f"{what} is in use by another process ({who}); wait for it to finish, then "
                                        f"run again — finished work is kept") from None
                if on_wait is not None and not told:
                    on_wait(f"{what} is in use by another process ({who}); waiting up to {wait_seconds:.0f} s")
                    told = True
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(timezone.utc).isoformat()}).encode())
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def file_lock(path: Path, what: str, *, wait_seconds: float = 0.0,
              on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the block; wait up to ``wait_seconds``, then raise naming the holder."""
    fd = acquire_lock(path, what, wait_seconds=wait_seconds, on_wait=on_wait)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
