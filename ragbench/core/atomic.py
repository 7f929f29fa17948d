"""Small files (JSON records: calibrations, memos, collection metadata, aliases) written so that a reader, or a
process killed half-way, sees the old file or the new one and never part of one: a temporary file in the same
folder, named for this write alone, renamed over the target (a rename within a file system is atomic)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def write_text_atomically(path: Path, text: str, *, durable: bool = False) -> None:
    """Write ``text`` to ``path`` exactly (its folder made when missing) through a temporary file renamed over it,
    created as any file of the process is (its umask: a home shared by a team stays readable); ``durable``: flushed
    to the disk before the rename (state a power cut must not lose, e.g. which collection serves production)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8", newline="") as f:  # the text as given, no newline translation
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
