"""Encoder backends side by side: torch (sentence-transformers) against onnx fp32 and onnx int8 (onnxruntime).

Speed: the same passages encoded by each backend in alternating rounds (so a load spike on a shared machine hits
all of them alike), passages/s of each round's best and its ratio to torch. Quality: the SciFact corpus (or a
seeded slice: every judged document plus distractors up to ``--max-docs``) and its test queries embedded by each
backend, exact cosine search, nDCG@10 and recall@100 by ir_measures, and each backend's minimum and mean cosine
to torch's document vectors. The exports go to a temporary models folder (or ``--store``; the seconds to load or
export each backend are printed).

    python benchmarks/encoder_backends.py [--max-docs 1500] [--speed-texts 512] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import R, nDCG

from ragbench.chunking import chunk_corpus
from ragbench.config import DatasetSpec, EmbedderSpec, WholeDocChunker
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset
from ragbench.embedding.embed import load_encoder

BACKENDS = {"torch": {}, "onnx fp32": {"backend": "onnx"}, "onnx int8": {"backend": "onnx", "quantize": "int8"}}


def _search(doc_vectors: np.ndarray, query_vectors: np.ndarray, doc_ids: list[str], query_ids: list[str],
            depth: int = 100) -> dict[str, dict[str, float]]:
    scores = query_vectors @ doc_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :depth]
    return {q: {doc_ids[j]: float(scores[i, j]) for j in top[i]} for i, q in enumerate(query_ids)}


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=str((root / ".." / "shared" / "datasets" / "scifact").resolve()))
    ap.add_argument("--max-docs", type=int, default=None, help="a seeded slice (judged docs + distractors); "
                    "default: the whole corpus")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--speed-texts", type=int, default=512, help="passages per speed round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating speed rounds (best of each backend)")
    ap.add_argument("--json", type=Path, help="write the table here too")
    ap.add_argument("--store", type=Path, help="a models folder to export into and reuse (default: a temporary one)")
    args = ap.parse_args()

    load_before = os.getloadavg()
    ds = load_dataset(DatasetSpec(path=args.dataset, max_docs=args.max_docs))
    chunks = chunk_corpus(ds, WholeDocChunker())
    texts = index_texts(chunks).to_list()
    doc_ids = chunks["doc_id"].to_list()
    qids, qtexts = ds.queries["query_id"].to_list(), ds.queries["text"].to_list()
    qrels = [ir_measures.Qrel(str(r["query_id"]), str(r["doc_id"]), int(r["relevance"]))
             for r in ds.qrels.iter_rows(named=True)]
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store or tmp
        encoders, export_s = {}, {}
        for name, extra in BACKENDS.items():
            t0 = time.perf_counter()
            spec = EmbedderSpec(model=args.model, batch_size=args.batch_size, device="cpu", **extra)
            encoders[name] = load_encoder(spec, "cpu", Path(store))
            export_s[name] = time.perf_counter() - t0
            encoders[name].encode(texts[:args.batch_size], batch_size=args.batch_size)  # warm-up

        sample = sorted(texts, key=len)[::max(1, len(texts) // args.speed_texts)][:args.speed_texts]
        speed: dict[str, list[float]] = {n: [] for n in BACKENDS}
        for _ in range(args.rounds):
            for name, enc in encoders.items():
                t0 = time.perf_counter()
                enc.encode(sample, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)
                speed[name].append(len(sample) / (time.perf_counter() - t0))
        print(f"passages/s per round: {speed}", flush=True)

        rows, ref = [], None
        for name, enc in encoders.items():
            t0 = time.perf_counter()
            dv = enc.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)
            corpus_s = time.perf_counter() - t0
            qv = enc.encode(qtexts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False)
            ref = dv if ref is None else ref
            run = _search(dv, qv, doc_ids, [str(q) for q in qids])
            m = ir_measures.calc_aggregate([nDCG @ 10, R @ 100], qrels, run)
            cos = (ref * dv).sum(1)
            rows.append({"backend": name, "passages_per_s": max(speed[name]),
                         "speedup": max(speed[name]) / max(speed["torch"]), "corpus_s": corpus_s,
                         "ndcg@10": m[nDCG @ 10], "recall@100": m[R @ 100], "min_cos": float(cos.min()),
                         "mean_cos": float(cos.mean()), "load_s": export_s[name]})
            print(f"{name}: {rows[-1]}", flush=True)  # a long run shows its progress

    base = rows[0]
    print(f"{ds.corpus.height} docs, {len(qids)} queries (SciFact test{'' if not args.max_docs else ', slice'}), "
          f"{args.model}, batch {args.batch_size}; speed: {len(sample)} passages x {args.rounds} alternating rounds; "
          f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores")
    print("| backend | passages/s | × torch | corpus s | nDCG@10 | Δ | recall@100 | Δ | min cos | mean cos "
          "| load/export s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['passages_per_s']:.1f} | {r['speedup']:.2f} | {r['corpus_s']:.0f} "
              f"| {r['ndcg@10']:.4f} | {r['ndcg@10'] - base['ndcg@10']:+.4f} | {r['recall@100']:.4f} "
              f"| {r['recall@100'] - base['recall@100']:+.4f} | {r['min_cos']:.4f} | {r['mean_cos']:.4f} "
              f"| {r['load_s']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps({"docs": ds.corpus.height, "queries": len(qids), "rows": rows,
                                         "speed_rounds": speed, "load": [load_before[0], os.getloadavg()[0]]},
                                        indent=1))


if __name__ == "__main__":
    main()
