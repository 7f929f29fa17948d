"""Index stage: vectors -> a real Qdrant collection, and exact or HNSW search over it.

Two engines behind one interface:

* :class:`EdgeIndex` (embedded default): Qdrant Edge, the Qdrant engine in-process (``qdrant-edge-py``). The HNSW
  graph is built by ``optimize()``; ``exact=True`` searches brute force. A dense collection is split into Edge
  shards of at most :data:`EDGE_SHARD_POINTS` points (Edge keeps one graph per shard whatever its segment settings,
  and one graph's build grows faster than its size); a search asks every shard and merges their top hits.
* :class:`ClientIndex` (scale-out): a Qdrant server through ``qdrant-client`` (``RAGBENCH_QDRANT_URL``), or its
  local ``:memory:`` mode for tests (brute force; it ignores HNSW search params).

A collection is named by ``(dataset fingerprint, chunker, embedder, index params)`` and records the model id +
revision it holds. Searching it with vectors of another model is refused. A collection is only used once it is
marked complete and its point count matches, so a half-built collection is rebuilt, never queried.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ragbench.core.atomic import write_text_atomically
from ragbench.core.errors import IndexMismatchError
from ragbench.core.hashing import stable_hash
from ragbench.core.locks import acquire_lock
from ragbench.core.paths import within
from ragbench.core.progress import log
from ragbench.index.spec import IndexSpec

UPSERT_BATCH = 1024

#: points per Qdrant Edge shard of a dense collection: the HNSW build of one graph cost CPU ∝ n^1.28 from 100k to 1M
#: points here, so graphs are kept at this size and a larger collection is several of them (build ∝ n). A
#: collection with Qdrant's own sparse BM25 vectors stays one shard: their IDF is a per-shard statistic.
EDGE_SHARD_POINTS = 250_000


@dataclass(frozen=True)
class CollectionMeta:
    """What a collection holds; stored with it and checked on every search."""

    name: str
    model_key: str
    dim: int
    distance: str
    count: int
    hnsw_m: int
    ef_construct: int
    full_scan_threshold_kb: int
    sparse: bool = False  # also a sparse "bm25" vector per point (Qdrant's own BM25), for native hybrid search
    chunks_key: str = ""  # the chunk-cache key of the chunks it holds (point id = row), for checking it later
    document_prompt: str = ""  # prepended to each chunk's index text (prefix + text) before embedding
    shard_points: int = 0  # points per Edge shard (point id // shard_points picks it); 0: one shard

    @property
    def shards(self) -> int:
        """How many Edge shards hold the points."""
        return 1 if not self.shard_points else max(1, -(-self.count // self.shard_points))


def collection_name(dataset_fingerprint: str, chunker_id: str, model_key: str, document_prompt: str,
                    index: IndexSpec, payload: str = "") -> str:
    """``rb_<hash>`` of everything that decides a collection's content."""
    return "rb_" + stable_hash({"dataset": dataset_fingerprint, "chunker": chunker_id, "model": model_key,
                                "prompt": document_prompt, "index": index.canonical(), "payload": payload})


@dataclass(frozen=True)
class HybridQuery:
    """How a native hybrid search runs: the ``limit`` fused hits kept from a dense prefetch of ``dense_depth`` (exact
    or HNSW with ``hnsw_ef``) and a sparse-BM25 prefetch of ``sparse_depth``, fused by RRF with constant ``k``; both
    prefetches under ``query_filter`` (a Qdrant filter, or None)."""

    limit: int
    dense_depth: int
    sparse_depth: int
    k: float
    exact: bool = False
    hnsw_ef: int | None = None
    query_filter: object = None


@dataclass(frozen=True)
class Hits:
    """Search results for a batch of queries: ``ids[i]`` and ``scores[i]`` are query i's points, best first."""

    ids: list[np.ndarray]
    scores: list[np.ndarray]


Batch = tuple  # (point ids, dense vectors, payloads) or, for sparse collections, + a list of sparse vectors
SPARSE = "bm25"


def bm25_sparse(texts: list[str], query: bool = False) -> list:
    """Qdrant's own BM25 sparse vectors (``qdrant_edge.Bm25``; IDF is applied by the collection's modifier)."""
    from qdrant_edge import Bm25

    bm25 = Bm25()
    return [bm25.embed_query(t) if query else bm25.embed_document(t) for t in texts]


def as_batches(vectors: np.ndarray, payloads: list[dict], size: int = UPSERT_BATCH) -> Iterator[Batch]:
    """Split an in-memory matrix into upsert batches (point id = row number)."""
    for i in range(0, len(vectors), size):
        j = min(i + size, len(vectors))
        yield np.arange(i, j), vectors[i:j], payloads[i:j]


def _searchable(index, name: str, model_key: str, dim: int) -> CollectionMeta:
    """The collection's metadata, after refusing an incomplete collection or vectors of another model."""
    meta = index.meta(name)
    if meta is None:
        raise IndexMismatchError(f"collection {name} does not exist or is incomplete")
    if meta.model_key != model_key:
        raise IndexMismatchError(f"collection {meta.name} holds vectors of {meta.model_key}; refusing to search it "
                                 f"with vectors of {model_key}")
    if meta.dim != dim:
        raise IndexMismatchError(f"collection {meta.name} has dimension {meta.dim}, query vectors have {dim}")
    return meta


class EdgeIndex:
    """Collections as Qdrant Edge shards under ``root/<name>/`` with a ``ragbench.json`` completion marker.

    Qdrant Edge lets one process open a shard at a time, so every use of a collection (build, search, reading
    vectors) holds an inter-process lock on it (``root/.<name>.lock``) and closes the shard when done: sweeps that
    share a home and a collection take turns on it instead of failing. :meth:`session` holds it across many searches.
    """

    def __init__(self, root: Path):
        self.root = Path(root) / "qdrant-edge"
        self._open: dict[str, object] = {}
        self._held: dict[str, list[int]] = {}  # name -> [lock descriptor, depth]
        self._lock = threading.RLock()

    def _folder(self, name: str) -> Path:
        """``root/<name>``: collection names are ``rb_<hash>``, but one read back from a promotion record must not
        lead outside the root (:class:`~ragbench.core.paths.PathEscapeError`)."""
        return within(self.root, name, what=f"the folder of collection {name!r}")

    def _meta_path(self, name: str) -> Path:
        return self._folder(name) / "ragbench.json"

    def meta(self, name: str) -> CollectionMeta | None:
        try:
            return CollectionMeta(**json.loads(self._meta_path(name).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    @contextmanager
    def session(self, name: str) -> Iterator[None]:
        """Hold collection ``name`` for the block (re-entrant); the shard is closed and the lock released at the end
        of the outermost block. Another process using it is waited for (up to an hour), with a log line."""
        with self._lock:
            if name in self._held:
                self._held[name][1] += 1
            else:
                fd = acquire_lock(within(self.root, f".{name}.lock", what="a collection lock"), f"collection {name}",
                                  wait_seconds=3600, on_wait=log.info)
                self._held[name] = [fd, 1]
        try:
            yield
        finally:
            with self._lock:
                held = self._held[name]
                held[1] -= 1
                if held[1] == 0:
                    self._close_shard(name)
                    os.close(held[0])
                    del self._held[name]

    def _shard_path(self, name: str, i: int) -> Path:
        return self._folder(name) / ("shard" if i == 0 else f"shard-{i}")  # the first keeps the one-shard layout

    def _shards(self, name: str, meta: CollectionMeta | None = None) -> list:
        """The collection's open Edge shards, in shard order."""
        from qdrant_edge import EdgeShard

        with self._lock:
            if name not in self._open:
                meta = meta or self.meta(name)
                n = meta.shards if meta is not None else 1
                self._open[name] = [EdgeShard.load(str(self._shard_path(name, i))) for i in range(n)]
            return self._open[name]

    def _close_shard(self, name: str) -> None:
        for shard in self._open.pop(name, None) or []:
            shard.close()

    def names(self) -> list[str]:
        """Every collection folder under the root, complete or not."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def drop(self, name: str) -> None:
        """Delete a collection (the next sweep that needs it builds it again)."""
        with self.session(name):
            self._close_shard(name)
            shutil.rmtree(self._folder(name), ignore_errors=True)

    def vectors(self, name: str, ids: list[int]) -> np.ndarray:
        """The stored dense vectors of points ``ids`` (normalised by Qdrant under cosine distance)."""
        with self.session(name):
            records = {r.id: r.vector["dense"] for shard in self._shards(name)
                       for r in shard.retrieve([int(i) for i in ids], False, True)}
        return np.array([records[int(i)] for i in ids], dtype=np.float32)

    def ensure(self, meta: CollectionMeta, batches: Iterable[Batch] | np.ndarray,
               payloads: list[dict] | None = None, verify: Callable[[object, str], str | None] | None = None) -> bool:
        """Build the collection unless a complete, intact one exists. Returns True when it was built now.

        ``batches`` yields ``(ids, vectors, payloads)`` (streamed: memory bounded by one batch), or is a matrix
        with ``payloads`` alongside. ``verify(index, name)`` checks a complete collection before it is reused and
        returns why it cannot be (it is then rebuilt, with a warning) or None. Concurrent builders wait.
        """
        with self.session(meta.name):
            return self._ensure(meta, batches if payloads is None else as_batches(batches, payloads), verify)

    def _reusable(self, meta: CollectionMeta, verify) -> bool:
        from qdrant_edge import CountRequest

        existing = self.meta(meta.name)
        if existing is None or existing.count != meta.count:
            return False
        try:
            count = sum(s.count(CountRequest(exact=True)) for s in self._shards(meta.name, existing))
            problem = None if count == meta.count else f"{count} points stored, {meta.count} expected"
            if problem is None and verify is not None:
                problem = verify(self, meta.name)
        except Exception as e:  # a damaged shard may not even load
            problem = f"it cannot be read ({str(e).splitlines()[0][:160]})"
        if problem:
            log.warning("collection %s is damaged (%s): rebuilding it from the vector cache", meta.name, problem)
        return problem is None

    def _ensure(self, meta: CollectionMeta, batches: Iterable[Batch], verify=None) -> bool:
        from qdrant_edge import (
            CountRequest,
            Distance,
            EdgeConfig,
            EdgeOptimizersConfig,
            EdgeShard,
            EdgeSparseVectorParams,
            EdgeVectorParams,
            HnswIndexConfig,
            Modifier,
            Point,
            UpdateOperation,
        )

        if self._reusable(meta, verify):
            return False
        self._close_shard(meta.name)
        folder = self._folder(meta.name)
        shutil.rmtree(folder, ignore_errors=True)  # incomplete leftovers of a killed build
        distance = {"cosine": Distance.Cosine, "dot": Distance.Dot, "euclid": Distance.Euclid}[meta.distance]
        sparse = {SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)} if meta.sparse else None
        config = EdgeConfig(
            vectors={"dense": EdgeVectorParams(size=meta.dim, distance=distance)}, sparse_vectors=sparse,
            hnsw_config=HnswIndexConfig(m=meta.hnsw_m, ef_construct=meta.ef_construct,
                                        full_scan_threshold=meta.full_scan_threshold_kb),
            # one segment, indexed from the first KB: the HNSW graph then covers every point
            optimizers=EdgeOptimizersConfig(indexing_threshold=1, default_segment_number=1))
        shards = [EdgeShard.create(str(self._shard_path(meta.name, i)), config) for i in range(meta.shards)]
        for ids, vectors, payloads, *sparse_vectors in batches:
            named = [{"dense": v.tolist()} for v in vectors]
            if meta.sparse:
                for n, sv in zip(named, sparse_vectors[0]):
                    n[SPARSE] = sv
            which = np.asarray(ids) // meta.shard_points if meta.shards > 1 else np.zeros(len(ids), dtype=int)
            for i in np.unique(which):
                points = [Point(int(ids[j]), named[j], payloads[j]) for j in np.flatnonzero(which == i)]
                shards[i].update(UpdateOperation.upsert_points(points))
        for shard in shards:  # one bounded HNSW graph each
            shard.optimize()
            shard.flush()
        if sum(s.count(CountRequest(exact=True)) for s in shards) != meta.count:
            raise IndexMismatchError(f"collection {meta.name}: point count mismatch after build")
        write_text_atomically(self._meta_path(meta.name), json.dumps(asdict(meta)))
        with self._lock:
            self._open[meta.name] = shards
        return True

    def search(self, name: str, queries: np.ndarray, model_key: str, limit: int, *, exact: bool = False,
               hnsw_ef: int | None = None, query_filter=None) -> Hits:
        from qdrant_edge import Query, QueryRequest, SearchParams

        _searchable(self, name, model_key, queries.shape[1])
        params = SearchParams(exact=exact, hnsw_ef=hnsw_ef)
        return self._query(name, [QueryRequest(limit=limit, query=Query.Nearest(q.tolist(), using="dense"),
                                               params=params, filter=query_filter) for q in queries])

    def _query(self, name: str, requests: list) -> Hits:
        """Run ``requests`` against collection ``name`` in batches of 64, holding it for each batch. Each shard
        answers every request; a query's hits are the best ``limit`` of theirs by score (ties: lower id first)."""
        from qdrant_edge import QueryBatchRequest

        ids, scores = [], []
        for i in range(0, len(requests), 64):
            batch = requests[i:i + 64]
            with self.session(name):
                per_shard = [shard.query_batch(QueryBatchRequest(batch)) for shard in self._shards(name)]
            for q, request in enumerate(batch):
                points = [p for results in per_shard for p in results[q]]
                pid = np.fromiter((p.id for p in points), dtype=np.int64, count=len(points))
                score = np.fromiter((p.score for p in points), dtype=np.float64, count=len(points))
                if len(per_shard) > 1:
                    keep = np.lexsort((pid, -score))[:request.limit]
                    pid, score = pid[keep], score[keep]
                ids.append(pid)
                scores.append(score)
        return Hits(ids, scores)

    def hybrid_search(self, name: str, queries: np.ndarray, query_texts: list[str], model_key: str,
                      plan: HybridQuery) -> Hits:
        """One Qdrant query per text: dense and sparse-BM25 prefetches fused by Qdrant's RRF.

        Qdrant ranks prefetch results from 0, so ``Fusion.Rrf(k + 1)`` scores 1 / (k + rank) with 1-based ranks:
        the same formula as :func:`ragbench.retrieval.fusion.rrf`.
        """
        from qdrant_edge import Fusion, Prefetch, Query, QueryRequest, SearchParams

        meta = _searchable(self, name, model_key, queries.shape[1])
        if not meta.sparse:
            raise IndexMismatchError(f"collection {name} has no sparse BM25 vectors for native hybrid search")
        p = plan
        params = SearchParams(exact=p.exact, hnsw_ef=p.hnsw_ef)
        sparse = bm25_sparse(query_texts, query=True)
        return self._query(name, [QueryRequest(limit=p.limit, query=Fusion.Rrf(k=int(p.k) + 1), prefetches=[
            Prefetch(limit=p.dense_depth, query=Query.Nearest(q.tolist(), using="dense"), params=params,
                     filter=p.query_filter),
            Prefetch(limit=p.sparse_depth, query=Query.Nearest(sv, using=SPARSE), filter=p.query_filter)])
            for q, sv in zip(queries, sparse)])

    def close(self, name: str | None = None) -> None:
        """Close open shards (those held by a :meth:`session` stay open until it ends)."""
        with self._lock:
            for n in [name] if name else list(self._open):
                if n not in self._held:
                    self._close_shard(n)


class ClientIndex:
    """The same interface over ``qdrant-client`` (a Qdrant server URL, or ``:memory:``)."""

    def __init__(self, url: str, api_key: str | None = None):
        from qdrant_client import QdrantClient

        self.client = QdrantClient(location=":memory:") if url == ":memory:" else QdrantClient(url=url,
                                                                                                 api_key=api_key)

    def meta(self, name: str) -> CollectionMeta | None:
        if not self.client.collection_exists(name):
            return None
        md = self.client.get_collection(name).config.metadata or {}
        try:
            return CollectionMeta(**md["ragbench"]) if md.get("complete") else None
        except (KeyError, TypeError):
            return None

    @contextmanager
    def session(self, name: str) -> Iterator[None]:
        """A server serves many clients at once: nothing to hold."""
        yield

    def vectors(self, name: str, ids: list[int]) -> np.ndarray:
        """The stored dense vectors of points ``ids`` (normalised by Qdrant under cosine distance)."""
        records = {r.id: r.vector["dense"] for r in self.client.retrieve(name, [int(i) for i in ids],
                                                                         with_vectors=True)}
        return np.array([records[int(i)] for i in ids], dtype=np.float32)

    def ensure(self, meta: CollectionMeta, batches: Iterable[Batch] | np.ndarray,
               payloads: list[dict] | None = None, verify: Callable[[object, str], str | None] | None = None) -> bool:
        from qdrant_client import models

        if payloads is not None:
            batches = as_batches(batches, payloads)
        existing = self.meta(meta.name)
        if existing is not None and self.client.count(meta.name, exact=True).count == meta.count:
            problem = verify(self, meta.name) if verify is not None else None
            if problem is None:
                return False
            log.warning("collection %s is damaged (%s): rebuilding it from the vector cache", meta.name, problem)
        if self.client.collection_exists(meta.name):
            self.client.delete_collection(meta.name)
        distance = {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT,
                    "euclid": models.Distance.EUCLID}[meta.distance]
        self.client.create_collection(
            meta.name,
            vectors_config={"dense": models.VectorParams(size=meta.dim, distance=distance)},
            sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)}
            if meta.sparse else None,
            hnsw_config=models.HnswConfigDiff(m=meta.hnsw_m, ef_construct=meta.ef_construct,
                                              full_scan_threshold=meta.full_scan_threshold_kb),
            metadata={"ragbench": asdict(meta), "complete": False})
        for ids, vectors, pls, *sparse_vectors in batches:
            named = [{"dense": v.tolist()} for v in vectors]
            if meta.sparse:
                for n, sv in zip(named, sparse_vectors[0]):
                    n[SPARSE] = models.SparseVector(indices=list(sv.indices), values=list(sv.values))
            self.client.upsert(meta.name, points=[
                models.PointStruct(id=int(i), vector=n, payload=p) for i, n, p in zip(ids, named, pls)], wait=True)
        if self.client.count(meta.name, exact=True).count != meta.count:
            raise IndexMismatchError(f"collection {meta.name}: point count mismatch after build")
        self.client.update_collection(meta.name, metadata={"ragbench": asdict(meta), "complete": True})
        return True

    def search(self, name: str, queries: np.ndarray, model_key: str, limit: int, *, exact: bool = False,
               hnsw_ef: int | None = None, query_filter=None) -> Hits:
        from qdrant_client import models

        _searchable(self, name, model_key, queries.shape[1])
        params = models.SearchParams(exact=exact, hnsw_ef=hnsw_ef)
        ids, scores = [], []
        for i in range(0, len(queries), 64):
            reqs = [models.QueryRequest(query=q.tolist(), using="dense", limit=limit, params=params,
                                        filter=query_filter) for q in queries[i:i + 64]]
            for resp in self.client.query_batch_points(name, reqs):
                ids.append(np.array([p.id for p in resp.points], dtype=np.int64))
                scores.append(np.array([p.score for p in resp.points], dtype=np.float64))
        return Hits(ids, scores)

    def hybrid_search(self, name: str, queries: np.ndarray, query_texts: list[str], model_key: str,
                      plan: HybridQuery) -> Hits:
        """As :meth:`EdgeIndex.hybrid_search`, through qdrant-client's ``query_points`` with an RRF query."""
        from qdrant_client import models

        meta = _searchable(self, name, model_key, queries.shape[1])
        if not meta.sparse:
            raise IndexMismatchError(f"collection {name} has no sparse BM25 vectors for native hybrid search")
        p = plan
        params = models.SearchParams(exact=p.exact, hnsw_ef=p.hnsw_ef)
        ids, scores = [], []
        for q, sv in zip(queries, bm25_sparse(query_texts, query=True)):
            resp = self.client.query_points(name, prefetch=[
                models.Prefetch(query=q.tolist(), using="dense", limit=p.dense_depth, params=params,
                                filter=p.query_filter),
                models.Prefetch(query=models.SparseVector(indices=list(sv.indices), values=list(sv.values)),
                                using=SPARSE, limit=p.sparse_depth, filter=p.query_filter)],
                query=models.RrfQuery(rrf=models.Rrf(k=int(p.k) + 1)), limit=p.limit)
            ids.append(np.array([p.id for p in resp.points], dtype=np.int64))
            scores.append(np.array([p.score for p in resp.points], dtype=np.float64))
        return Hits(ids, scores)

    def close(self, name: str | None = None) -> None:
        if name is None:
            self.client.close()


def open_index(settings):
    """The engine the settings ask for: a Qdrant server (``qdrant_url``, or ``:memory:``) or embedded Qdrant Edge
    under the home."""
    if settings.qdrant_url:
        return ClientIndex(settings.qdrant_url, settings.qdrant_api_key)
    return EdgeIndex(settings.home)
