"""The index stage: a chunker's chunks under one embedder -> a Qdrant collection, streamed from the vector cache.

A collection's name is its identity (:func:`collection_for`): dataset fingerprint, chunker spec, model key,
document prompt, index parameters and the payload layout version. The sweep builds it and serving finds it by the
same function, so neither can drift from the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragbench.core.cache import ChunkCache, VectorCache
from ragbench.core.progress import log, timed
from ragbench.core.resources import ensure_disk_space
from ragbench.core.schemas import index_texts, texts_at
from ragbench.embedding.embed import model_key, prompt_hashes
from ragbench.embedding.spec import EmbedderSpec
from ragbench.index.filters import ChunkPayloads
from ragbench.index.qdrant import EDGE_SHARD_POINTS, CollectionMeta, bm25_sparse, collection_name
from ragbench.index.spec import IndexSpec

#: part of the collection identity: payload layout changes rebuild collections
PAYLOAD_VERSION = "meta-v1"


def collection_for(dataset_fingerprint: str, chunker, embedder: EmbedderSpec, index_spec: IndexSpec,
                   sparse: bool = False) -> str:
    """The name of the collection holding ``chunker``'s chunks of the dataset under ``embedder`` (``sparse``: the
    one that also holds Qdrant's BM25 sparse vectors, for ``engine: qdrant`` hybrids)."""
    version = chunker.behaviour_version  # a new chunker version cuts new chunks: a new collection (none while 1)
    chunker_id = chunker.spec_id if version == 1 else f"{chunker.spec_id}+v{version}"
    return collection_name(dataset_fingerprint, chunker_id, model_key(embedder), embedder.document_prompt,
                           index_spec, payload=PAYLOAD_VERSION + ("+bm25" if sparse else ""))


def matches_cache(index, name: str, hashes: list[str], cache: VectorCache, key: str, distance: str,
                  sample: int = 256, seed: int = 0) -> str | None:
    """None when a seeded sample of the collection's stored vectors equals the cached vectors of the same chunks
    (unit-normalised under cosine, as Qdrant stores them; tolerance 1e-4), else what differs."""
    rng = np.random.default_rng(seed)
    ids = sorted(rng.choice(len(hashes), size=min(sample, len(hashes)), replace=False).tolist())
    stored = index.vectors(name, ids)
    expected = cache.fetch(key, "document", [hashes[i] for i in ids])
    if distance == "cosine":
        expected = expected / np.maximum(np.linalg.norm(expected, axis=1, keepdims=True), 1e-12)
    if stored.shape != expected.shape:
        return f"stored vectors have shape {stored.shape}, the cache {expected.shape}"
    worst = float(np.abs(stored - expected).max()) if len(ids) else 0.0
    return None if worst <= 1e-4 else f"stored vectors differ from the cached ones by up to {worst:.3g}"


@dataclass(frozen=True, eq=False)
class IndexInputs:
    """What one collection is built from: one ``chunker``'s ``chunks`` of a dataset's ``corpus`` (and its
    fingerprint), under ``embedder`` with the ``index_spec`` parameters; ``sparse``: also Qdrant's BM25 sparse
    vectors (for ``engine: qdrant`` hybrid search)."""

    dataset_fingerprint: str
    corpus: pl.DataFrame
    chunker: Any
    chunks: pl.DataFrame
    embedder: EmbedderSpec
    index_spec: IndexSpec
    sparse: bool = False


def index_stage(inputs: IndexInputs, cache: VectorCache, index, *, disk_root: Path = Path("."),
                reserve_bytes: int = 200 * 1024 * 1024) -> str:
    """Build (or reuse) the Qdrant collection of ``inputs.chunks`` under ``inputs.embedder``, streaming vectors from
    the cache.

    Point id = the chunk's row in ``chunks``; payload = chunk id, doc id and the document's metadata fields. With
    ``sparse``, each point also gets Qdrant's own BM25 sparse vector (for ``engine: qdrant`` hybrid search).
    """
    dataset_fingerprint, chunker, chunks = inputs.dataset_fingerprint, inputs.chunker, inputs.chunks
    embedder, index_spec, sparse = inputs.embedder, inputs.index_spec, inputs.sparse
    key = model_key(embedder)
    name = collection_for(dataset_fingerprint, chunker, embedder, index_spec, sparse)
    texts = index_texts(chunks)
    hashes = prompt_hashes(texts, embedder.document_prompt)
    rows: dict[str, list[int]] = {}
    for i, h in enumerate(hashes):
        rows.setdefault(h, []).append(i)
    payloads = ChunkPayloads(chunks, inputs.corpus)  # {"chunk_id", "doc_id", "meta": <doc metadata>} for filters

    def batches():
        for picked, mat in cache.iter_vectors(key, "document", set(rows)):
            ids = [i for h in picked for i in rows[h]]
            vecs = np.repeat(mat, [len(rows[h]) for h in picked], axis=0)
            if sparse:
                yield np.array(ids), vecs, payloads.at(ids), bm25_sparse(texts_at(texts, ids))
            else:
                yield np.array(ids), vecs, payloads.at(ids)

    first = next(cache.iter_vectors(key, "document", {hashes[0]}), None) if hashes else None
    dim = int(first[1].shape[1]) if first else 0
    meta = CollectionMeta(name=name, model_key=key, dim=dim, distance=index_spec.distance, count=chunks.height,
                          hnsw_m=index_spec.hnsw_m, ef_construct=index_spec.ef_construct,
                          full_scan_threshold_kb=index_spec.full_scan_threshold_kb, sparse=sparse,
                          chunks_key=ChunkCache.key(dataset_fingerprint, chunker),
                          document_prompt=embedder.document_prompt,
                          shard_points=0 if sparse else EDGE_SHARD_POINTS)
    ensure_disk_space(disk_root, chunks.height * dim * 4 * 3, f"index {name}", reserve_bytes=reserve_bytes)
    def verify(idx, collection: str) -> str | None:
        return matches_cache(idx, collection, hashes, cache, key, index_spec.distance)

    built, seconds = timed(index.ensure, meta, batches(), verify=verify)
    log.info("index %s: %d points, %s", name, chunks.height, f"built in {seconds:.1f} s" if built else "reused")
    return name
