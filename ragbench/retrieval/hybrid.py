"""Hybrid first stage: dense and BM25 runs fused (RRF or convex), by the library or inside Qdrant."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal

import polars as pl
from pydantic import Field, model_validator

from ragbench.core.schemas import canonical_order
from ragbench.data.dataset import Dataset
from ragbench.embedding.embed import model_key
from ragbench.index.qdrant import HybridQuery
from ragbench.retrieval.base import RETRIEVERS, DenseSearch, Filters, RetrievalResources, RetrieverSpec, run_from_hits
from ragbench.retrieval.bm25 import BM25Params, bm25_run
from ragbench.retrieval.dense import DenseParams, dense_run
from ragbench.retrieval.fusion import convex, rrf


class HybridBM25Params(BM25Params):
    depth: int = Field(100, gt=0)


@RETRIEVERS.register
class HybridRetriever(RetrieverSpec):
    """Dense and BM25 run concurrently, fused: ``rrf`` score = sum_i w_i / (k + rank_i), or ``convex`` =
    sum_i w_i * minmax(score_i). Weights are ``[dense, bm25]``."""

    kind: Literal["hybrid"] = "hybrid"
    dense: DenseParams = DenseParams()
    bm25: HybridBM25Params = HybridBM25Params()
    fusion: Literal["rrf", "convex"] = "rrf"
    k: float = Field(60, ge=0)
    weights: tuple[float, float] = (1.0, 1.0)
    engine: Literal["library", "qdrant"] = Field(
        "library", description="library: bm25s + Qdrant dense, fused by ragbench; qdrant: one Qdrant query with a "
        "dense and a sparse BM25 prefetch fused by Qdrant's own RRF (its BM25 tokenizer differs from bm25s')")
    uses_embedder: ClassVar[bool] = True
    #: 2: RRF and convex rank each component run in the canonical (trec_eval) order, not the producer's order of ties
    version: ClassVar[int] = 2

    @model_validator(mode="after")
    def _qdrant_engine_is_plain_rrf(self):
        if self.engine == "qdrant" and (self.fusion != "rrf" or tuple(self.weights) != (1.0, 1.0)
                                        or not float(self.k).is_integer()):
            raise ValueError("engine: qdrant supports unweighted RRF with an integer k only (Qdrant weights RRF by "
                             "another formula)")
        return self

    @property
    def uses_sparse_collection(self) -> bool:  # type: ignore[override]
        return self.engine == "qdrant"

    def first_stage(self, ds: Dataset, res: RetrievalResources, embedder, filters: Filters) -> pl.DataFrame:
        if self.engine == "qdrant":  # one Qdrant query: dense + sparse prefetches, fused by Qdrant's RRF
            plan = HybridQuery(self.depth, dense_depth=self.dense.depth, sparse_depth=self.bm25.depth, k=self.k,
                               exact=self.dense.exact, hnsw_ef=self.dense.hnsw_ef, query_filter=filters.index_filter)
            hits = res.index.hybrid_search(res.hybrid_collection, res.query_vectors, ds.queries["text"].to_list(),
                                           model_key(embedder), plan)
            return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)
        with ThreadPoolExecutor(max_workers=2) as pool:  # Qdrant and bm25s both release the GIL in their cores
            dense = pool.submit(dense_run, ds, res, embedder, self.dense.depth, self.dense.exact,
                                self.dense.hnsw_ef, filters.index_filter)
            lexical = pool.submit(bm25_run, ds, res, self.bm25, self.bm25.depth, filters.bm25_mask)
            runs = [dense.result(), lexical.result()]
        # fuse everything, then cut at depth in the canonical order (trec_eval's tie rule), so tied chunks at the
        # depth boundary are chosen by the same rule that judges them
        if self.fusion == "rrf":
            fused = rrf(runs, weights=self.weights, k=self.k, depth=None)
        else:
            fused = convex(runs, weights=self.weights, depth=None)
        return canonical_order(fused).filter(pl.col("rank") <= self.depth)

    def deeper(self, factor: int) -> "HybridRetriever":
        """Both lists and the fused cut ``factor`` times deeper."""
        return self.model_copy(update={
            "depth": self.depth * factor, "dense": self.dense.model_copy(update={"depth": self.dense.depth * factor}),
            "bm25": self.bm25.model_copy(update={"depth": self.bm25.depth * factor})})

    def describe(self) -> str:
        w = "" if tuple(self.weights) == (1.0, 1.0) else f",w={self.weights[0]:g}/{self.weights[1]:g}"
        return f"hybrid-{self.fusion}{w}" + ("@qdrant" if self.engine == "qdrant" else "")

    def explain_first_stage(self) -> str:
        w = "" if tuple(self.weights) == (1.0, 1.0) else f" {self.weights[0]:g}:{self.weights[1]:g}"
        return f"hybrid {self.fusion.upper() if self.fusion == 'rrf' else self.fusion}{w}" + (
            " in Qdrant" if self.engine == "qdrant" else "")

    def dense_search(self) -> DenseSearch:
        return DenseSearch(self.dense.depth, self.dense.exact, self.dense.hnsw_ef)

    def bm25_params(self) -> BM25Params | None:
        return self.bm25 if self.engine == "library" else None  # the qdrant engine searches Qdrant's own BM25

    def tracking_params(self) -> dict[str, Any]:
        return {**super().tracking_params(), "fusion": self.fusion, "bm25_k1": self.bm25.k1, "bm25_b": self.bm25.b}
