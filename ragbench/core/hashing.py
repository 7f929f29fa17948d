"""Stable content hashes: the keys of the cache and the ids of configs."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: equal specs give equal strings."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_hash(obj: Any, length: int = 16) -> str:
    """Hex SHA-256 of ``canonical_json(obj)`` (strings are hashed as-is), cut to ``length`` chars."""
    data = obj if isinstance(obj, str) else canonical_json(obj)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()[:length]


def text_hash(text: str) -> str:
    """Key of one text in the vector cache (128 bits of SHA-256: collisions are not a practical concern)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def file_sha256(path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk_size):
            h.update(block)
    return h.hexdigest()
