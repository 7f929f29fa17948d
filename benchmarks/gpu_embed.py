"""Embedding throughput of the packaged models on every device this machine has, and CUDA/CPU agreement.

For each packaged model: passages per second on the CPU and, when torch sees a GPU, on CUDA (fp16, as
``device: auto`` runs it) at every batch size of ``--cuda-batch-sizes`` (64 to 1,024) over ``--cuda-passages``
texts (the corpus repeated: a GPU needs more than a CPU to be timed), then the smallest cosine between a passage's
CUDA and CPU vectors (target >= 0.999: the cache serves both, see ``EmbedderSpec.device``). Target on an
H200-class GPU: at least 30,000 MiniLM passages/s at the best batch size.

    python benchmarks/gpu_embed.py [--dataset ../shared/datasets/scifact] [--passages 2000] [--cuda-passages 50000]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from ragbench.config import DatasetSpec
from ragbench.core.models import PACKAGED, load_sentence_transformer, resolve_device
from ragbench.data import load_dataset


def _encode(name: str, texts: list[str], device: str, batch_size: int) -> tuple[np.ndarray, float]:
    model = load_sentence_transformer(name, None, device)
    model.encode(texts[:batch_size], batch_size=batch_size, show_progress_bar=False)  # warm-up (kernels, caches)
    t0 = time.perf_counter()
    vecs = model.encode(texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32), time.perf_counter() - t0


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str((root / ".." / "shared" / "datasets" / "scifact").resolve()))
    ap.add_argument("--passages", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64, help="the CPU's batch size")
    ap.add_argument("--cuda-batch-sizes", default="64,128,256,512,1024")
    ap.add_argument("--cuda-passages", type=int, default=50_000)
    args = ap.parse_args()
    path = Path(args.dataset) if Path(args.dataset).exists() else root / "datasets" / "demo"
    ds = load_dataset(DatasetSpec(path=path, queries="all"))
    texts = [f"{t} {x}" for t, x in ds.corpus.select("title", "text").iter_rows()][: args.passages]
    gpu = resolve_device("auto") == "cuda"
    print(f"{len(texts)} passages from {path}; CUDA {'available' if gpu else 'not available'}")
    print(f"{'model':<24} {'device':<6} {'passages/s':>11} {'min cos vs CPU':>15}")
    for name in PACKAGED:
        cpu, seconds = _encode(name, texts, "cpu", args.batch_size)
        print(f"{name:<24} {'cpu':<6} {len(texts) / seconds:>11.1f} {'':>15}")
        if not gpu:
            continue
        many = (texts * (args.cuda_passages // max(len(texts), 1) + 1))[: args.cuda_passages]
        for batch in (int(b) for b in args.cuda_batch_sizes.split(",")):
            _, seconds = _encode(name, many, "cuda", batch)
            print(f"{name:<24} {'cuda':<6} {len(many) / seconds:>11.1f} {'':>15} batch {batch}")
        cuda, _ = _encode(name, texts, "cuda", args.batch_size * 4)
        cos = float((_unit(cpu) * _unit(cuda)).sum(axis=1).min())
        flag = "ok" if cos >= 0.999 else "BELOW 0.999"
        print(f"{name:<24} {'cuda':<6} {'':>11} {cos:>15.5f} {flag}")


if __name__ == "__main__":
    main()
