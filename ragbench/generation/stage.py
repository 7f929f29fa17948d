"""Generation stage of a sweep: the LLM endpoint's lifecycle and, per config, answers + the oracle test.

The endpoint (a local ``llama-server`` started on 127.0.0.1, or any OpenAI-compatible URL) is started lazily on the
first config that needs it and stopped by the sweep, by its own PID, whatever happens. If it cannot be started, that
failure is remembered and every config that needs it fails with the same clear message, without retrying the start.
"""

from __future__ import annotations

import dataclasses

import polars as pl

from ragbench.core.progress import log
from ragbench.core.settings import Settings
from ragbench.data.dataset import Dataset
from ragbench.evaluation.means import query_mean
from ragbench.generation.answering import (
    ANSWER_SCHEMA,
    Retrieved,
    answer_queries,
    context_hits,
    k_sweep,
    oracle_test,
    summarize_answers,
    verdict_counts,
)
from ragbench.generation.llm.context import DEFAULT_INSTRUCTION, ChunkTexts, ContextSpec
from ragbench.generation.spec import GenerationSpec


def context_spec(spec: GenerationSpec) -> ContextSpec:
    c = spec.context
    return ContextSpec(k=c.k, ordering=c.ordering, dedupe=c.dedupe, dedupe_threshold=c.dedupe_threshold,
                       token_budget=c.token_budget, tokenizer=c.tokenizer,
                       instruction=c.instruction or DEFAULT_INSTRUCTION, overflow=c.overflow)


class Generator:
    """The sweep's LLM endpoint: ``client()`` starts it on first use; ``stop()`` always ends a local server."""

    def __init__(self, spec: GenerationSpec, settings: Settings):
        self.spec, self.settings = spec, settings
        self._server = None
        self._client = None
        self._failure: Exception | None = None
        self._cache_first: CacheFirstLLM | None = None

    def client(self):
        if self._failure is not None:
            raise self._failure
        if self._client is None:
            try:
                self._client = self._start()
            except Exception as e:
                self._failure = e
                raise
        return self._client

    def _start(self):
        from ragbench.generation.llm.client import ChatClient, ChatOptions

        s = self.spec
        if s.endpoint == "local":
            from ragbench.generation.llm.server import LocalLLMServer, ServerOptions, locate_llama_server, locate_model

            options = ServerOptions(ctx=s.server.ctx, parallel=s.server.parallel, threads=s.server.threads,
                                    startup_timeout=s.server.startup_timeout)
            self._server = LocalLLMServer(locate_llama_server(self.settings), locate_model(self.settings, s.model),
                                          options).start()
            base_url, model = self._server.base_url, self._server.model_id
            log.info("LLM: llama-server pid %s at %s serving %s", self._server.pid, base_url, model)
        else:
            base_url, model = s.endpoint, s.model
        options = ChatOptions(temperature=s.temperature, max_tokens=s.max_tokens, timeout=s.timeout, retries=s.retries,
                              concurrency=s.concurrency, extra_body=s.extra_body)
        return ChatClient(base_url, model, options, api_key_env=s.api_key_env,
                          api_key=self.settings.secret(s.api_key_env), cache_dir=self.settings.home / "cache" / "llm")

    def rewrite_llm(self) -> "CacheFirstLLM":
        """The endpoint as query rewrites use it: from the response cache first, so a rerun whose rewrites are all
        cached never starts the local server."""
        if self._cache_first is None:
            self._cache_first = CacheFirstLLM(self)
        return self._cache_first

    def cache_reader(self):
        """A client that only reads the response cache, under the model id the endpoint will have (a local model's
        :func:`~ragbench.generation.llm.server.model_identity`, computed from its file without starting it)."""
        from ragbench.generation.llm.client import ChatClient, ChatOptions

        s = self.spec
        if self._client is not None:
            model = self._client.model
        elif s.endpoint == "local":
            from ragbench.generation.llm.server import locate_model, model_identity

            model = model_identity(locate_model(self.settings, s.model))
        else:
            model = s.model
        options = ChatOptions(temperature=s.temperature, max_tokens=s.max_tokens, retries=0, extra_body=s.extra_body)
        return ChatClient("http://127.0.0.1:9", model, options, cache_dir=self.settings.home / "cache" / "llm")

    @property
    def model_id(self) -> str:
        return self._client.model if self._client is not None else self.spec.model

    def stop(self) -> None:
        if self._cache_first is not None and self._cache_first._reader is not None:
            self._cache_first._reader.close()
        if self._client is not None:
            self._client.close()
        if self._server is not None:
            self._server.stop()
            self._server = None


class CacheFirstLLM:
    """The :class:`~ragbench.retrieval.rewrite.QueryLLM` of a sweep: a batch whose every prompt is in the response
    cache is answered from it; otherwise the whole batch goes to the endpoint (started on first need), whose client
    serves the cached prompts from the same cache."""

    def __init__(self, generator: Generator):
        self.generator = generator
        self._reader = None

    @property
    def model(self) -> str:
        return self.generator.model_id

    def complete_many(self, batch, progress=None, max_tokens: int | None = None):
        if self._reader is None:
            try:
                self._reader = self.generator.cache_reader()
            except Exception:  # e.g. the model file is missing: the endpoint's own start says so clearly
                return self.generator.client().complete_many(batch, progress, max_tokens=max_tokens)
        hits = [self._reader.cached(m, max_tokens) for m in batch]
        if all(h is not None for h in hits):
            return hits
        return self.generator.client().complete_many(batch, progress, max_tokens=max_tokens)


def answer_in_context_metrics(ds: Dataset, run: pl.DataFrame, chunks: pl.DataFrame, spec: GenerationSpec | None,
                              texts: ChunkTexts | None = None) -> dict[str, float]:
    """Context measures of the assembled context, no LLM, for every config of a dataset with answers:

    * ``answer_in_context@k``: share of answerable queries whose context's chunk texts hold a gold answer;
    * ``empty_contexts@k``: number of queries (all of them) whose context is empty — nothing retrieved, or the
      budget dropped everything (``overflow: drop``); the sweep warns when it is not 0;
    * ``gold_lost_to_budget@k``: share of answerable queries whose gold evidence was in the top k but was cut or
      dropped by the token budget.

    ``texts`` (one per chunk table and context tokenizer) makes repeated calls reuse per-chunk work.
    """
    if not ds.queries["answers"].list.len().sum():
        return {}
    ctx = context_spec(spec) if spec else ContextSpec()
    if texts is not None and (texts.tokenizer, texts.shingle_size) != (ctx.tokenizer, ctx.shingle_size):
        texts = None
    hits = context_hits(Retrieved(ds, run, chunks), ctx, texts=texts)
    answerable = hits.filter(pl.col("answerable"))
    return {f"answer_in_context@{ctx.k}": query_mean(answerable["answer_in_context"]),
            f"empty_contexts@{ctx.k}": float((hits["n_chunks"] == 0).sum()),
            f"gold_lost_to_budget@{ctx.k}": query_mean(answerable["gold_lost_to_budget"])}


def generation_stage(ds: Dataset, run: pl.DataFrame, chunks: pl.DataFrame, generator: Generator,
                     texts: ChunkTexts | None = None) -> tuple[dict[str, float], pl.DataFrame]:
    """Answer a seeded sample of queries from this config's context, grade them, and run the oracle test.

    Returns the means (``answer_accuracy``, ``answer_em``, ``answer_f1``, ``answer_contains``, ...) and verdict
    counts (``oracle_PASS``, ...) as metrics, and one row per answered query with arm B and the verdict.
    """
    spec = generator.spec
    client = generator.client()
    ctx = context_spec(spec)
    if texts is not None and (texts.tokenizer, texts.shingle_size) != (ctx.tokenizer, ctx.shingle_size):
        texts = None
    retrieved = Retrieved(ds, run, chunks)
    answers = answer_queries(retrieved, client, ctx, sample=spec.sample, seed=spec.seed, texts=texts)
    metrics = summarize_answers(answers)
    if spec.oracle:  # arm A repeats the prompts above: served from the response cache
        oracle = oracle_test(retrieved, client, ctx, pool_depth=spec.pool_depth, sample=spec.sample,
                             seed=spec.seed, texts=texts)
        metrics.update({f"oracle_{v}": float(n) for v, n in verdict_counts(oracle).items()})
        answers = answers.join(oracle.select("query_id", "b_answer", "b_correct", "gold_in_context", "gold_in_pool",
                                             "gold_lost_to_budget", "verdict"), on="query_id", how="left")
    return metrics, answers


def k_sweep_stage(ds: Dataset, run: pl.DataFrame, chunks: pl.DataFrame, generator: Generator) -> pl.DataFrame:
    """Accuracy and recall over context sizes k for one config (the inverted U, if the data shows one)."""
    spec = generator.spec
    ctx = dataclasses.replace(context_spec(spec), token_budget=spec.k_sweep.token_budget)
    return k_sweep(Retrieved(ds, run, chunks), generator.client(), ctx, ks=spec.k_sweep.ks, sample=spec.sample,
                   seed=spec.seed)


ANSWERS_COLUMNS = [*ANSWER_SCHEMA, "b_answer", "b_correct", "gold_in_context", "gold_in_pool", "gold_lost_to_budget",
                   "verdict"]
