"""Dense first stage: the query vectors searched in the chunker x embedder Qdrant collection."""

from __future__ import annotations

from typing import ClassVar, Literal

import polars as pl
from pydantic import Field

from ragbench.core.spec import Spec
from ragbench.data.dataset import Dataset
from ragbench.embedding.embed import model_key
from ragbench.retrieval.base import RETRIEVERS, DenseSearch, Filters, RetrievalResources, RetrieverSpec, run_from_hits


def dense_run(ds: Dataset, res: RetrievalResources, embedder, depth: int, exact: bool, hnsw_ef: int | None,
              query_filter) -> pl.DataFrame:
    hits = res.index.search(res.collection, res.query_vectors, model_key(embedder), depth, exact=exact,
                            hnsw_ef=hnsw_ef, query_filter=query_filter)
    return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, hits.ids, hits.scores)


@RETRIEVERS.register
class DenseRetriever(RetrieverSpec):
    kind: Literal["dense"] = "dense"
    exact: bool = False
    hnsw_ef: int | None = Field(None, gt=0)
    uses_embedder: ClassVar[bool] = True

    def first_stage(self, ds: Dataset, res: RetrievalResources, embedder, filters: Filters) -> pl.DataFrame:
        return dense_run(ds, res, embedder, self.depth, self.exact, self.hnsw_ef, filters.index_filter)

    def describe(self) -> str:
        return "dense-exact" if self.exact else f"dense-hnsw{self.hnsw_ef or ''}"

    def explain_first_stage(self) -> str:
        return "dense exact" if self.exact else "dense HNSW" + (f" ef={self.hnsw_ef}" if self.hnsw_ef else "")

    def dense_search(self) -> DenseSearch:
        return DenseSearch(self.depth, self.exact, self.hnsw_ef)


class DenseParams(Spec):
    """The dense half of a hybrid retriever."""

    depth: int = Field(100, gt=0)
    exact: bool = False
    hnsw_ef: int | None = Field(None, gt=0)
