"""The ``onnx`` encoder backend: a sentence-transformers model run through onnxruntime on the CPU.

The model's transformer is exported once per weights revision with ``torch.onnx.export`` (TorchScript exporter,
opset :data:`OPSET`) into the home's model store, ``<home>/models/onnx/<hash of model key, opset, export
version>/``; ``quantize: int8`` adds a dynamically quantized copy (``onnxruntime.quantization.quantize_dynamic``:
the MatMul weights in int8 with one scale per output channel, activations quantized per batch at run time). Each
graph file has a manifest holding its SHA-256, checked when it is loaded: a damaged or half-written export is
deleted and made again.

Encoding follows the model folder's own sentence-transformers pipeline (``modules.json``): its ``tokenizer.json``
with truncation at ``max_seq_length`` (the spec's, else ``sentence_bert_config.json``'s), the transformer's
last hidden state, the pooling that ``1_Pooling/config.json`` names (mean over the attention mask, CLS token or
max), then L2 normalisation when a ``Normalize`` module follows. Other module stacks (Dense layers, routers) are
refused with a one-line error. fp32 vectors equal torch's to cosine >= 0.9999
(tests/integration/test_onnx_backend.py); int8 vectors are a different model and are cached apart.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import ModelError
from ragbench.core.hashing import file_sha256, stable_hash
from ragbench.core.locks import file_lock
from ragbench.core.models import ResolvedModel, load_sentence_transformer, model_store, resolve_model
from ragbench.core.progress import log

#: ONNX opset of the exported graph
OPSET = 17
#: version of the export code: bump it when the exported graph changes, so exports (and vectors) are made anew
EXPORT_VERSION = 1
QUANTIZE = ("none", "int8")
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOLINGS = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max"}


def _need_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise ModelError("embedder backend onnx needs onnxruntime and onnx: pip install onnxruntime onnx") from None
    return onnxruntime


@dataclass(frozen=True)
class Pipeline:
    """What the model folder's sentence-transformers modules do around the transformer."""

    max_seq_length: int
    do_lower_case: bool
    pooling: str  # mean | cls | max
    normalize: bool


def read_pipeline(name: str, path: Path, max_seq_length: int | None) -> Pipeline:
    """The pipeline of the model folder ``path``: Transformer, Pooling and an optional Normalize (``modules.json``);
    anything else is a :class:`ModelError` naming the module the onnx backend does not run."""
    try:
        modules = [m["type"] for m in json.loads((path / "modules.json").read_text())]
        pool_path = next(m["path"] for m in json.loads((path / "modules.json").read_text()) if m["type"] == _POOLING)
        pool = json.loads((path / pool_path / "config.json").read_text())
        bert = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration) as e:
        raise ModelError(f"model {name!r}: backend onnx needs a sentence-transformers folder with modules.json, a "
                         f"Pooling module and sentence_bert_config.json ({path}: {e})") from None
    if modules[:2] != [_TRANSFORMER, _POOLING] or modules[2:] not in ([], [_NORMALIZE]):
        raise ModelError(f"model {name!r}: backend onnx runs Transformer + Pooling (+ Normalize) models; its "
                         f"modules.json has {', '.join(m.rsplit('.', 1)[-1] for m in modules)} (use backend: torch)")
    modes = [v for k, v in _POOLINGS.items() if pool.get(k)]
    others = [k for k, v in pool.items() if k.startswith("pooling_mode_") and v and k not in _POOLINGS]
    if len(modes) != 1 or others or pool.get("include_prompt", True) is False:
        raise ModelError(f"model {name!r}: backend onnx pools by one of mean, cls or max with the prompt included; "
                         f"{path / pool_path / 'config.json'} asks otherwise (use backend: torch)")
    limit = max_seq_length or bert.get("max_seq_length")
    if not limit:
        raise ModelError(f"model {name!r}: no max_seq_length in {path / 'sentence_bert_config.json'}; set the "
                         f"embedder's max_seq_length")
    return Pipeline(int(limit), bool(bert.get("do_lower_case")), modes[0], modules[2:] == [_NORMALIZE])


def export_folder(store: Path, m: ResolvedModel) -> Path:
    """Where the exports of model ``m`` live: named by its weights (model key), the opset and the export version."""
    return store / "onnx" / stable_hash([m.key, OPSET, EXPORT_VERSION])


def _verified(graph: Path) -> bool:
    manifest = graph.with_name(graph.name + ".json")
    try:
        return json.loads(manifest.read_text())["sha256"] == file_sha256(graph)
    except (OSError, ValueError, KeyError):
        return False


def _publish(tmp: Path, graph: Path, source: str, quantize: str) -> None:
    """Move a finished graph into place, then write its manifest (a graph without a manifest is not trusted)."""
    os.replace(tmp, graph)
    manifest = {"sha256": file_sha256(graph), "source": source, "quantize": quantize, "opset": OPSET,
                "export_version": EXPORT_VERSION}
    write_text_atomically(graph.with_name(graph.name + ".json"), json.dumps(manifest, indent=1))


def _export_fp32(name: str, m: ResolvedModel, graph: Path) -> None:
    import torch

    st = load_sentence_transformer(name, None, "cpu")
    hf = st[0].auto_model.eval()
    sample = st.tokenize(["an example sentence", "a second, longer example sentence"])
    inputs = [k for k in ("input_ids", "attention_mask", "token_type_ids") if k in sample]

    class Wrapper(torch.nn.Module):  # the transformers 5 forward takes keyword arguments only
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *tensors):
            return self.model(**dict(zip(inputs, tensors))).last_hidden_state

    tmp = graph.with_name(f"{graph.name}.{os.getpid()}.tmp")
    axes = {k: {0: "batch", 1: "tokens"} for k in [*inputs, "last_hidden_state"]}
    with torch.no_grad():
        torch.onnx.export(Wrapper(hf), tuple(sample[k] for k in inputs), str(tmp), input_names=inputs,
                          output_names=["last_hidden_state"], dynamic_axes=axes, dynamo=False, opset_version=OPSET)
    _publish(tmp, graph, m.key, "none")


def _quantize_int8(fp32: Path, graph: Path, source: str) -> None:
    _need_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = graph.with_name(f"{graph.name}.{os.getpid()}.tmp.onnx")
    # per-channel int8 weights of the MatMuls: per-tensor scales gave a minimum cosine to torch of 0.90 on SciFact
    # abstracts, per-channel 0.991 (and the same speed)
    quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"])
    _publish(tmp, graph, source, "int8")


def ensure_export(name: str, quantize: str, store: Path | None = None) -> Path:
    """The verified ONNX graph of model ``name`` (``quantize`` none or int8), exported now if missing or damaged.

    One process exports at a time (a lock in the folder); the others wait and then find it made."""
    if quantize not in QUANTIZE:
        raise ModelError(f"quantize {quantize!r}: expected one of {', '.join(QUANTIZE)}")
    m = resolve_model(name)
    if m.path is None or m.kind != "st":
        raise ModelError(f"model {name!r}: backend onnx exports a local sentence-transformers folder; this model is "
                         f"{'a static model' if m.kind == 'model2vec' else 'not local'} (use backend: torch)")
    store = store or model_store() or Path.home() / ".cache" / "ragbench" / "models"
    folder = export_folder(store, m)
    folder.mkdir(parents=True, exist_ok=True)
    fp32, int8 = folder / "model.fp32.onnx", folder / "model.int8.onnx"
    wanted = int8 if quantize == "int8" else fp32
    if _verified(wanted):
        return wanted
    with file_lock(folder / "export.lock", f"ONNX export of {name}", wait_seconds=600):
        _remake_unless_verified(fp32, lambda: _export_fp32(name, m, fp32))
        if quantize == "int8":
            _remake_unless_verified(int8, lambda: _quantize_int8(fp32, int8, m.key))
    return wanted


def _remake_unless_verified(graph: Path, make) -> None:
    if _verified(graph):
        return
    if graph.exists():
        log.warning("ONNX export %s does not match its manifest: made again", graph)
    graph.unlink(missing_ok=True)
    log.info("exporting to ONNX: %s", graph)
    make()


class OnnxEncoder:
    """``encode(texts, prompt=...)`` like a SentenceTransformer's, through an onnxruntime session."""

    def __init__(self, graph: Path, tokenizer_file: Path, pipeline: Pipeline, threads: int | None = None):
        ort = _need_onnxruntime()
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(pipeline.max_seq_length, strategy="longest_first")
        self.pipeline = pipeline
        self._lock = threading.Lock()

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=True)
        width = max(len(e.ids) for e in encodings)
        feeds = {k: np.zeros((len(texts), width), dtype=np.int64) for k in self.inputs}
        for i, e in enumerate(encodings):
            n = len(e.ids)
            for k, values in (("input_ids", e.ids), ("attention_mask", e.attention_mask),
                              ("token_type_ids", e.type_ids)):
                if k in feeds:
                    feeds[k][i, :n] = values
        hidden = self.session.run(["last_hidden_state"], feeds)[0].astype(np.float32)
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        if self.pipeline.pooling == "mean":
            vectors = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
        elif self.pipeline.pooling == "cls":
            vectors = hidden[:, 0]
        else:  # max over real tokens (padding set below any value, as sentence-transformers does)
            vectors = np.where(mask > 0, hidden, -1e9).max(1)
        if self.pipeline.normalize:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors

    def encode(self, texts: list[str], prompt: str | None = None, batch_size: int = 64, **_ignored) -> np.ndarray:
        """Vectors of ``prompt + text`` for each text (row i for text i), in batches of ``batch_size`` sorted by
        length (less padding); the keyword arguments a SentenceTransformer's encode also takes are accepted."""
        full = [(prompt or "") + t for t in texts]
        if self.pipeline.do_lower_case:
            full = [t.lower() for t in full]
        if not full:
            return np.zeros((0, 0), dtype=np.float32)
        order = sorted(range(len(full)), key=lambda i: -len(full[i]))
        out: np.ndarray | None = None
        with self._lock:  # one run at a time per session (onnxruntime threads within the run)
            for j in range(0, len(order), batch_size):
                rows = order[j:j + batch_size]
                vectors = self._batch([full[i] for i in rows])
                if out is None:
                    out = np.empty((len(full), vectors.shape[1]), dtype=np.float32)
                out[rows] = vectors
        return out


@lru_cache(maxsize=4)
def load_onnx_encoder(name: str, quantize: str = "none", max_seq_length: int | None = None,
                      store: Path | None = None) -> OnnxEncoder:
    """The (memoised) onnx encoder of model ``name``: exported on first use, see :func:`ensure_export`."""
    _need_onnxruntime()
    m = resolve_model(name)
    if m.path is None or m.kind != "st" or not (m.path / "tokenizer.json").is_file():
        raise ModelError(f"model {name!r}: backend onnx runs a local sentence-transformers folder with a "
                         f"tokenizer.json; this model is {'a static model' if m.kind == 'model2vec' else 'not one'} "
                         f"(use backend: torch)")
    pipeline = read_pipeline(name, m.path, max_seq_length)  # refused before anything is exported
    return OnnxEncoder(ensure_export(name, quantize, store), m.path / "tokenizer.json", pipeline)
