"""What a config costs to serve and to build: per-query latency on the serving path, index size, vector memory.

Config-level measures (one value per config; they rank nothing, the report's Pareto front weighs them against the
primary measure):

* ``latency_p50_ms``, ``latency_p95_ms``: wall milliseconds per query, each query alone, through the path
  :class:`~ragbench.promotion.serving.ProductionRetriever` serves: the query text embedded by the model (not read
  from the vector cache; no embedder for BM25), then :func:`ragbench.retrieval.retrieve` on that one query (first
  stage, fusion, rerank, small-to-big, filter). On a seeded sample of at most :data:`LATENCY_SAMPLE` queries, after
  :data:`LATENCY_WARMUP` untimed queries (model and index warm, as a serving process is); each sampled query's
  retrieval is timed once and that time kept when it is at most :data:`LATENCY_SLACK` times the median single
  timing of the config's earlier sampled queries (at least :data:`LATENCY_BASELINE` of them), else timed until
  :data:`LATENCY_REPEATS` timings and their median kept (:func:`query_ms`), so a pause of the machine (another
  process, a garbage collection) during one call does not become that query's latency, while a common query costs
  one retrieval (timing every query three times made the sampling a quarter of a cold sweep's own seconds);
  percentiles over the queries by numpy's default linear interpolation. A query's embedding time depends on the
  model only: it is measured once per model and query in a sweep (``RetrievalResources.query_encodings``, by the
  first config that needs it) and added to every config's retrieval time for that query. The query is encoded on
  one torch thread (:func:`one_thread`), as a serving worker answering one query at a time would: on a machine
  whose cores are busy, two intra-op threads encoding one 16-token query waited at each barrier for the other
  (about 500 ms against 15-80 ms on one thread, measured on 2 shared cores), so the latency measured the machine's
  load and the sampling cost up to half a minute per model. Machine-dependent: compare configs of one sweep, not
  sweeps of two machines.
* ``index_bytes``: the index on disk: the bytes allocated to the Qdrant collection folder(s) of a dense or hybrid
  config (Qdrant Edge; NaN on a Qdrant server, which ragbench cannot measure), plus the bm25s index as
  ``bm25s.BM25.save`` writes it (score matrix, vocabulary, parameters) for a config that searches bm25s.
* ``vector_bytes``: dense vectors held for search, chunks x dimension x 4 bytes (float32); 0 for BM25.
* ``memory_bytes``: ``vector_bytes`` + the bm25s index bytes: what the config keeps in memory to answer (HNSW
  links and payloads excluded). The Pareto front uses this.
* ``embed_seconds``: estimated seconds to embed all of the config's chunks from scratch on this machine: the
  model's measured seconds per chunk when the sweep's embed stage encoded at least :data:`EMBED_SAMPLE` of them in
  this process, else :func:`embed_seconds_estimate` on a sample; times the number of chunks; 0 for BM25. An
  estimate, so a rerun served from the vector cache reports a cost instead of 0.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from ragbench.core.schemas import TextColumn, texts_at
from ragbench.data.dataset import Dataset
from ragbench.retrieval import RetrievalResources, retrieve
from ragbench.retrieval.bm25 import BM25Params, bm25_index

LATENCY_SAMPLE = 50
LATENCY_WARMUP = 1
#: timed retrievals of a sampled query whose first timing is not kept alone; its latency is their median
LATENCY_REPEATS = 3
#: a first timing is kept alone when it is at most this many times the median single timing of the config so far
LATENCY_SLACK = 1.5
#: single timings of a config before a first timing may be kept alone
LATENCY_BASELINE = 5
EMBED_SAMPLE = 32
COST_MEASURES = ("latency_p50_ms", "latency_p95_ms", "index_bytes", "vector_bytes", "memory_bytes",
                 "embed_seconds")


def serving_latency(run_config, ds: Dataset, res: RetrievalResources, *, sample: int = LATENCY_SAMPLE,
                    warmup: int = LATENCY_WARMUP, seed: int = 0, repeats: int = LATENCY_REPEATS) -> dict[str, float]:
    """``latency_p50_ms`` and ``latency_p95_ms`` of ``run_config`` (definition in the module docstring): per query,
    the embedding time plus the median of ``repeats`` timed retrievals."""
    from ragbench.embedding.embed import encode_uncached

    ids = sorted(ds.queries["query_id"].to_list())
    if not ids:
        return {}
    picked = random.Random(seed).sample(ids, min(sample, len(ids)))
    texts = dict(zip(ds.queries["query_id"], ds.queries["text"]))
    emb = run_config.embedder
    encoded = res.query_encodings.setdefault(emb.spec_id, {}) if emb is not None else {}
    order = picked[:warmup] + picked  # the warm-up queries are asked again, timed
    ms, typical = [], []
    for i, qid in enumerate(order):
        one = replace(ds, queries=ds.queries.filter(ds.queries["query_id"] == qid))
        text, encode_ms, mine = texts[qid], 0.0, res
        if emb is not None:
            if i >= warmup and text in encoded:  # embedded (and timed) for an earlier config of this model
                encode_ms, vector = encoded[text]
            else:
                with one_thread():
                    t0 = time.perf_counter()
                    vector = encode_uncached([text], emb, "query")
                    encode_ms = 1000 * (time.perf_counter() - t0)
                if i >= warmup:
                    encoded[text] = (encode_ms, vector)
            mine = replace(res, query_vectors=vector)
        if i < warmup:
            retrieve(run_config, one, mine)
            continue
        ms.append(encode_ms + query_ms(lambda: retrieve(run_config, one, mine), typical, repeats))
    return {"latency_p50_ms": float(np.percentile(ms, 50)), "latency_p95_ms": float(np.percentile(ms, 95))}


@contextmanager
def one_thread() -> Iterator[None]:
    """torch's intra-op threads set to one inside the block, the earlier number restored after; nothing when torch
    is not imported (BM25, an ONNX encoder)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def query_ms(call, typical: list[float], repeats: int) -> float:
    """One sampled query's milliseconds: ``call()`` timed once, that time kept when ``typical`` (the config's first
    timings so far; this one is added to it) holds at least :data:`LATENCY_BASELINE` and it is at most
    :data:`LATENCY_SLACK` x their median; else the median of ``repeats`` timings, the first among them."""
    first = median_ms(call, 1)
    steady = len(typical) >= LATENCY_BASELINE and first <= LATENCY_SLACK * float(np.median(typical))
    typical.append(first)
    if steady or repeats <= 1:
        return first
    return float(np.median([first] + [median_ms(call, 1) for _ in range(repeats - 1)]))


def median_ms(call, repeats: int) -> float:
    """The median wall milliseconds of ``repeats`` (at least 1) calls of ``call()``."""
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        call()
        times.append(1000 * (time.perf_counter() - t0))
    return float(np.median(times))


def bm25_params_of(retriever) -> BM25Params | None:
    """The bm25s parameters a retriever searches with, None when it searches no bm25s index: each kind says so
    itself (:meth:`RetrieverSpec.bm25_params <ragbench.retrieval.base.RetrieverSpec.bm25_params>`)."""
    return retriever.bm25_params()


def folder_bytes(path: Path) -> int:
    """Bytes allocated on disk to the files under ``path``, as ``du`` counts them (0 when it does not exist): not
    their apparent size, since Qdrant preallocates its write-ahead log as sparse files (132 MB apparent, 0.2 MB
    allocated for a 10-point demo collection)."""
    path = Path(path)
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def size_measures(run_config, res: RetrievalResources, embed_seconds: float = 0.0) -> dict[str, float]:
    """``index_bytes``, ``vector_bytes``, ``memory_bytes`` and ``embed_seconds`` of one config (definitions in
    the module docstring); ``embed_seconds`` is passed through (0 without an embedder)."""
    params = bm25_params_of(run_config.retriever)
    bm25 = float(bm25_index(res, params).disk_bytes()) if params is not None else 0.0
    vectors = 0.0
    index = 0.0
    if run_config.embedder is not None and res.query_vectors is not None:
        vectors = float(res.chunks.height * res.query_vectors.shape[1] * 4)
        for name in {res.collection, res.hybrid_collection} - {None}:
            root = getattr(res.index, "root", None)
            index += folder_bytes(Path(root) / name) if root is not None else float("nan")
    return {"index_bytes": index + bm25, "vector_bytes": vectors, "memory_bytes": vectors + bm25,
            "embed_seconds": float(embed_seconds) if run_config.embedder is not None else 0.0}


def embed_seconds_estimate(texts: TextColumn, embedder, *, sample: int = EMBED_SAMPLE, seed: int = 0) -> float:
    """Seconds to embed all ``texts`` as documents from scratch: a seeded sample of at most ``sample`` of them
    encoded without the cache (after an untimed warm-up on the first), seconds per text x ``len(texts)``."""
    from ragbench.embedding.embed import encode_uncached

    if len(texts) == 0:
        return 0.0
    # the indices random.sample would pick from the list itself: a column is never turned into Python strings whole
    picked = texts_at(texts, random.Random(seed).sample(range(len(texts)), min(sample, len(texts))))
    encode_uncached(picked[:1], embedder, "document")
    t0 = time.perf_counter()
    encode_uncached(picked, embedder, "document")
    return (time.perf_counter() - t0) / len(picked) * len(texts)
