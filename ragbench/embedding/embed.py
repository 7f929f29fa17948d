"""Embedding stage: texts -> vectors through sentence-transformers, behind the content-addressed cache.

The cache key of a text is the hash of exactly what the model sees (role prompt + text), under the model's id and
weights revision, so changing only retrieval settings (k, fusion, reranking) never re-embeds anything.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ragbench.chunking.chunk_statistics import window_statistics
from ragbench.core.cache import EmbedStats, VectorCache
from ragbench.core.errors import ModelError
from ragbench.core.hashing import text_hash
from ragbench.core.models import (
    FINETUNED_PREFIX,
    configure_model_store,
    count_tokens,
    device_batch_size,
    encode_in_batches,
    load_sentence_transformer,
    load_tokenizer,
    resolve_device,
    resolve_model,
    special_tokens,
)
from ragbench.core.progress import log, progress
from ragbench.core.resources import ensure_disk_space, rss_bytes
from ragbench.core.schemas import TextColumn, text_batches, text_lengths, texts_at
from ragbench.core.workers import InProcess, Workers, chunked
from ragbench.embedding.spec import EmbedderSpec

Role = Literal["query", "document"]


def model_key(spec: EmbedderSpec) -> str:
    """Model id + weights revision (+ sequence length when overridden, + ``~onnx-fp32``/``~onnx-int8`` for the
    onnx backend): the identity of a vector space. A spec
    with ``finetune`` names its vectors only once the sweep has swapped in the fine-tuned model (never the base's)."""
    if spec.finetune is not None and not spec.model.startswith(FINETUNED_PREFIX):
        raise ModelError(f"embedder {spec.label}: its finetune settings are not applied yet (the sweep trains it "
                         f"first, ragbench.embedding.finetune.resolve_finetuned); refusing to embed with the base model")
    key = resolve_model(spec.model).key
    key = f"{key}~L{spec.max_seq_length}" if spec.max_seq_length else key
    key = f"{key}~{spec.backend_suffix}" if spec.backend_suffix else key  # onnx: another vector space
    # a new embedding-code version makes new vectors (keys of version 1 unchanged:
    # tests/integration/test_golden_keys.py)
    return key if type(spec).version == 1 else f"{key}~v{type(spec).version}"


def embedding_window(spec: EmbedderSpec) -> int | None:
    """Content tokens the embedder reads of one text: its max sequence length (``spec.max_seq_length``, else the
    model folder's ``sentence_bert_config.json``) minus the special tokens its tokenizer adds ([CLS] and [SEP] for
    BERT-style models). None when it reads every token (a static Model2Vec model) or no limit is recorded."""
    m = resolve_model(spec.model)
    if m.kind == "model2vec":
        return None  # static embeddings: every token is looked up
    limit = spec.max_seq_length
    if limit is None and m.path is not None and (m.path / "sentence_bert_config.json").is_file():
        limit = json.loads((m.path / "sentence_bert_config.json").read_text()).get("max_seq_length")
    if not limit:
        return None
    return int(limit) - special_tokens(spec.model)


def embedding_window_statistics(texts: TextColumn, spec: EmbedderSpec,
                                counts: Sequence[int] | None = None) -> dict[str, float]:
    """:func:`ragbench.chunking.chunk_statistics.window_statistics` of document ``texts`` as this embedder sees them (document
    prompt + text, its own tokenizer); {} when the model has no local tokenizer to count with. A model that reads
    every token (no window) is not tokenized: the counts would not change the result, and on a static model that
    pass cost more CPU than the embedding itself (benchmarks/scale.py). ``counts``: the texts' tokens as this
    embedder reads them, when the caller has counted them already (not counted again)."""
    try:
        window = embedding_window(spec)
        if window is None:
            load_tokenizer(spec.model)  # same answer as before for a model without a local tokenizer: {}
            return window_statistics([0] * len(texts), None)
        if counts is None:
            counts = count_tokens(texts, spec.model, prefix=spec.document_prompt)
        return window_statistics(counts, window)
    except ModelError:
        return {}


#: texts hashed at a time (a polars column becomes Python strings one batch at a time)
HASH_BATCH = 50_000


def prompt_hashes(texts: TextColumn, prompt: str) -> list[str]:
    """The vector cache's key of each text: ``text_hash(prompt + text)`` (what the model reads)."""
    return [text_hash(prompt + t) for batch in text_batches(texts, HASH_BATCH) for t in batch]


def embed_texts(texts: TextColumn, spec: EmbedderSpec, role: Role, cache: VectorCache,
                segment_rows: int = 512, return_vectors: bool = True, reserve_bytes: int = 200 * 1024 * 1024,
                workers: Workers | None = None) -> tuple[np.ndarray | None, EmbedStats]:
    """Vectors for ``texts`` (row i for text i), computing only what the cache lacks.

    Missing texts are de-duplicated, sorted by length (less padding per batch), cut into segments of
    ``segment_rows`` and each segment is encoded and stored as soon as it is done, so an interrupted run resumes
    where it died. Segments are grouped into shards that run on ``workers`` (here by default; a Dask cluster
    scales out): the same segments, encoded the same way, wherever they run. With ``return_vectors=False``
    nothing is held in memory beyond one segment (the index streams from the cache); ``texts`` may be a polars
    column, read into Python strings one batch at a time (here, one shard at a time).
    """
    prompt = spec.prompt_for(role)
    key = model_key(spec)
    hashes = prompt_hashes(texts, prompt)
    encode_seconds: list[float] = []  # model time here (none when the shards run on workers)
    first_row: dict[str, int] = {}  # each distinct text: the row it first appears at
    for row, h in enumerate(hashes):
        first_row.setdefault(h, row)
    known = cache.known(key, role)
    chars = text_lengths(texts)
    missing = sorted((h for h in first_row if h not in known), key=lambda h: -chars[first_row[h]])
    if missing:
        ensure_disk_space(cache.root, len(missing) * 4 * 1024 * 2, f"embedding {len(missing)} texts",
                          reserve_bytes=reserve_bytes)
        per_shard = 1 if workers is None or isinstance(workers, InProcess) else 2
        groups = list(chunked(list(chunked(missing, segment_rows)), per_shard))

        def shard(group: list[list[str]]) -> EmbedShard:
            return EmbedShard(spec, role, key, cache.root.parent,
                              [(seg, texts_at(texts, [first_row[h] for h in seg])) for seg in group])

        with progress(f"embed {spec.label} [{role}]", len(missing)) as advance:
            if workers is None or isinstance(workers, InProcess):  # here: the bar moves per batch
                for group in groups:  # each shard's texts made only when it runs
                    embed_shard(shard(group), on_batch=advance, encode_seconds=encode_seconds)
            else:  # on a cluster: per shard, as each one comes back
                workers.map(embed_shard, [shard(g) for g in groups], on_done=advance)
    stats = EmbedStats(requested=len(texts), unique=len(first_row), cached=len(first_row) - len(missing),
                       computed=len(missing), encode_seconds=sum(encode_seconds))
    log.info("embed %s [%s]: %d texts, %d unique, %d cached, %d computed", spec.label, role, stats.requested,
             stats.unique, stats.cached, stats.computed)
    if not return_vectors:
        return None, stats
    return cache.fetch(key, role, hashes), stats


def encode_uncached(texts: list[str], spec: EmbedderSpec, role: Role) -> np.ndarray:
    """Vectors of ``texts`` straight from the model (role prompt prepended, batched as :func:`embed_shard` batches
    them), bypassing the cache: what a serving process pays for a query it has not seen."""
    prompt = spec.prompt_for(role)
    device = encoder_device(spec)
    return encode_in_batches(load_encoder(spec, device), texts, device_batch_size(spec.batch_size, device), prompt,
                             device=device)


def encoder_device(spec: EmbedderSpec) -> str:
    """Where ``spec`` encodes: its ``device`` resolved (:func:`~ragbench.core.models.resolve_device`) for the torch
    backend; the CPU for ONNX (onnxruntime's CPU provider)."""
    return resolve_device(spec.device) if spec.backend == "torch" else "cpu"


#: the first load of each encoder in this process, by :func:`_encoder_id`: its wall seconds (the runtime's import
#: included) and the resident bytes the model added (its runtime imported before)
_FIRST_LOADS: dict[tuple, tuple[float, int]] = {}


def load_encoder(spec: EmbedderSpec, device: str, store: Path | None = None):
    """The model that encodes for ``spec``: a SentenceTransformer (backend torch) or an
    :class:`~ragbench.embedding.onnx_backend.OnnxEncoder` exported into ``store`` (default: the home's models
    folder); both answer ``encode(texts, prompt=, batch_size=, convert_to_numpy=, show_progress_bar=)``. Both are
    memoised; the first call is timed and its memory measured (:func:`first_load`)."""
    key = _encoder_id(spec)
    if key in _FIRST_LOADS:
        return _load_encoder(spec, device, store)
    t0 = time.perf_counter()
    import_runtime(spec)
    resident = rss_bytes()
    model = _load_encoder(spec, device, store)
    _FIRST_LOADS[key] = (time.perf_counter() - t0, max(rss_bytes() - resident, 0))
    return model


def _load_encoder(spec: EmbedderSpec, device: str, store: Path | None):
    if spec.backend == "onnx":
        from ragbench.embedding.onnx_backend import load_onnx_encoder

        return load_onnx_encoder(spec.model, spec.quantize, spec.max_seq_length, store)
    return load_sentence_transformer(spec.model, spec.max_seq_length, device)


def import_runtime(spec: EmbedderSpec) -> None:
    """Import the library that runs ``spec``'s encoder: onnxruntime (backend onnx), else sentence-transformers
    and torch."""
    if spec.backend == "onnx":
        import onnxruntime  # noqa: F401
    else:
        import sentence_transformers  # noqa: F401


def _encoder_id(spec: EmbedderSpec) -> tuple:
    return spec.model, spec.backend_suffix, spec.max_seq_length


def first_load(spec: EmbedderSpec) -> tuple[float, int] | None:
    """``(seconds, bytes)`` of the first load of ``spec``'s encoder in this process: wall seconds, its runtime's
    import included, and the growth of resident memory over the model's load alone (0 where it cannot be read);
    None when it was not loaded here."""
    return _FIRST_LOADS.get(_encoder_id(spec))


@dataclass(frozen=True)
class EmbedShard:
    """Segments ``(hashes, texts)`` of one model and role, to encode and store in the cache under ``cache_root``."""

    spec: EmbedderSpec
    role: str
    key: str
    cache_root: Path
    segments: list[tuple[list[str], list[str]]]


def embed_shard(shard: EmbedShard, on_batch=None, encode_seconds: list[float] | None = None) -> int:
    """Encode each segment of ``shard`` (one model call per batch; ``on_batch(n)`` after each) and append it to the
    cache (one atomic segment file each); returns the number of texts. The model is loaded once per process and
    reused by every later shard. The wall seconds of each model call go to ``encode_seconds`` when given."""
    spec = shard.spec
    prompt = spec.prompt_for(shard.role)
    device = encoder_device(spec)
    if spec.model.startswith(FINETUNED_PREFIX):  # on a Dask worker too: the home's fine-tuned models
        configure_model_store(shard.cache_root.parent / "models")
    model = load_encoder(spec, device, shard.cache_root.parent / "models")
    batch_size = device_batch_size(spec.batch_size, device)
    cache = VectorCache(shard.cache_root)

    def after_call(n: int, seconds: float) -> None:
        if encode_seconds is not None:
            encode_seconds.append(seconds)
        if on_batch is not None:
            on_batch(n)

    done = 0
    for hashes, texts in shard.segments:
        vectors = encode_in_batches(model, texts, batch_size, prompt, after_call, device)
        cache.append(shard.key, shard.role, hashes, vectors)
        done += len(hashes)
    return done
