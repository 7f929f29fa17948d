"""Inter-process locks (``fcntl.flock``): released by the kernel when the holder dies, even by SIGKILL."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from ragbench.core.errors import RagbenchError


class LockBusyError(RagbenchError):
    """Another live process holds the lock."""


@contextmanager
def file_lock(path: Path, what: str, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` for the block; wait up to ``wait_seconds``, then raise naming the holder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    try:
                        holder = json.loads(path.read_text() or "{}")
                    except (OSError, ValueError):
                        holder = {}
                    raise LockBusyError(f"{what} is in use by another process (pid {holder.get('pid', '?')}, since "
                                        f"{holder.get('since', '?')}); wait for it to finish, then run again — "
                                        f"finished work is kept") from None
                time.sleep(0.5)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "since": datetime.now(timezone.utc).isoformat()}).encode())
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
