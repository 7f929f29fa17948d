"""Content-addressed, crash-safe cache on disk (Arrow/Parquet).

* Chunks are keyed by ``(dataset fingerprint, chunker spec)``.
* Vectors are keyed by ``(model id + revision, role, text hash)``: a text cut by two chunkers, or seen by two
  sweeps, is embedded once.

Every file is written to a temporary name and renamed into place (``os.replace`` is atomic on POSIX), so a
process killed mid-write leaves either the whole entry or nothing; a stray ``*.tmp`` is never read.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from .hashing import stable_hash


def atomic_write_parquet(table: pa.Table | pl.DataFrame, path: Path) -> None:
    """Write ``table`` to ``path`` so that readers see all of it or none of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    if isinstance(table, pl.DataFrame):
        table = table.to_arrow()
    pq.write_table(table, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


class ChunkCache:
    """Chunk tables under ``root/chunks/<key>.parquet``."""

    def __init__(self, root: Path):
        self.root = Path(root) / "chunks"

    @staticmethod
    def key(dataset_fingerprint: str, chunker_spec: dict) -> str:
        return stable_hash({"dataset": dataset_fingerprint, "chunker": chunker_spec})

    def get_or_build(self, key: str, build: Callable[[], pl.DataFrame]) -> tuple[pl.DataFrame, bool]:
        """Return ``(chunks, was_cached)``."""
        path = self.root / f"{key}.parquet"
        if path.is_file():
            return pl.read_parquet(path), True
        chunks = build()
        atomic_write_parquet(chunks, path)
        return chunks, False


@dataclass(frozen=True)
class EmbedStats:
    """What an embed call did: ``computed`` is the number of texts actually sent to the model."""

    requested: int
    unique: int
    cached: int
    computed: int


class VectorCache:
    """Vectors under ``root/vectors/<model key>/<role>/seg-*.parquet`` with columns ``text_hash``, ``vector``.

    New vectors are appended as new segments of at most ``segment_rows`` rows, each written atomically, so an
    embedding run killed halfway keeps every finished segment and the rerun computes only the rest.
    """

    def __init__(self, root: Path, segment_rows: int = 2048):
        self.root = Path(root) / "vectors"
        self.segment_rows = segment_rows

    def _dir(self, model_key: str, role: str) -> Path:
        safe = model_key.replace("/", "__")
        return self.root / safe / role

    def _index(self, folder: Path) -> dict[str, tuple[Path, int]]:
        index: dict[str, tuple[Path, int]] = {}
        for seg in sorted(folder.glob("seg-*.parquet")):
            hashes = pq.read_table(seg, columns=["text_hash"]).column(0).to_pylist()
            for row, h in enumerate(hashes):
                index.setdefault(h, (seg, row))
        return index

    def lookup(self, model_key: str, role: str, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """Vectors already cached for ``hashes`` (missing ones are absent from the result)."""
        folder = self._dir(model_key, role)
        index = self._index(folder) if folder.is_dir() else {}
        wanted: dict[Path, list[tuple[int, str]]] = {}
        for h in set(hashes):
            if h in index:
                seg, row = index[h]
                wanted.setdefault(seg, []).append((row, h))
        found: dict[str, np.ndarray] = {}
        for seg, rows in wanted.items():
            col = pq.read_table(seg, columns=["vector"]).column(0)
            mat = np.asarray(col.combine_chunks().flatten(), dtype=np.float32).reshape(len(col), -1)
            for row, h in rows:
                found[h] = mat[row]
        return found

    def append(self, model_key: str, role: str, hashes: list[str], vectors: np.ndarray) -> None:
        """Store new vectors as one atomic segment."""
        if not hashes:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        flat = pa.array(vectors.reshape(-1))
        table = pa.table({"text_hash": pa.array(hashes, pa.string()),
                          "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})
        atomic_write_parquet(table, self._dir(model_key, role) / f"seg-{uuid.uuid4().hex}.parquet")
