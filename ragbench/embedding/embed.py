"""Embedding stage: texts -> vectors through sentence-transformers, behind the content-addressed cache.

The cache key of a text is the hash of exactly what the model sees (role prompt + text), under the model's id and
weights revision, so changing only retrieval settings (k, fusion, reranking) never re-embeds anything.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ragbench.core.cache import EmbedStats, VectorCache
from ragbench.core.hashing import text_hash
from ragbench.core.models import load_sentence_transformer, resolve_model
from ragbench.core.progress import log, progress
from ragbench.core.resources import ensure_disk_space
from ragbench.embedding.spec import EmbedderSpec

Role = Literal["query", "document"]


def model_key(spec: EmbedderSpec) -> str:
    """Model id + weights revision (+ sequence length when overridden): the identity of a vector space."""
    key = resolve_model(spec.model).key
    return f"{key}~L{spec.max_seq_length}" if spec.max_seq_length else key


def embed_texts(texts: list[str], spec: EmbedderSpec, role: Role, cache: VectorCache, segment_rows: int = 512,
                return_vectors: bool = True, reserve_bytes: int = 200 * 1024 * 1024) -> tuple[np.ndarray | None, EmbedStats]:
    """Vectors for ``texts`` (row i for text i), computing only what the cache lacks.

    Missing texts are de-duplicated, sorted by length (less padding per batch), encoded in segments of
    ``segment_rows`` and each segment is stored as soon as it is done, so an interrupted run resumes where it died.
    With ``return_vectors=False`` nothing is held in memory beyond one segment (the index streams from the cache).
    """
    prompt = spec.query_prompt if role == "query" else spec.document_prompt
    key = model_key(spec)
    hashes = [text_hash(prompt + t) for t in texts]
    unique: dict[str, str] = dict(zip(hashes, texts))
    known = cache.known(key, role)
    missing = sorted((h for h in unique if h not in known), key=lambda h: -len(unique[h]))
    if missing:
        ensure_disk_space(cache.root, len(missing) * 4 * 1024 * 2, f"embedding {len(missing)} texts",
                          reserve_bytes=reserve_bytes)
        model = load_sentence_transformer(spec.model, spec.max_seq_length)
        with progress(f"embed {spec.label} [{role}]", len(missing)) as advance:
            for i in range(0, len(missing), segment_rows):
                seg = missing[i:i + segment_rows]
                parts = []
                for j in range(0, len(seg), spec.batch_size):  # one batch per call: the bar moves per batch
                    batch = seg[j:j + spec.batch_size]
                    parts.append(model.encode([unique[h] for h in batch], prompt=prompt or None,
                                              batch_size=spec.batch_size, convert_to_numpy=True,
                                              show_progress_bar=False))
                    advance(len(batch))
                cache.append(key, role, seg, np.concatenate(parts))
    stats = EmbedStats(requested=len(texts), unique=len(unique), cached=len(unique) - len(missing),
                       computed=len(missing))
    log.info("embed %s [%s]: %d texts, %d unique, %d cached, %d computed", spec.label, role, stats.requested,
             stats.unique, stats.cached, stats.computed)
    if not return_vectors:
        return None, stats
    return cache.fetch(key, role, hashes), stats
