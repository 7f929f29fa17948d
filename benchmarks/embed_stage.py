"""Embed-stage overhead: raw ``SentenceTransformer.encode`` of the unique chunk texts vs the pipeline's embed stage.

Both run in this process on the same texts, one after the other (raw first, so the pipeline gets no warm-up
advantage beyond the model load both share). Prints wall times, their ratio (target <= 1.10), and peak memory.

    python benchmarks/embed_stage.py [--dataset ../shared/datasets/scifact] [--max-docs 1500] [--model all-MiniLM-L6-v2]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from ragbench.chunking import chunk_corpus
from ragbench.config import DatasetSpec, EmbedderSpec, FixedChunker
from ragbench.core.cache import VectorCache
from ragbench.core.models import load_sentence_transformer
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.embedding.embed import embed_texts


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str((root / ".." / "shared" / "datasets" / "scifact").resolve()))
    ap.add_argument("--max-docs", type=int, default=1500)
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="alternating raw/pipeline rounds (best of each)")
    args = ap.parse_args()

    ds = load_dataset(DatasetSpec(path=args.dataset, max_docs=args.max_docs, queries="all"))
    chunks = chunk_corpus(ds, FixedChunker(size=128, overlap=32))
    texts = list(dict.fromkeys(index_texts(chunks).to_list()))
    spec = EmbedderSpec(model=args.model, batch_size=args.batch_size)
    model = load_sentence_transformer(spec.model)
    model.encode(texts[:64], batch_size=args.batch_size)  # warm-up for both

    # alternate raw and pipeline runs and keep each one's best, so a load spike on a shared machine hits both alike
    raw_times, pipe_times = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        model.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)
        raw_times.append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            _, stats = embed_texts(texts, spec, "document", VectorCache(Path(tmp)))
            pipe_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _, again = embed_texts(texts, spec, "document", VectorCache(Path(tmp)))
            cached = time.perf_counter() - t0
    raw, pipeline = min(raw_times), min(pipe_times)

    print(f"texts: {len(texts)} unique chunk texts ({ds.corpus.height} docs, fixed 128/32 tokens), model {args.model}")
    print(f"raw SentenceTransformer.encode : {raw:8.2f} s   (best of {raw_times})")
    print(f"pipeline embed stage (cold)    : {pipeline:8.2f} s   computed {stats.computed} (best of {pipe_times})")
    print(f"pipeline embed stage (cached)  : {cached:8.2f} s   computed {again.computed}")
    print(f"ratio pipeline/raw             : {pipeline / raw:8.3f}   (target <= 1.10)")
    print(f"ratio cached/raw               : {cached / raw:8.3f}")
    print(f"peak RSS                       : {peak_rss_mb():8.0f} MB")


if __name__ == "__main__":
    main()
