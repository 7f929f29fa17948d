"""The hnsw_ef sweep on a real corpus: SciFact whole documents embedded with all-MiniLM-L6-v2 in Qdrant Edge.

Prints recall@k of the HNSW results against exact search and the latency per query for each ``hnsw_ef``, plus
the engine default. Vectors come from the content-addressed cache under ``$RAGBENCH_HOME`` (default
``./.ragbench``) when present; embedding all of SciFact (5,183 docs) takes about 7 minutes on 2 cores, so
``--max-docs`` runs on a seeded slice (all judged docs plus distractors).

    python benchmarks/ann_fidelity.py --max-docs 1000
    python benchmarks/ann_fidelity.py                      # the whole corpus
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", type=Path, default=SCIFACT, help="BEIR folder (default: shared SciFact)")
    p.add_argument("--max-docs", type=int, default=None, help="seeded slice of the corpus (default: all)")
    p.add_argument("--model", default="all-MiniLM-L6-v2")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--depth", type=int, default=None, help="search limit (default k); Qdrant uses max(ef, limit)")
    p.add_argument("--ef", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    p.add_argument("--m", type=int, default=16, help="HNSW m")
    p.add_argument("--ef-construct", type=int, default=100)
    p.add_argument("--home", type=Path, default=None, help="ragbench home for the vector cache "
                                                           "(default: $RAGBENCH_HOME or ./.ragbench)")
    args = p.parse_args(argv)

    home = args.home or Path(os.environ.get("RAGBENCH_HOME", ".ragbench"))
    os.environ.setdefault("RAGBENCH_HOME", str(home))
    from ragbench.chunking import chunk_corpus
    from ragbench.config import DatasetSpec, EmbedderSpec, WholeDocChunker
    from ragbench.core.cache import VectorCache
    from ragbench.core.schemas import index_texts
    from ragbench.data import load_dataset
    from ragbench.embedding.embed import embed_texts, model_key
    from ragbench.evaluation.ann import ann_fidelity, format_table
    from ragbench.index.qdrant import CollectionMeta, EdgeIndex

    ds = load_dataset(DatasetSpec(path=args.dataset, max_docs=args.max_docs))
    chunks = chunk_corpus(ds, WholeDocChunker())
    emb = EmbedderSpec(model=args.model)
    cache = VectorCache(home / "cache")
    t0 = time.perf_counter()
    dv, dstats = embed_texts(index_texts(chunks).to_list(), emb, "document", cache)
    qv, qstats = embed_texts(ds.queries["text"].to_list(), emb, "query", cache)
    embed_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="ann-fidelity-") as tmp:
        index = EdgeIndex(Path(tmp))
        meta = CollectionMeta(name="scifact", model_key=model_key(emb), dim=int(dv.shape[1]), distance="cosine",
                              count=len(dv), hnsw_m=args.m, ef_construct=args.ef_construct,
                              full_scan_threshold_kb=1)  # HNSW from the first KB: the graph is what is measured
        t0 = time.perf_counter()
        index.ensure(meta, dv, [{} for _ in range(len(dv))])
        build_s = time.perf_counter() - t0
        table = ann_fidelity(index, "scifact", qv, model_key(emb), k=args.k, ef_values=args.ef, depth=args.depth)
        index.close()
    print(f"{ds.name}: {len(dv)} docs x {dv.shape[1]} dims ({args.model}; {dstats.computed} docs and "
          f"{qstats.computed} queries embedded now, {embed_s:.0f} s), {len(qv)} queries; HNSW m={args.m} "
          f"ef_construct={args.ef_construct}, built in {build_s:.1f} s; recall@{args.k} vs exact at "
          f"limit {args.depth or args.k}")
    print(format_table(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
