"""The onnx encoder backend: MiniLM exported once with torch and run by onnxruntime gives torch's vectors (fp32,
cosine >= 0.9999, the same token ids as sentence-transformers' own tokenization), int8 is another model whose
vectors are cached apart, a damaged export is made again, and a sweep ranks torch and int8 side by side."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.cache import VectorCache
from ragbench.core.errors import ModelError
from ragbench.core.hashing import file_sha256
from ragbench.core.models import load_sentence_transformer, resolve_model
from ragbench.data import load_dataset
from ragbench.embedding.embed import embed_texts, load_encoder, model_key
from ragbench.embedding.onnx_backend import ensure_export, export_folder, load_onnx_encoder
from ragbench.embedding.spec import EmbedderSpec
from ragbench.sweep import run_sweep

MODEL = "all-MiniLM-L6-v2"
TORCH = EmbedderSpec(model=MODEL)
FP32 = EmbedderSpec(model=MODEL, backend="onnx")
INT8 = EmbedderSpec(model=MODEL, backend="onnx", quantize="int8")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A models folder holding MiniLM's fp32 and int8 exports (made once for the module)."""
    root = tmp_path_factory.mktemp("models")
    for spec in (FP32, INT8):
        load_encoder(spec, "cpu", root)
    return root


def _texts() -> list[str]:
    """Demo documents (several longer than the 256-token window, so truncation is exercised), cut variously, with
    stray whitespace and non-ASCII text."""
    docs = load_dataset(load_config(DEMO.parent.parent / "configs" / "demo.yaml").dataset).corpus["text"].to_list()
    return [*docs, *(d[:200] for d in docs), "  leading and trailing spaces \n", "Ünïcode café ☕ — naïve", "x"]


def test_onnx_fp32_gives_torchs_vectors_and_tokens(store):
    texts = _texts()
    st = load_sentence_transformer(MODEL)
    onnx = load_encoder(FP32, "cpu", store)
    assert max(len(onnx.tokenizer.encode(t).ids) for t in texts) == 256  # some texts are truncated
    features = st.tokenize(texts)
    for i, t in enumerate(texts):  # the same tokens as sentence-transformers' own preprocessing
        ref = features["input_ids"][i][features["attention_mask"][i] > 0].tolist()
        assert onnx.tokenizer.encode(t).ids == ref, t[:60]
    for prompt in (None, "query: "):
        ref = st.encode(texts, prompt=prompt, batch_size=16, convert_to_numpy=True)
        got = onnx.encode(texts, prompt=prompt, batch_size=16)
        assert got.shape == ref.shape and got.dtype == np.float32
        assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)  # the Normalize module
        assert float((ref * got).sum(1).min()) >= 0.9999
    int8 = load_encoder(INT8, "cpu", store).encode(texts, batch_size=16)
    cos = (ref * int8).sum(1)
    assert 0.8 < float(cos.mean()) < 0.9999  # close, but another model


def test_backends_are_three_models_cached_apart(store, tmp_path):
    assert TORCH.canonical() == {k: v for k, v in FP32.canonical().items() if k != "backend"}  # torch: no new keys
    assert "backend" not in TORCH.canonical() and "quantize" not in FP32.canonical()
    keys = {model_key(s) for s in (TORCH, FP32, INT8)}
    assert len(keys) == 3 and model_key(TORCH) == resolve_model(MODEL).key
    assert len({s.spec_id for s in (TORCH, FP32, INT8)}) == 3
    assert [s.label for s in (TORCH, FP32, INT8)] == [MODEL, f"{MODEL}-onnx-fp32", f"{MODEL}-onnx-int8"]
    home = tmp_path / "home"
    shutil.copytree(store, home / "models")  # the home's model store already holds the exports
    cache = VectorCache(home / "cache")
    texts = _texts()[:12]
    vectors = {}
    for spec in (TORCH, INT8, FP32):
        vectors[spec.label], stats = embed_texts(texts, spec, "document", cache)
        assert stats.computed == stats.unique == len(set(texts))  # nothing served from another backend's vectors
    for spec in (TORCH, INT8, FP32):
        again, stats = embed_texts(texts, spec, "document", cache)
        assert stats.computed == 0 and np.array_equal(again, vectors[spec.label])
    assert not np.allclose(vectors[TORCH.label], vectors[INT8.label], atol=1e-3)
    assert float((vectors[TORCH.label] * vectors[FP32.label]).sum(1).min()) >= 0.9999


def test_a_damaged_export_is_made_again(store, tmp_path):
    folder = export_folder(store, resolve_model(MODEL))
    copy = tmp_path / "models"
    shutil.copytree(store, copy)
    graph = export_folder(copy, resolve_model(MODEL)) / "model.int8.onnx"
    manifest = json.loads((folder / "model.int8.onnx.json").read_text())
    assert manifest["sha256"] == file_sha256(folder / "model.int8.onnx") and manifest["quantize"] == "int8"
    data = bytearray(graph.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    graph.write_bytes(bytes(data))
    fp32_before = graph.with_name("model.fp32.onnx").stat().st_mtime_ns
    assert ensure_export(MODEL, "int8", copy) == graph
    assert file_sha256(graph) == manifest["sha256"]  # quantized again from the intact fp32 graph
    assert graph.with_name("model.fp32.onnx").stat().st_mtime_ns == fp32_before  # which was not exported again
    graph.with_name("model.fp32.onnx.json").unlink()  # a graph without its manifest is not trusted
    assert ensure_export(MODEL, "none", copy).with_name("model.fp32.onnx.json").is_file()


def test_unsupported_backend_choices_are_one_line_errors():
    with pytest.raises(ValueError, match="quantize: int8 needs backend: onnx"):
        EmbedderSpec(model=MODEL, quantize="int8")
    with pytest.raises(ValueError, match="backend: onnx runs on the CPU"):
        EmbedderSpec(model=MODEL, backend="onnx", device="cuda")
    with pytest.raises(ModelError, match="static model.*use backend: torch"):
        load_onnx_encoder("static-retrieval-m2v")


SWEEP = f"""name: onnx-backend
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: {MODEL}}}, {{model: {MODEL}, backend: onnx, quantize: int8}}]
retrievers: [{{kind: dense, exact: true}}]
metrics: {{cutoffs: [10], primary: ndcg@10}}
output: {{mlflow: false}}
"""


def test_a_sweep_ranks_the_int8_model_beside_torch(store, home, settings, tmp_path):
    shutil.copytree(store, home / "models", dirs_exist_ok=True)
    result = run_sweep(load_config(write_config(tmp_path / "onnx.yaml", SWEEP)), settings)
    assert result.n_failed == 0
    by_name = {o.name: o.metrics["ndcg@10"] for o in result.outcomes}
    assert sorted(by_name) == [f"whole | {MODEL} | dense-exact", f"whole | {MODEL}-onnx-int8 | dense-exact"]
    torch_score = by_name[f"whole | {MODEL} | dense-exact"]
    int8_score = by_name[f"whole | {MODEL}-onnx-int8 | dense-exact"]
    assert 0 < int8_score and abs(int8_score - torch_score) < 0.15  # its quality cost, measured like any candidate
