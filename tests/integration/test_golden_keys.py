"""Content-addressed keys do not move: the chunk-cache keys, vector keys, collection names, config ids and the
sweep's spec hash of the bundled configs, recorded with the code before the package layout changed
(tests/fixtures/golden_keys_*.json), are what the code computes now. A change here would silently rebuild every
user's caches and collections and split their history into new config ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from conftest import ROOT

from ragbench.chunking import chunk_corpus
from ragbench.config import load_config
from ragbench.core.cache import ChunkCache
from ragbench.core.hashing import stable_hash, text_hash
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.embedding.embed import model_key
from ragbench.index.build import collection_for


def _digest(hashes) -> str:
    return hashlib.sha256("".join(sorted(hashes)).encode()).hexdigest()


def current_keys(config_file) -> dict:
    cfg = load_config(config_file)
    ds = load_dataset(cfg.dataset)
    canonical = cfg.canonical()
    canonical["dataset"]["path"] = str(Path(canonical["dataset"]["path"]).relative_to(ROOT))  # checkouts move
    out = {"dataset_fingerprint": ds.fingerprint, "sweep_spec_hash": stable_hash(canonical),
           "configs": {c.config_id: c.name for c in cfg.expand()}, "chunk_cache_keys": {}, "vector_keys": {},
           "collections": {}, "model_keys": {}, "query_vector_keys": {}}
    for e in cfg.embedders:
        out["model_keys"][e.label] = model_key(e)
        out["query_vector_keys"][e.label] = hashlib.sha256(
            "".join(sorted(text_hash(e.query_prompt + t) for t in ds.queries["text"])).encode()).hexdigest()
    for ch in cfg.chunkers:
        label = json.dumps(ch.canonical(), sort_keys=True)
        out["chunk_cache_keys"][label] = ChunkCache.key(ds.fingerprint, ch.canonical())
        chunks = chunk_corpus(ds, ch)
        for e in cfg.embedders:
            out["vector_keys"][f"{label} | {e.label}"] = _digest(text_hash(e.document_prompt + t)
                                                                  for t in index_texts(chunks))
            for sparse in (False, True):
                out["collections"][f"{label} | {e.label}" + (" +bm25" if sparse else "")] = collection_for(
                    ds.fingerprint, ch, e, cfg.index, sparse)
    return out


@pytest.mark.parametrize("name", ["demo", "demo-knobs"])
def test_keys_of_the_bundled_configs_are_unchanged(name):
    golden = json.loads((ROOT / "tests" / "fixtures" / f"golden_keys_{name.replace('-', '_')}.json").read_text())
    now = current_keys(ROOT / "configs" / f"{name}.yaml")
    for section in golden:
        assert now[section] == golden[section], f"{section} changed for configs/{name}.yaml"
