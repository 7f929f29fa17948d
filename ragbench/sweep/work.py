"""What a sweep's stages do, and what they share: the stage functions the graph
(:func:`~ragbench.sweep.graph.sweep_graph`) calls, with the caches, the index, the model slot and per chunker the
lazily built :class:`~ragbench.sweep.plan.ChunkerPlan` that every config of that chunker shares.
"""

from __future__ import annotations

import threading
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from ragbench.chunking.chunk_statistics import chunk_shape_statistics, chunk_statistics
from ragbench.config import RunConfig, SweepConfig
from ragbench.core.cache import ChunkCache, EmbedStats, VectorCache
from ragbench.core.models import count_tokens
from ragbench.core.schemas import index_texts
from ragbench.core.settings import Settings
from ragbench.core.workers import Workers
from ragbench.data import Dataset
from ragbench.embedding.embed import embed_texts, embedding_window_statistics
from ragbench.embedding.spec import EmbedderSpec
from ragbench.evaluation.cost import EMBED_SAMPLE, bm25_params_of, embed_seconds_estimate
from ragbench.evaluation.metrics import measures_from_spec
from ragbench.generation.llm.context import ChunkTexts, ContextSpec
from ragbench.generation.spec import GenerationSpec
from ragbench.generation.stage import Generator
from ragbench.index.build import IndexInputs, index_stage
from ragbench.index.qdrant import open_index
from ragbench.results.outcomes import ConfigResult
from ragbench.retrieval import RetrievalResources
from ragbench.sweep.evaluate import evaluate_config
from ragbench.sweep.plan import ChunkerPlan, ConfigInputs, EvaluationSpec
from ragbench.sweep.stages import chunk_stage, context_tokenizer, embed_documents_stage

#: How many stages may run a neural model at once in one sweep process: embedding documents or queries, and
#: evaluating a config that reranks. One: torch already spreads one model over every core (intra-op threads), so
#: a second copy would only fight the first for the same cores and double the memory. Other stages (chunking,
#: BM25, indexing, judging, recording) run beside it as far as the runner's worker limit allows.
MODEL_SLOTS = 1


class StageWork:
    """The stage functions of one sweep and the resources they share; per-chunker resources (chunks, BM25
    indexes, collections) and query vectors are built lazily, once, and shared by every config that needs them.
    ``eval_keys`` (config id -> evaluation key) stamps each evaluated result."""

    def __init__(self, cfg: SweepConfig, ds: Dataset, settings: Settings, workers: Workers | None = None):
        self.cfg, self.ds, self.settings, self.workers = cfg, ds, settings, workers
        self.home = Path(settings.home)
        self.evaluation = EvaluationSpec.of(cfg)
        self.measures = measures_from_spec(cfg.metrics)
        self.chunk_cache, self.vector_cache = ChunkCache(self.home / "cache"), VectorCache(self.home / "cache")
        self.index = open_index(settings)
        gen = cfg.generation
        self.generator = Generator(gen, settings) if gen is not None and gen.enabled else None
        # query rewrites use the generation endpoint (its defaults when the config has no generation: section)
        self.query_llm = self.generator
        if self.query_llm is None and any(r.rewrite is not None for r in cfg.retrievers):
            self.query_llm = Generator(gen or GenerationSpec(), settings)
        self.eval_keys: dict[str, str] = {}
        self.embed_stats: list[EmbedStats] = []  # what each embedding stage computed, in graph order
        self.rerankers: dict[str, object] = {}
        self.query_encodings: dict[str, dict] = {}  # serving latency: each query embedded once per model
        self.ann_tables: dict[tuple, object] = {}  # ANN fidelity: measured once per collection
        self.model_slot = threading.BoundedSemaphore(MODEL_SLOTS)
        self._plans: dict[int, tuple[ChunkerPlan, threading.Lock]] = {}
        self._plans_lock = threading.Lock()
        self._encode_rates: dict[tuple[int, str], float] = {}  # (chunker, embedder): seconds per chunk encoded
        self._bm25_users: dict[int, int] = {}  # per chunker: configs still to evaluate that search its BM25 index

    def stop_llm(self) -> None:
        """Stop a local LLM server (the generator itself, or the rewrites' own endpoint)."""
        if self.query_llm is not None:
            self.query_llm.stop()

    def count_bm25_users(self, order) -> None:
        """Count, per chunker, the configs of ``order`` (``(chunker index, config)``) that search its BM25 index."""
        for i, c in order:
            if bm25_params_of(c.retriever) is not None:
                self._bm25_users[i] = self._bm25_users.get(i, 0) + 1

    def drop_plan(self, chunker_index: int) -> None:
        """The chunker's shared plan is no longer needed (its last config is done)."""
        self._plans.pop(chunker_index, None)

    # ------------------------------------------------------------ the stages
    def chunk(self, chunker) -> pl.DataFrame:
        return chunk_stage(self.ds, chunker, self.chunk_cache)

    def embed_documents(self, chunker_index: int, chunks: pl.DataFrame, emb) -> EmbedStats:
        """Every chunk's vector into the cache, holding the model slot (see :data:`MODEL_SLOTS`). When enough of
        them were encoded here, their measured rate is kept for the configs' ``embed_seconds``."""
        s = self.settings
        with self.model_slot:
            stats = embed_documents_stage(chunks, emb, self.vector_cache, s.embed_segment_rows, s.min_free_bytes,
                                          self.workers)
        if stats.computed >= EMBED_SAMPLE and stats.encode_seconds > 0:
            self._encode_rates[(chunker_index, emb.spec_id)] = stats.encode_seconds / stats.computed
        return stats

    def embed_queries(self, emb) -> tuple[np.ndarray, EmbedStats]:
        s = self.settings
        with self.model_slot:
            return embed_texts(self.ds.queries["text"].to_list(), emb, "query", self.vector_cache,
                               s.embed_segment_rows, True, s.min_free_bytes)

    def index_chunks(self, chunker_index: int, emb, index_spec, chunks: pl.DataFrame, sparse: bool) -> str:
        """The chunker × embedder collection (``sparse``: with the BM25 sparse vectors of hybrid search)."""
        inputs = IndexInputs(self.ds.fingerprint, self.ds.corpus, self.cfg.chunkers[chunker_index], chunks, emb,
                             index_spec, sparse)
        return index_stage(inputs, self.vector_cache, self.index, disk_root=self.home,
                           reserve_bytes=self.settings.min_free_bytes)

    def evaluate(self, chunker_index: int, run_config: RunConfig, chunks: pl.DataFrame, collection: str | None = None,
                 query_vectors: tuple[np.ndarray, EmbedStats] | None = None,
                 hybrid_collection: str | None = None) -> tuple[ConfigResult, object]:
        """Retrieve and judge one config (:func:`~ragbench.sweep.evaluate.evaluate_config`); a reranking config
        holds the model slot while it runs."""
        try:
            inputs = self._inputs(run_config, chunker_index, chunks, collection,
                                  None if query_vectors is None else query_vectors[0], hybrid_collection)
            with self.model_slot if run_config.retriever.rerank is not None else nullcontext():
                result, out = evaluate_config(run_config, self.ds, self.measures, self.evaluation, inputs)
        finally:
            self._release_bm25(chunker_index, chunks, run_config)
        return replace(result, eval_key=self.eval_keys[run_config.config_id]), out

    # ------------------------------------------------------------ shared per chunker
    def _plan(self, chunker_index: int, chunks: pl.DataFrame) -> tuple[ChunkerPlan, threading.Lock]:
        """The chunker's shared plan and the lock that guards building its parts (once, whichever config asks)."""
        with self._plans_lock:
            if chunker_index not in self._plans:
                self._plans[chunker_index] = (ChunkerPlan(chunks), threading.Lock())
            return self._plans[chunker_index]

    def _release_bm25(self, chunker_index: int, chunks: pl.DataFrame, run_config: RunConfig) -> None:
        """Drop the chunker's BM25 indexes once no config left to evaluate searches them: at a million chunks an
        index holds about a gigabyte that the dense configs' HNSW build would otherwise sit on top of."""
        if bm25_params_of(run_config.retriever) is None:
            return
        plan, lock = self._plan(chunker_index, chunks)
        with lock:
            self._bm25_users[chunker_index] -= 1
            if self._bm25_users[chunker_index] == 0:
                plan.bm25.clear()

    def _inputs(self, run_config: RunConfig, chunker_index: int, chunks: pl.DataFrame, collection: str | None,
                query_vectors: np.ndarray | None, hybrid_collection: str | None) -> ConfigInputs:
        """What the retrieve/evaluate step of one config needs, built once per chunker and shared."""
        plan, lock = self._plan(chunker_index, chunks)
        tok = context_tokenizer(run_config)
        gen = self.cfg.generation
        ctx_tok = gen.context.tokenizer if gen is not None else ContextSpec().tokenizer
        emb = run_config.embedder
        with lock:
            counts, stats = self._token_statistics(plan, tok)
            if ctx_tok not in plan.context_texts:  # per-chunk context work, shared by this chunker's configs
                plan.context_texts[ctx_tok] = ChunkTexts(ctx_tok, ContextSpec().shingle_size,
                                                         plan.tokens[ctx_tok][0] if ctx_tok in plan.tokens else None)
            if emb is not None:
                if emb.spec_id not in plan.windows:
                    plan.windows[emb.spec_id] = embedding_window_statistics(
                        index_texts(plan.chunks), emb, counts=_counted_as_embedded(plan, emb, tok))
                stats = {**stats, **plan.windows[emb.spec_id]}
                if emb.spec_id not in plan.embed_seconds:  # measured by the embed stage, else on a sample
                    rate = self._encode_rates.get((chunker_index, emb.spec_id))
                    plan.embed_seconds[emb.spec_id] = (rate * plan.chunks.height if rate is not None else
                                                       embed_seconds_estimate(index_texts(plan.chunks), emb))
        retrieval = RetrievalResources(plan.chunks, vector_cache=self.vector_cache, bm25=plan.bm25,
                                       rerankers=self.rerankers, query_encodings=self.query_encodings,
                                       ann_tables=self.ann_tables,
                                       llm=self.query_llm.rewrite_llm if self.query_llm is not None else None)
        inputs = ConfigInputs(retrieval, tok, counts, stats, self.generator, plan.context_texts[ctx_tok],
                              plan.embed_seconds.get(emb.spec_id, 0.0) if emb is not None else 0.0)
        if emb is None:
            return inputs
        retrieval.index, retrieval.collection = self.index, collection
        retrieval.query_vectors = query_vectors
        if run_config.retriever.uses_sparse_collection:
            retrieval.hybrid_collection = hybrid_collection
        return inputs

    def _token_statistics(self, plan: ChunkerPlan, tok: str) -> tuple[dict[str, int], dict[str, float]]:
        """Per-chunk token counts and the chunk statistics under tokenizer ``tok`` (once per tokenizer; the
        caller holds the plan's lock)."""
        if tok not in plan.tokens:
            counts = dict(zip(plan.chunks["chunk_id"], count_tokens(plan.chunks["text"], tok)))
            if plan.shape is None:
                plan.shape = chunk_shape_statistics(plan.chunks, self.ds.spans, self.ds.corpus)
            plan.tokens[tok] = (counts, chunk_statistics(plan.chunks, counts, self.ds.spans, self.ds.corpus,
                                                         plan.shape))
        return plan.tokens[tok]


def _counted_as_embedded(plan: ChunkerPlan, emb: EmbedderSpec, tok: str) -> list[int] | None:
    """The chunks' token counts as the embedder reads them, taken from the context tokenizer's count when that is
    the same count (the embedder's own tokenizer, no document prompt, no chunk prefix), so a chunker's texts are
    tokenized once per tokenizer; None when the embedder reads other texts."""
    if tok != emb.model or emb.document_prompt or (plan.chunks["prefix"].fill_null("") != "").any():
        return None
    counts = plan.tokens[tok][0]
    return [counts[c] for c in plan.chunks["chunk_id"]]
