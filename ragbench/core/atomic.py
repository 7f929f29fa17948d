"""Small files (JSON records: calibrations, memos, collection metadata, aliases) written so that a reader, or a
process killed half-way, sees the old file or the new one and never part of one: a temporary file in the same
folder, renamed over the target (a rename within a file system is atomic)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomically(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` (its folder made when missing) through a temporary file renamed over it;
    ``durable``: flushed to the disk before the rename (state a power cut must not lose, e.g. which collection
    serves production)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
