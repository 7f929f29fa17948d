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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ragbench.core.hashing import stable_hash


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

    def _segments(self, model_key: str, role: str) -> list[Path]:
        folder = self._dir(model_key, role)
        return sorted(folder.glob("seg-*.parquet")) if folder.is_dir() else []

    def known(self, model_key: str, role: str) -> set[str]:
        """Hashes already cached (reads only the hash columns)."""
        out: set[str] = set()
        for seg in self._segments(model_key, role):
            out.update(pq.read_table(seg, columns=["text_hash"]).column(0).to_pylist())
        return out

    def iter_vectors(self, model_key: str, role: str, wanted: set[str]) -> Iterator[tuple[list[str], np.ndarray]]:
        """Stream ``(hashes, vectors)`` one segment at a time, restricted to ``wanted`` (each hash once).

        Memory stays bounded by the segment size, whatever the corpus size.
        """
        remaining = set(wanted)
        for seg in self._segments(model_key, role):
            if not remaining:
                break
            table = pq.read_table(seg)
            hashes = table.column("text_hash").to_pylist()
            rows = [i for i, h in enumerate(hashes) if h in remaining]
            if not rows:
                continue
            col = table.column("vector").combine_chunks()
            mat = np.asarray(col.flatten(), dtype=np.float32).reshape(len(col), -1)[rows]
            picked = [hashes[i] for i in rows]
            remaining.difference_update(picked)
            yield picked, mat

    def fetch(self, model_key: str, role: str, hashes: list[str]) -> np.ndarray:
        """A matrix with row i = the vector of ``hashes[i]`` (all must be cached)."""
        positions: dict[str, list[int]] = {}
        for i, h in enumerate(hashes):
            positions.setdefault(h, []).append(i)
        out: np.ndarray | None = None
        seen = 0
        for picked, mat in self.iter_vectors(model_key, role, set(positions)):
            if out is None:
                out = np.empty((len(hashes), mat.shape[1]), dtype=np.float32)
            for h, v in zip(picked, mat):
                out[positions[h]] = v
                seen += 1
        if seen != len(positions):
            raise KeyError(f"{len(positions) - seen} vectors missing from the cache for {model_key} [{role}]")
        return out if out is not None else np.zeros((0, 0), dtype=np.float32)

    def append(self, model_key: str, role: str, hashes: list[str], vectors: np.ndarray) -> None:
        """Store new vectors as one atomic segment."""
        if not hashes:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        flat = pa.array(vectors.reshape(-1))
        table = pa.table({"text_hash": pa.array(hashes, pa.string()),
                          "vector": pa.FixedSizeListArray.from_arrays(flat, vectors.shape[1])})
        atomic_write_parquet(table, self._dir(model_key, role) / f"seg-{uuid.uuid4().hex}.parquet")
