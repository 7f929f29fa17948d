"""Serving: a stored configuration answering new queries, the same way the sweep evaluated it.

Results are in :func:`~ragbench.core.schemas.canonical_order`, the order the sweep judged (trec_eval's tie rule).

A configuration is the ``spec`` dict stored in ``configs.spec_json`` (chunker, embedder, retriever, index). Its
chunks come from the content-addressed chunk cache (key = dataset fingerprint + chunker spec, as in
:func:`ragbench.sweep.orchestrator.chunk_stage`); a dense configuration searches the Qdrant collection the sweep built
(:func:`ragbench.index.qdrant.collection_name`), a BM25 configuration rebuilds its bm25s index over the cached chunks.
Nothing is re-embedded but the queries: a query a sweep embedded is served with its cached vector (so an evaluated
query is answered exactly as it was judged); any other is encoded by the model and not stored (see
:meth:`ProductionRetriever.query_vectors`).

:class:`RetrieverModel` wraps the retriever as an ``mlflow.pyfunc.PythonModel`` so that a promoted config is a
loadable model (``mlflow.pyfunc.load_model("models:/ragbench-retriever@production")``), not a label.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ragbench.config import CHUNKERS, RETRIEVERS, DatasetSpec, EmbedderSpec, IndexSpec, RunConfig
from ragbench.core.cache import ChunkCache, VectorCache
from ragbench.core.errors import RagbenchError
from ragbench.core.models import configure_model_store
from ragbench.core.schemas import canonical_order
from ragbench.core.settings import Settings

#: Columns of :meth:`ProductionRetriever.search`: one row per (query, rank), best first.
RESULT_SCHEMA = {"query_index": pl.Int64, "query": pl.String, "rank": pl.Int32, "chunk_id": pl.String,
                 "doc_id": pl.String, "score": pl.Float64, "text": pl.String}

@dataclass(frozen=True)
class ParsedConfig:
    """A stored config spec validated back into the pydantic specs the pipeline uses."""

    chunker: Any
    embedder: EmbedderSpec | None
    retriever: Any
    index: IndexSpec | None


def parse_config(spec: dict) -> ParsedConfig:
    """Validate a ``configs.spec_json`` dict; the error names the part that is wrong."""
    if not isinstance(spec, dict) or not {"chunker", "retriever"} <= spec.keys():
        raise RagbenchError(f"not a ragbench config spec (needs 'chunker' and 'retriever'): {spec!r:.200}")
    try:
        chunker = CHUNKERS.parse(spec["chunker"])
        retriever = RETRIEVERS.parse(spec["retriever"])
        embedder = EmbedderSpec.model_validate(spec["embedder"]) if spec.get("embedder") else None
        index = IndexSpec.model_validate(spec["index"]) if spec.get("index") else None
    except Exception as e:  # pydantic ValidationError: say which spec it was
        raise RagbenchError(f"invalid stored config spec: {e}") from None
    if retriever.uses_embedder and (embedder is None or index is None):
        raise RagbenchError(f"a {retriever.kind} config spec needs 'embedder' and 'index'")
    return ParsedConfig(chunker, embedder, retriever, index)


def config_collection(spec: dict, dataset_fingerprint: str, sparse: bool = False) -> str | None:
    """The Qdrant collection a dense or hybrid config searches (as named by the sweep's index stage; ``sparse``:
    the one with Qdrant-BM25 vectors that ``engine: qdrant`` hybrids use); None for BM25."""
    from ragbench.index.build import collection_for

    p = parse_config(spec)
    if p.embedder is None:
        return None
    return collection_for(dataset_fingerprint, p.chunker, p.embedder, p.index, sparse=sparse)


def load_chunks(chunker, dataset_fingerprint: str, home: Path, dataset_spec: dict | None = None) -> pl.DataFrame:
    """The config's chunk table from the chunk cache; rebuilt from ``dataset_spec`` when the cache lacks it.

    Raises
    ------
    RagbenchError
        Chunks are not cached and no dataset spec was given, or the dataset changed since (fingerprint differs).
    """
    from ragbench.chunking import chunk_corpus_incremental

    cache = ChunkCache(Path(home) / "cache")
    key = ChunkCache.key(dataset_fingerprint, chunker)

    def build() -> pl.DataFrame:
        if dataset_spec is None:
            raise RagbenchError(f"chunks of dataset {dataset_fingerprint} are not in the cache under {home} and no "
                                "dataset spec was given to rebuild them")
        ds = load_dataset_checked(dataset_spec, dataset_fingerprint, home=home)
        return chunk_corpus_incremental(ds, chunker, cache.root / "by-document")[0]

    chunks, _ = cache.get_or_build(key, build)
    return chunks


def load_dataset_checked(dataset_spec: dict, dataset_fingerprint: str, *, home: Path | None = None):
    """Load the dataset a sweep used and refuse it if its files changed since (the fingerprint differs).

    With ``home``, its ``cache/`` is the conversion cache the sweep filled (as :func:`ragbench.data.load_dataset`
    takes it): a folder of converted files is read back, not converted again."""
    from ragbench.data import load_dataset

    ds = load_dataset(DatasetSpec.model_validate(dataset_spec), Path(home) / "cache" if home is not None else None)
    if ds.fingerprint != dataset_fingerprint:
        raise RagbenchError(f"the dataset at {dataset_spec.get('path')} changed since the sweep: fingerprint "
                            f"{ds.fingerprint} != {dataset_fingerprint}; rerun the sweep on the current data")
    return ds


class ProductionRetriever:
    """Answers queries with one stored configuration, through the same pipeline the sweep evaluated
    (:func:`ragbench.retrieval.pipeline.retrieve`: first stage, fusion, rerank, small-to-big, filter). Build with
    :meth:`from_config`."""

    def __init__(self, spec: dict, dataset_fingerprint: str, settings: Settings, chunks: pl.DataFrame,
                 parsed: ParsedConfig, collection: str | None, corpus: pl.DataFrame):
        from ragbench.retrieval import RetrievalResources

        self.spec = spec
        self.dataset_fingerprint = dataset_fingerprint
        self._cached_queries: set[str] | None = None  # the vector cache's query hashes, read on first use
        self.settings = settings
        self.home = Path(settings.home)
        self.chunks = chunks
        self.parsed = parsed
        self.collection = collection
        self.corpus = corpus
        self.config = RunConfig(parsed.chunker, parsed.embedder, parsed.retriever, parsed.index)
        self._index = None
        self._resources = RetrievalResources(chunks, vector_cache=VectorCache(self.home / "cache"))

    @classmethod
    def from_config(cls, spec: dict, dataset_fingerprint: str, settings: Settings,
                    dataset_spec: dict | None = None) -> "ProductionRetriever":
        """Load a config as stored in ``configs.spec_json``, for the dataset it was evaluated on.

        Parameters
        ----------
        spec : dict
            The stored config spec.
        dataset_fingerprint : str
            Fingerprint of the dataset (``configs.dataset_fingerprint``): keys the chunk cache and the collection.
        settings : Settings
            Its home holds the cache and the embedded Qdrant collections (or ``qdrant_url`` names the server).
        dataset_spec : dict, optional
            ``sweeps.spec_json["dataset"]``: lets the chunks be rebuilt if the cache was cleared, and gives the
            document metadata that metadata filters and small-to-big parents need.
        """
        configure_model_store(Path(settings.home) / "models")  # fine-tuned embedders live in the home
        parsed = parse_config(spec)
        chunks = load_chunks(parsed.chunker, dataset_fingerprint, settings.home, dataset_spec)
        r = parsed.retriever
        if (r.filter or r.parents) and dataset_spec is None:
            raise RagbenchError("this config filters on metadata or returns parents: it needs the dataset spec")
        corpus = (load_dataset_checked(dataset_spec, dataset_fingerprint, home=settings.home).corpus
                  if (r.filter or r.parents)
                  else chunks.select("doc_id").unique().with_columns(title=pl.lit(""), text=pl.lit(""),
                                                                      metadata=pl.lit("{}")))
        collection = config_collection(spec, dataset_fingerprint)
        self = cls(spec, dataset_fingerprint, settings, chunks, parsed, collection, corpus)
        if collection is not None:
            from ragbench.index.qdrant import open_index

            self._index = open_index(self.settings)
            if self._index.meta(collection) is None:
                raise RagbenchError(f"Qdrant collection {collection} of this config does not exist (or is "
                                    f"incomplete) under {self.home}; rerun the sweep that built it")
            self._resources.index, self._resources.collection = self._index, collection
            if r.uses_sparse_collection:
                self._resources.hybrid_collection = config_collection(spec, dataset_fingerprint, sparse=True)
        return self

    @property
    def depth(self) -> int:
        return int(self.parsed.retriever.depth)

    def search(self, queries: list[str], k: int | None = None) -> pl.DataFrame:
        """Top ``k`` chunks (default: the config's retrieval depth) for each query, as :data:`RESULT_SCHEMA`."""
        from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA, SPANS_SCHEMA
        from ragbench.data.dataset import Dataset
        from ragbench.retrieval import retrieve

        if isinstance(queries, str):
            queries = [queries]
        queries = [str(q) for q in queries]
        if not queries:
            return pl.DataFrame(schema=RESULT_SCHEMA)
        k = int(k or self.depth)
        if k <= 0:
            raise RagbenchError(f"k must be positive, got {k}")
        qids = [str(i) for i in range(len(queries))]
        asked = Dataset("queries", self.corpus,
                        pl.DataFrame({"query_id": qids, "text": queries, "query_class": [None] * len(qids),
                                      "answers": [[]] * len(qids)}, schema=QUERY_SCHEMA),
                        pl.DataFrame(schema=QRELS_SCHEMA), pl.DataFrame(schema=SPANS_SCHEMA), self.dataset_fingerprint)
        if self.parsed.embedder is not None:
            self._resources.query_vectors = self.query_vectors(queries)
        out = retrieve(self.config, asked, self._resources)
        texts = out.judged_chunks.select("chunk_id", "text")
        named = pl.DataFrame({"query_index": range(len(queries)), "query": queries},
                             schema={"query_index": pl.Int64, "query": pl.String})
        run = canonical_order(out.run)  # retrieve() already returns it so; the rule is stated here
        return (run.filter(pl.col("rank") <= k).join(texts, on="chunk_id", how="left")
                .with_columns(pl.col("query_id").cast(pl.Int64).alias("query_index"))
                .join(named, on="query_index", how="left")
                .sort(["query_index", "rank"])
                .select(list(RESULT_SCHEMA))
                .cast(RESULT_SCHEMA))

    def query_vectors(self, queries: list[str]):
        """Row i = the vector of ``queries[i]``: from the vector cache when a sweep embedded that text with this
        model (the vector it was judged with), else from the model, one call for all of them, and not stored.

        The cache's query hashes are read once per retriever (the cache only grows, and a text it gains later is
        encoded instead, as a new query is). Serving writes nothing: a segment per request would grow the cache
        without end and make every later lookup read more files."""
        from ragbench.embedding.embed import encode_uncached, model_key, prompt_hashes

        spec, cache, key = self.parsed.embedder, self._resources.vector_cache, model_key(self.parsed.embedder)
        if self._cached_queries is None:
            self._cached_queries = cache.known(key, "query")
        hashes = prompt_hashes(queries, spec.query_prompt)
        hit = [i for i, h in enumerate(hashes) if h in self._cached_queries]
        new = [i for i, h in enumerate(hashes) if h not in self._cached_queries]
        parts = []
        if hit:
            try:
                parts.append((hit, cache.fetch(key, "query", [hashes[i] for i in hit])))
            except KeyError:  # a segment found damaged since: never served from, every query encoded anew
                new = list(range(len(queries)))
        if new:
            parts.append((new, encode_uncached([queries[i] for i in new], spec, "query")))
        out = np.empty((len(queries), parts[0][1].shape[1]), dtype=np.float32)
        for rows, vectors in parts:
            out[rows] = vectors
        return out

    def search_documents(self, queries: list[str], k: int = 10) -> pl.DataFrame:
        """Top ``k`` *documents* per query, ordered exactly as the sweep judges them
        (:func:`ragbench.evaluation.judging.document_run`): a document scores its best chunk and documents are in
        trec_eval's order (score descending as 32-bit floats, ties by ``doc_id`` descending).

        Searches the config's full depth of chunks, keeps each document's best chunk (its row: ``chunk_id``,
        ``text``), then cuts at ``k``.
        """
        from ragbench.evaluation.judging import best_chunk_per_document

        chunks = self.search(queries, max(k, self.depth))
        docs = best_chunk_per_document(chunks, query="query_index")
        return docs.filter(pl.col("rank") <= k).sort(["query_index", "rank"]).select(list(RESULT_SCHEMA))

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None


# ---------------------------------------------------------------- MLflow pyfunc
CONFIG_ARTIFACT = "ragbench_config"


def model_payload(spec: dict, dataset_fingerprint: str, home: Path, dataset_spec: dict | None, *,
                  name: str, sweep_id: str, config_id: str, top_k: int = 10) -> dict:
    """What the registered model carries as its ``ragbench_config.json`` artifact."""
    return {"spec": spec, "dataset_fingerprint": dataset_fingerprint, "home": str(Path(home).resolve()),
            "dataset": dataset_spec, "name": name, "sweep_id": sweep_id, "config_id": config_id, "top_k": top_k}


def __getattr__(name: str):
    """``RetrieverModel`` is built on first use: its base class is MLflow's, and importing MLflow takes seconds (10 s
    on a loaded 2-core machine) that ``explain``, ``gate`` and the other users of this module do not need."""
    if name == "RetrieverModel":
        cls = globals()["RetrieverModel"] = _retriever_model_class()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _retriever_model_class() -> type:
    from mlflow.pyfunc import PythonModel

    class RetrieverModel(PythonModel):
        """``mlflow.pyfunc`` wrapper: ``predict`` answers queries with the registered configuration.

        Input: a pandas DataFrame with a ``query`` column, a list of strings, or one string. Output: a pandas
        DataFrame with one row per (query, document rank): ``query_index, query, rank, doc_id, chunk_id, score, text``;
        ``top_k`` documents per query (stored with the model, default 10). ``RAGBENCH_SERVING_HOME`` overrides the
        home recorded at promotion time (the cache and collections must be there).
        """

        # Inputs are validated in ``predict`` (a DataFrame with a ``query`` column, or strings); this tells MLflow not
        # to wrap ``predict`` for type-hint validation (and not to warn at import that it has no type hints).
        _skip_type_hint_validation = True

        def load_context(self, context) -> None:
            from ragbench.core.settings import Settings

            payload = json.loads(Path(context.artifacts[CONFIG_ARTIFACT]).read_text())
            self.payload = payload
            settings = Settings.from_env()  # the serving process is an edge: its environment may move the home
            settings = settings.with_home(settings.serving_home or payload["home"])
            self.retriever = ProductionRetriever.from_config(payload["spec"], payload["dataset_fingerprint"], settings,
                                                             payload.get("dataset"))

        def predict(self, context, model_input, params: dict | None = None):
            import pandas as pd

            if isinstance(model_input, str):
                queries = [model_input]
            elif isinstance(model_input, pd.DataFrame):
                if "query" not in model_input.columns:
                    raise RagbenchError(f"input DataFrame needs a 'query' column, got {list(model_input.columns)}")
                queries = model_input["query"].astype(str).tolist()
            elif isinstance(model_input, (list, tuple)):
                queries = [str(q) for q in model_input]
            else:
                raise RagbenchError(f"input must be a DataFrame with a 'query' column or a list of strings, got "
                                    f"{type(model_input).__name__}")
            k = int((params or {}).get("k", self.payload.get("top_k", 10)))
            out = self.retriever.search_documents(queries, k)
            return out.select("query_index", "query", "rank", "doc_id", "chunk_id", "score", "text").to_pandas()

    # pickled by reference as ragbench.promotion.serving.RetrieverModel (this module's __getattr__ finds it)
    RetrieverModel.__qualname__ = "RetrieverModel"
    return RetrieverModel
