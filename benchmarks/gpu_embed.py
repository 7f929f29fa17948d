"""Embedding throughput on a GPU, and CUDA/CPU agreement, through the product's own encoding path.

Passages per second of all-MiniLM-L6-v2 on CUDA in fp16 (as ``device: auto`` runs it) at every batch size of
``--cuda-batch-sizes`` (64 to 1,024) over ``--cuda-passages`` texts (the passages repeated: a GPU needs more than a
CPU to be timed), two ways: the sweep's path (:func:`ragbench.core.models.encode_in_batches`, one model call per
batch, so a text's vector does not depend on where it ran; the tokenizer's threads on, as the sweep runs them on
CUDA, and again on one thread, as it ran them before) and sentence-transformers' own ``encode`` over all texts at once
(which sorts them by length first). For each batch size it also splits the time: tokenizing alone (CPU)
and the model alone (GPU, on batches tokenized before), and times the two overlapped (the next batch tokenized in a
thread while the GPU runs this one). Then the smallest cosine between a passage's CUDA vector and its CPU vector
(target >= 0.999: the cache serves both, see ``EmbedderSpec.device``). Target on an H200-class GPU: at least
30,000 MiniLM passages/s.

A GPU machine often has torch and sentence-transformers but not the rest of ragbench's dependencies, and takes a
small transfer. So the run is in two steps:

    python benchmarks/gpu_embed.py --pack DIR [--dataset ../shared/datasets/scifact] [--passages 2000]
        here: DIR gets the passages, their CPU vectors (the sweep's CPU path, fp32 weights) with this machine's
        passages/s, and the model folder with its weights in fp16 (what ``.half()`` makes of them on CUDA, so the
        GPU runs the same numbers; half the bytes)
    python benchmarks/gpu_embed.py --packed DIR [--cuda-passages 50000] [--cuda-batch-sizes 64,128,256,512,1024]
        on the GPU machine (needs only torch, sentence-transformers and ragbench/core on the path)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ragbench.core.models import device_batch_size, encode_in_batches, load_sentence_transformer, resolve_model
from ragbench.core.settings import TOKENIZER_THREADS, tokenizer_threads

MODEL = "all-MiniLM-L6-v2"
CPU_BATCH = 64  # EmbedderSpec.batch_size's default


def _timed(call) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = call()
    return out, time.perf_counter() - t0


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def pack(folder: Path, dataset: Path, passages: int) -> None:
    """Write ``folder``: passages.json, cpu_vectors.npy (the sweep's CPU path), facts.json, model/ (fp16 weights)."""
    from safetensors.torch import load_file, save_file

    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset

    ds = load_dataset(DatasetSpec(path=dataset, queries="all"))
    texts = [f"{t} {x}" for t, x in ds.corpus.select("title", "text").iter_rows()][:passages]
    model = load_sentence_transformer(MODEL, None, "cpu")
    model.encode(texts[:CPU_BATCH], batch_size=CPU_BATCH, show_progress_bar=False)  # warm-up
    vectors, seconds = _timed(lambda: encode_in_batches(model, texts, device_batch_size(CPU_BATCH, "cpu")))
    folder.mkdir(parents=True, exist_ok=True)
    source = resolve_model(MODEL)
    shutil.copytree(source.path, folder / "model", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("model.safetensors", "*.bin", ".gitattributes", "README.md"))
    weights = load_file(str(source.path / "model.safetensors"))
    save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
              str(folder / "model" / "model.safetensors"), metadata={"format": "pt"})
    (folder / "passages.json").write_text(json.dumps(texts))
    np.save(folder / "cpu_vectors.npy", vectors)
    facts = {"dataset": str(dataset), "passages": len(texts), "model": MODEL, "revision": source.revision,
             "cpu_passages_per_s": len(texts) / seconds, "cpu_batch": CPU_BATCH}
    (folder / "facts.json").write_text(json.dumps(facts, indent=1))
    print(f"packed {len(texts)} passages of {dataset} into {folder}; "
          f"CPU here {facts['cpu_passages_per_s']:.1f} passages/s")


def _tokenize(tokenizer, texts: list[str], max_length: int):
    """One batch as the model reads it: padded to its longest text, each cut at ``max_length`` tokens."""
    return tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")


def _forward(model, features) -> np.ndarray:
    """The model alone on one tokenized batch, on CUDA, its vectors back on the CPU."""
    features = {k: v.to("cuda", non_blocking=True) for k, v in features.items()}
    return model(features)["sentence_embedding"].float().cpu().numpy()


def _split(model, texts: list[str], batch: int) -> tuple[float, float, float]:
    """Seconds to tokenize ``texts`` alone, to run the model alone on batches tokenized before, and to do both
    with the next batch tokenized in a thread while the GPU runs this one."""
    import torch

    batches = [texts[j:j + batch] for j in range(0, len(texts), batch)]

    def tokenize(i: int):
        return _tokenize(model.tokenizer, batches[i], model.max_seq_length)

    features, tokenize_s = _timed(lambda: [tokenize(i) for i in range(len(batches))])
    with torch.inference_mode():
        _, model_s = _timed(lambda: [_forward(model, f) for f in features])

        def overlapped() -> None:
            with ThreadPoolExecutor(1) as pool:
                ahead = pool.submit(tokenize, 0)
                for i in range(len(batches)):
                    f = ahead.result()
                    if i + 1 < len(batches):
                        ahead = pool.submit(tokenize, i + 1)
                    _forward(model, f)

        _, overlap_s = _timed(overlapped)
    return tokenize_s, model_s, overlap_s


_worker_tokenizer = None  # (tokenizer, max_length) in each tokenizing process


def _load_worker_tokenizer(folder: str, max_length: int) -> None:
    global _worker_tokenizer
    from transformers import AutoTokenizer

    _worker_tokenizer = (AutoTokenizer.from_pretrained(folder), max_length)


def _worker_tokenize(texts: list[str]):
    tokenizer, max_length = _worker_tokenizer
    return _tokenize(tokenizer, texts, max_length)


def _pooled(model, folder: Path, texts: list[str], batch: int, processes: int) -> tuple[float, float]:
    """Seconds to tokenize ``texts`` in ``processes`` worker processes alone, and with the GPU running each batch
    as it comes back (the tokenizer's own threads scale poorly on a many-core host)."""
    import multiprocessing

    import torch

    batches = [texts[j:j + batch] for j in range(0, len(texts), batch)]
    context = multiprocessing.get_context("spawn")  # never fork a process that holds CUDA
    with context.Pool(processes, _load_worker_tokenizer, (str(folder / "model"), model.max_seq_length)) as pool:
        pool.map(_worker_tokenize, batches[:processes])  # workers started and warm
        _, tokenize_s = _timed(lambda: pool.map(_worker_tokenize, batches, chunksize=1))
        with torch.inference_mode():
            _, overlap_s = _timed(lambda: [_forward(model, f)
                                           for f in pool.imap(_worker_tokenize, batches, chunksize=1)])
    return tokenize_s, overlap_s


def packed(folder: Path, many: int, batch_sizes: list[int], processes: int = 0) -> None:
    """Time CUDA encoding of the passages in ``folder`` and compare its vectors with the CPU's there."""
    import torch

    missing = [name for name in ("passages.json", "facts.json", "cpu_vectors.npy", "model")
               if not (folder / name).exists()]
    if missing:
        raise SystemExit(f"{folder}: not a packed folder (no {', '.join(missing)}): run --pack {folder} first")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU visible to torch")
    os.environ[TOKENIZER_THREADS] = "false"  # as ragbench's settings leave it outside a CUDA encode
    texts = json.loads((folder / "passages.json").read_text())
    facts = json.loads((folder / "facts.json").read_text())
    model = load_sentence_transformer(str(folder / "model"), None, "cuda")
    print(f"{torch.cuda.get_device_name(0)}; torch {torch.__version__}; {len(texts)} passages; "
          f"max_seq_length {model.max_seq_length}; CPU (packing machine) {facts['cpu_passages_per_s']:.1f} passages/s")
    repeated = (texts * (many // len(texts) + 1))[:many]
    print(f"{'batch':>6} {'sweep path/s':>13} {'1 thread/s':>11} {'st.encode/s':>12} {'tokenize s':>11} "
          f"{'model s':>8} {'overlap/s':>10}   ({len(repeated)} passages)")
    for batch in batch_sizes:
        model.encode(repeated[:batch], batch_size=batch, show_progress_bar=False)  # warm-up at this shape
        _, sweep_s = _timed(lambda: encode_in_batches(model, repeated, batch, device="cuda"))
        # the same path with the tokenizer on one thread, as the sweep ran on CUDA before (2026-12-04)
        _, one_thread_s = _timed(lambda: encode_in_batches(model, repeated, batch, device="cpu"))
        with tokenizer_threads():  # the rest as measured on 2026-12-04: the tokenizer's threads on
            _, st_s = _timed(lambda: model.encode(repeated, batch_size=batch, convert_to_numpy=True,
                                                  show_progress_bar=False))
            try:
                tokenize_s, model_s, overlap_s = _split(model, repeated, batch)
                split = f"{tokenize_s:>11.2f} {model_s:>8.2f} {len(repeated) / overlap_s:>10.0f}"
            except Exception as e:  # the split uses the model's internals; the rates above stand without it
                split = f"split failed: {type(e).__name__}: {e}"
        print(f"{batch:>6} {len(repeated) / sweep_s:>13.0f} {len(repeated) / one_thread_s:>11.0f} "
              f"{len(repeated) / st_s:>12.0f} {split}", flush=True)
        if processes:
            with tokenizer_threads():
                tokenize_s, overlap_s = _pooled(model, folder, repeated, batch, processes)
            print(f"{'':>6} {processes} tokenizing processes: tokenize alone {len(repeated) / tokenize_s:.0f}/s, "
                  f"overlapped with the GPU {len(repeated) / overlap_s:.0f} passages/s", flush=True)
    cuda = encode_in_batches(model, texts, device_batch_size(facts["cpu_batch"], "cuda"), device="cuda")
    cos = (_unit(np.load(folder / "cpu_vectors.npy")) * _unit(cuda)).sum(axis=1)
    print(f"CUDA vs CPU cosine over {len(texts)} passages: min {cos.min():.5f}, mean {cos.mean():.6f} "
          f"({'ok' if cos.min() >= 0.999 else 'BELOW 0.999'})")


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pack", type=Path, help="write the GPU machine's folder here")
    ap.add_argument("--packed", type=Path, help="run on the GPU machine from this folder")
    ap.add_argument("--dataset", type=Path, help="a BEIR folder (default: ../shared/datasets/scifact when present, "
                                                 "else datasets/demo)")
    ap.add_argument("--passages", type=int, default=2000)
    ap.add_argument("--cuda-batch-sizes", default="64,128,256,512,1024")
    ap.add_argument("--cuda-passages", type=int, default=50_000)
    ap.add_argument("--processes", type=int, default=0, help="also tokenize in this many processes (0: not)")
    args = ap.parse_args()
    if args.pack:
        dataset = args.dataset
        if dataset is None:
            scifact = (root / ".." / "shared" / "datasets" / "scifact").resolve()
            dataset = scifact if scifact.is_dir() else root / "datasets" / "demo"
        elif not dataset.is_dir():
            ap.error(f"--dataset {dataset}: no such folder")
        pack(args.pack, dataset, args.passages)
    elif args.packed:
        packed(args.packed, args.cuda_passages, [int(b) for b in args.cuda_batch_sizes.split(",")], args.processes)
    else:
        ap.error("give --pack DIR (here) or --packed DIR (on the GPU machine)")


if __name__ == "__main__":
    main()
