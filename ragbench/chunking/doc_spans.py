"""Incremental chunking: each document's spans kept per chunker, so only new or changed documents are cut again.

One Parquet file per chunker (``<folder>/<chunker key>.parquet``, the key hashing the chunker's canonical spec and
behaviour version) holds ``doc_key, start, end, prefix`` rows, ``doc_key`` hashing what a document's chunks depend on:
its id (chunk ids hash it), title (the contextual prefix) and text. A corpus whose fingerprint changed because one
file of a folder changed is then re-chunked for that file only; the chunk table equals a chunking from scratch.
The file is replaced atomically; a damaged or unreadable one is ignored (everything is cut again and it is rewritten).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import polars as pl

from ragbench.core.hashing import stable_hash

DocSpans = list[tuple[int, int, str]]
#: at most this many documents' spans are kept per chunker (the oldest beyond it are dropped)
MAX_KEPT_DOCUMENTS = 200_000
_SCHEMA = {"doc_key": pl.String, "start": pl.Int64, "end": pl.Int64, "prefix": pl.String}


def chunker_key(spec) -> str:
    """The hash of a chunker's canonical spec and behaviour version: a change to either cuts every document again."""
    return stable_hash({"chunker": spec.canonical(), "version": spec.behaviour_version})


def document_key(doc_id: str, title: str, text: str) -> str:
    """SHA-256 of ``[doc_id, title, text]`` as JSON: everything a document's chunks depend on besides the chunker."""
    return hashlib.sha256(json.dumps([doc_id, title, text], ensure_ascii=False).encode("utf-8")).hexdigest()


class DocumentSpans:
    """The kept spans of one chunker under ``folder``; :meth:`spans_of` answers from them or cuts with ``cut``
    (``(title, text) -> [(start, end, prefix)]``), :meth:`save` writes what is known back."""

    def __init__(self, folder: Path, spec, cut: Callable[[str, str], DocSpans]):
        self.path = Path(folder) / f"{chunker_key(spec)}.parquet"
        self.cut = cut
        self.known: dict[str, DocSpans] = self._read()
        self.used: dict[str, DocSpans] = {}
        self.rechunked: list[str] = []  # doc ids cut in this run

    def _read(self) -> dict[str, DocSpans]:
        if not self.path.is_file():
            return {}
        try:
            table = pl.read_parquet(self.path)
        except Exception:  # damaged: cut everything again, the file is rewritten
            return {}
        known: dict[str, DocSpans] = {}
        for key, s, e, prefix in table.select(list(_SCHEMA)).iter_rows():
            known.setdefault(key, []).append((s, e, prefix))
        return known

    def spans_of(self, doc_id: str, title: str, text: str) -> DocSpans:
        key = document_key(doc_id, title, text)
        spans = self.known.get(key)
        if spans is None:
            spans = self.cut(title, text)
            self.rechunked.append(doc_id)
        self.used[key] = spans
        return spans

    def save(self) -> None:
        """Write this run's documents' spans, then earlier ones up to :data:`MAX_KEPT_DOCUMENTS` documents (a folder
        edited back and forth, or two folders on one chunker, keep theirs); nothing when nothing was cut."""
        if not self.rechunked and len(self.used) == len(self.known):
            return
        kept = dict(self.used)
        for key, spans in self.known.items():
            if len(kept) >= MAX_KEPT_DOCUMENTS:
                break
            kept.setdefault(key, spans)
        rows = [(key, s, e, prefix) for key, spans in kept.items() for s, e, prefix in spans]
        table = pl.DataFrame(rows, schema=_SCHEMA, orient="row")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".parquet", dir=self.path.parent)
        os.close(fd)
        try:
            table.write_parquet(tmp)
            os.replace(tmp, self.path)
        finally:
            Path(tmp).unlink(missing_ok=True)
