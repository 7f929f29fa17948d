"""Content-addressed, crash-safe cache on disk (Arrow/Parquet).

* Chunks are keyed by ``(dataset fingerprint, chunker spec)``.
* Vectors are keyed by ``(model id + revision, role, text hash)``: a text cut by two chunkers, or seen by two
  sweeps, is embedded once.
* Converted documents (folder datasets) are keyed by ``(file content hash, converter and its version)``: a file
  is converted once, whatever its name or folder.

Every file is written to a temporary name and renamed into place (``os.replace`` is atomic on POSIX), so a
process killed mid-write leaves either the whole entry or nothing; a stray ``*.tmp`` is never read.

**Integrity.** Each entry's file name ends with the SHA-256 of its bytes (``<key>.<sha256>.parquet``,
``seg-<sha256>.parquet``), computed when it is written. Every read checks it (once per file and process) and that
the table has its columns; a damaged entry (truncated, overwritten, garbage, rewritten with other values) is moved to
``quarantine/`` with a warning naming it, and what it held is recomputed. Entries written before checksums existed
(``<key>.parquet``, ``seg-<uuid>.parquet``) are read when they parse, and chunk tables are rewritten with one.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.progress import log
from ragbench.core.schemas import CHUNK_SCHEMA
from ragbench.core.spec import Spec

_SHA_LEN = 64


class DamagedEntry(Exception):
    """A cache file whose bytes do not match its checksum, or that is not the table it should be."""


#: rows per Parquet row group when a polars table is written (one group's Arrow copy is alive at a time)
PARQUET_ROW_GROUP = 50_000


def atomic_write_verified(table: pa.Table | pl.DataFrame, folder: Path, prefix: str) -> Path:
    """Write ``table`` as ``folder/<prefix><sha256 of the file>.parquet`` atomically; returns the path."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{prefix}{uuid.uuid4().hex}.tmp"
    if isinstance(table, pl.DataFrame):  # a row group at a time: never an Arrow copy of the whole table
        with pq.ParquetWriter(tmp, table.head(0).to_arrow().schema) as writer:
            for part in table.iter_slices(PARQUET_ROW_GROUP):
                writer.write_table(part.to_arrow())
    else:
        pq.write_table(table, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    path = folder / f"{prefix}{file_sha256(tmp)}.parquet"
    os.replace(tmp, path)
    return path


class _Verifier:
    """Checks entries against the checksum in their name (each file once per process) and quarantines damage."""

    def __init__(self, cache_root: Path, quarantine: bool = True):
        self.quarantine_dir = Path(cache_root) / "quarantine"
        self.quarantine_damaged = quarantine
        self._ok: set[tuple[str, int, int]] = set()

    def _load(self, path: Path, columns: tuple[str, ...], read_columns: list[str] | None) -> pa.Table:
        """The verified table; raises :class:`DamagedEntry` saying what is wrong (nothing is moved)."""
        try:
            st = path.stat()
            stamp = (str(path), st.st_size, st.st_mtime_ns)
            expected = path.name.removesuffix(".parquet").rsplit(".", 1)[-1].removeprefix("seg-")
            if stamp not in self._ok and len(expected) == _SHA_LEN and file_sha256(path) != expected:
                raise DamagedEntry("its bytes do not match the checksum in its name")
            table = pq.read_table(path, columns=read_columns)
        except (OSError, pa.ArrowException) as e:  # truncated or not Parquet at all
            raise DamagedEntry(f"unreadable: {str(e).splitlines()[0][:160]}") from None
        missing = [c for c in (read_columns or columns) if c not in table.column_names]
        if missing:
            raise DamagedEntry(f"columns {missing} are missing")
        self._ok.add(stamp)
        return table

    def read(self, path: Path, columns: tuple[str, ...], read_columns: list[str] | None = None) -> pa.Table:
        """The table in ``path``, verified; raises :class:`DamagedEntry` after quarantining a damaged file."""
        try:
            return self._load(path, columns, read_columns)
        except DamagedEntry as e:
            if self.quarantine_damaged:
                self.quarantine(path, str(e))
            raise

    def check(self, path: Path, columns: tuple[str, ...], repair: bool) -> str | None:
        """Why ``path`` is damaged (quarantined when ``repair``), or None when it is intact."""
        try:
            self._load(path, columns, list(columns))
            return None
        except DamagedEntry as e:
            if repair:
                self.quarantine(path, str(e))
            return str(e)

    def quarantine(self, path: Path, reason: str) -> Path | None:
        dest = self.quarantine_dir / f"{path.parent.name}-{path.name}.{uuid.uuid4().hex[:8]}"
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, dest)
        except FileNotFoundError:  # another process moved it first
            return None
        log.warning("cache entry %s is damaged (%s): moved to %s; what it held is recomputed", path, reason, dest)
        return dest


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
    """Chunk tables under ``root/chunks/<key>.<sha256>.parquet``, verified on every read."""

    def __init__(self, root: Path):
        self.root = Path(root) / "chunks"
        self._verifier = _Verifier(root)

    @staticmethod
    def key(dataset_fingerprint: str, chunker_spec: dict | Spec) -> str:
        """The chunk table's key: the hash of the dataset fingerprint and the chunker's canonical spec, plus the
        chunker's :attr:`~ragbench.core.spec.Spec.behaviour_version` when a spec (not its dict) is given and that
        version is above 1 (so keys of version-1 chunkers are those made before versions existed)."""
        if not isinstance(chunker_spec, Spec):
            return stable_hash({"dataset": dataset_fingerprint, "chunker": chunker_spec})
        keyed = {"dataset": dataset_fingerprint, "chunker": chunker_spec.canonical()}
        if chunker_spec.behaviour_version > 1:
            keyed["chunker_version"] = chunker_spec.behaviour_version
        return stable_hash(keyed)

    def entries(self, key: str | None = None) -> list[Path]:
        """The files of ``key`` (every key when None), checksummed and legacy ones."""
        if not self.root.is_dir():
            return []
        pattern = f"{key}*.parquet" if key else "*.parquet"
        return sorted(p for p in self.root.glob(pattern) if key is None or p.name.split(".")[0] == key)

    def peek(self, key: str) -> pl.DataFrame | None:
        """The intact chunk table of ``key``, or None (nothing is moved or built)."""
        for path in self.entries(key):
            try:
                return _with_prefix(pl.from_arrow(self._verifier._load(path, ("chunk_id", "text"), None)))
            except DamagedEntry:
                continue
        return None

    def get_or_build(self, key: str, build: Callable[[], pl.DataFrame]) -> tuple[pl.DataFrame, bool]:
        """Return ``(chunks, was_cached)``; a damaged entry is quarantined and rebuilt."""
        for path in self.entries(key):
            try:
                table = self._verifier.read(path, ("chunk_id", "doc_id", "start", "end", "text"))
            except DamagedEntry:
                continue
            chunks = _with_prefix(pl.from_arrow(table))
            # a legacy entry that parses (no checksum, or whole index texts): rewrite it in today's form
            if len(path.name.split(".")) == 2 or "prefix" not in table.column_names:
                atomic_write_verified(chunks, self.root, f"{key}.")
                path.unlink(missing_ok=True)
            return chunks, True
        chunks = build()
        atomic_write_verified(chunks, self.root, f"{key}.")
        return chunks, False

    def verify(self, repair: bool = False) -> tuple[int, dict[Path, str]]:
        """Check every entry: ``(entries checked, {damaged entry: why})``; ``repair`` quarantines the damaged."""
        entries = self.entries()
        found = {p: why for p in entries if (why := self._verifier.check(p, ("chunk_id", "doc_id", "text"), repair))}
        return len(entries), found


def _with_prefix(chunks: pl.DataFrame) -> pl.DataFrame:
    """A chunk table with a ``prefix`` column: entries written before it held the whole ``index_text``, which is
    always ``prefix + text``, so the prefix is its first ``len(index_text) - len(text)`` characters."""
    if "prefix" in chunks.columns or "index_text" not in chunks.columns:
        return chunks
    cut = pl.col("index_text").str.len_chars() - pl.col("text").str.len_chars()
    return (chunks.with_columns(pl.col("index_text").str.slice(0, cut).alias("prefix"))
            .drop("index_text").select([c for c in CHUNK_SCHEMA if c in chunks.columns or c == "prefix"]))


@dataclass(frozen=True)
class EmbedStats:
    """What an embed call did: ``computed`` is the number of texts actually sent to the model; ``encode_seconds``
    the wall seconds the model spent on them in this process (0 when none were computed here: cached, or encoded
    on workers)."""

    requested: int
    unique: int
    cached: int
    computed: int
    encode_seconds: float = 0.0


class VectorCache:
    """Vectors under ``root/vectors/<model key>/<role>/seg-*.parquet`` with columns ``text_hash``, ``vector``.

    New vectors are appended as new segments of at most ``segment_rows`` rows, each written atomically, so an
    embedding run killed halfway keeps every finished segment and the rerun computes only the rest.
    """

    def __init__(self, root: Path, segment_rows: int = 2048, quarantine: bool = True):
        self.root = Path(root) / "vectors"
        self.segment_rows = segment_rows
        self._verifier = _Verifier(root, quarantine)

    def _dir(self, model_key: str, role: str) -> Path:
        safe = model_key.replace("/", "__")
        return self.root / safe / role

    def _segments(self, model_key: str, role: str) -> list[Path]:
        folder = self._dir(model_key, role)
        return sorted(folder.glob("seg-*.parquet")) if folder.is_dir() else []

    def verify(self, repair: bool = False) -> tuple[int, dict[Path, str]]:
        """Check every segment of every model: ``(segments checked, {damaged segment: why})``; ``repair``
        quarantines the damaged (their vectors are recomputed by the next sweep that needs them)."""
        segs = sorted(self.root.rglob("seg-*.parquet")) if self.root.is_dir() else []
        found = {p: why for p in segs if (why := self._verifier.check(p, ("text_hash", "vector"), repair))}
        return len(segs), found

    def known(self, model_key: str, role: str) -> set[str]:
        """Hashes already cached (reads only the hash columns)."""
        out: set[str] = set()
        for seg in self._segments(model_key, role):
            try:
                table = self._verifier.read(seg, ("text_hash", "vector"))
            except DamagedEntry:
                continue
            out.update(table.column("text_hash").to_pylist())
        return out

    def iter_vectors(self, model_key: str, role: str, wanted: set[str]) -> Iterator[tuple[list[str], np.ndarray]]:
        """Stream ``(hashes, vectors)`` one segment at a time, restricted to ``wanted`` (each hash once).

        Memory stays bounded by the segment size, whatever the corpus size.
        """
        remaining = set(wanted)
        for seg in self._segments(model_key, role):
            if not remaining:
                break
            try:
                table = self._verifier.read(seg, ("text_hash", "vector"))
            except DamagedEntry as e:  # raced with a reader that found it damaged after known() ran
                raise KeyError(f"vector segment {seg.name} is damaged ({e}); run again to recompute it") from None
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
        atomic_write_verified(table, self._dir(model_key, role), "seg-")


class BlobCache:
    """Files of bytes under ``root/<folder>/<key[:2]>/<key>.<sha256>.<suffix>``: written atomically, the name
    carries the SHA-256 of the bytes, every read checks it; a damaged entry is quarantined with a warning and
    ``get`` answers None, so its value is made again. Subclasses say what the bytes hold."""

    folder = "blobs"
    suffix = "bin"

    def __init__(self, root: Path):
        self.root = Path(root) / self.folder
        self._verifier = _Verifier(root)

    def _entries(self, key: str) -> list[Path]:
        folder = self.root / key[:2]
        return sorted(folder.glob(f"{key}.*.{self.suffix}")) if folder.is_dir() else []

    def _load(self, path: Path):
        """The value of a verified entry; raises :class:`DamagedEntry` saying what is wrong."""
        data = path.read_bytes()
        expected = path.name.removesuffix(f".{self.suffix}").rsplit(".", 1)[-1]
        if hashlib.sha256(data).hexdigest() != expected:
            raise DamagedEntry("its bytes do not match the checksum in its name")
        return self.decode(data)

    def decode(self, data: bytes):
        """The value the bytes hold; raises :class:`DamagedEntry` when they hold none."""
        return data

    def get(self, key: str):
        """The cached value of ``key``, or None (a damaged entry is quarantined and None returned)."""
        for path in self._entries(key):
            try:
                return self._load(path)
            except FileNotFoundError:  # another process quarantined it
                continue
            except DamagedEntry as e:
                self._verifier.quarantine(path, str(e))
        return None

    def put_bytes(self, key: str, data: bytes) -> Path:
        """Store ``data`` under ``key`` atomically; returns the entry's path."""
        folder = self.root / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{key}.{hashlib.sha256(data).hexdigest()}.{self.suffix}"
        if path.exists():
            return path
        tmp = folder / f".{key}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path

    def verify(self, repair: bool = False) -> tuple[int, dict[Path, str]]:
        """Check every entry: ``(entries checked, {damaged entry: why})``; ``repair`` quarantines the damaged."""
        entries = sorted(self.root.glob(f"*/*.{self.suffix}")) if self.root.is_dir() else []
        found: dict[Path, str] = {}
        for path in entries:
            try:
                self._load(path)
            except DamagedEntry as e:
                found[path] = str(e)
                if repair:
                    self._verifier.quarantine(path, str(e))
        return len(entries), found


class JsonCache(BlobCache):
    """JSON objects under ``root/<folder>/<key[:2]>/<key>.<sha256>.json``, with the integrity of every
    :class:`BlobCache`."""

    folder, suffix = "json", "json"

    def decode(self, data: bytes) -> dict:
        try:
            value = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DamagedEntry(f"not JSON: {e}") from None
        if not isinstance(value, dict):
            raise DamagedEntry("not a JSON object")
        return value

    def put(self, key: str, value: dict) -> Path:
        """Store ``value`` under ``key`` atomically; returns the entry's path."""
        return self.put_bytes(key, json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8"))


class DocumentCache(JsonCache):
    """Converted documents (JSON objects, e.g. Markdown text and title) under ``root/converted/``, keyed by the
    source file's content hash and the converter."""

    folder = "converted"

    @staticmethod
    def key(file_sha256: str, converter: str) -> str:
        """The entry of a file with these bytes under this converter (name and versions)."""
        return stable_hash({"file": file_sha256, "converter": converter}, length=32)


class StatsCache(JsonCache):
    """A report's resampling statistics (bootstrap intervals, randomization tests) under ``root/stats/``, keyed by
    the statistic, its version and parameters and the bytes of the values it resamples: a report whose configs were
    reused draws none of its resamples again (:mod:`ragbench.evaluation.kept`)."""

    folder = "stats"


class PlotCache(BlobCache):
    """Report plots (PNG) under ``root/plots/<key[:2]>/<key>.<sha256>.png``, keyed by the plot's name, drawing
    version and the data it draws: a rerun whose results did not change copies its plots instead of drawing them
    (and never imports matplotlib)."""

    folder, suffix = "plots", "png"

    def decode(self, data: bytes) -> bytes:
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            raise DamagedEntry("not a PNG file")
        return data
