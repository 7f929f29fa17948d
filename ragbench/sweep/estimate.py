"""What a sweep will cost, in seconds, before it runs: counts (what the caches do not hold) times rates (measured on
this machine by :mod:`ragbench.sweep.calibrate`, or the defaults below).

Pure arithmetic, no file, model or store: :func:`estimate` turns a :class:`WorkCounts` and a :class:`Rates` into an
:class:`Estimate` (one :class:`StageCost` row per stage and its total). The conventions:

- loading: ``load_seconds[model]`` once per model with new texts;
- screening (``search: {strategy: screen}``): each pair's new texts of the pooled sub-corpus, priced as encoding;
  the pair's full embedding then counts only the texts the screen left new;
- encoding: ``seconds = seconds_per_token[model] x tokens``, where ``tokens`` are the new texts' encoded tokens
  (:func:`~ragbench.sweep.calibrate.encoded_tokens`: batched as the embed stage batches them, each batch padded to
  its longest text, each text cut at the model's window), so one calibration serves any chunker and corpus;
- chunking: ``seconds_per_doc_cut x documents`` per chunker whose chunks are not cached;
- indexing: ``seconds_per_vector_indexed x vectors`` per collection built;
- evaluating: ``seconds_per_config + seconds_per_query x queries`` per config evaluated (reused ones cost
  nothing); a reranking config adds ``seconds_per_rerank_pair x queries x depth``;
- LLM: ``seconds_per_llm_call x calls``;
- disk: ``4 x dim x vectors x 2`` bytes (the vector cache and the index hold each vector once);
- peak memory, in bytes, what the sweep's process holds at once: the process itself
  (:data:`SWEEP_PROCESS_BYTES`, plus :data:`MLFLOW_BYTES` when it logs to MLflow), the data (the corpus and every
  chunker's chunks, as polars sizes them), each model runtime the sweep loads once (:data:`RUNTIME_BYTES`), every
  model it loads (the calibration's measured ``memory_bytes``: weights and activations; else its weight bytes: the
  sweep keeps each loaded model for its later stages), and the largest collection's vectors. Each part is
  measured on its own; against the sweep's own peak (``benchmarks/plan_accuracy.py``) the sum read 0.89-0.96.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: characters per token, for counting the tokens of a model without a tokenizer file (English prose under WordPiece
#: is about 4; SciFact abstracts 4.1-4.4, a code-heavy HTML manual 3.6)
CHARS_PER_TOKEN = 4.0

#: default rates (seconds), measured on 2 CPU cores; encoding is always calibrated per model. A config's evaluation
#: (retrieval, judging, diagnostics, serving latency, recording, MLflow), as cold sweeps measured it (2026-12-05):
#: 0.60 s on the demo (34 queries), 1.23 s on 300 SciFact abstracts (300 queries, hybrid too), 1.88 s on a
#: SQuAD-style set (1,200 queries): least squares ``0.7 + 0.001 x queries`` (the earlier 0.9 + 0.004 x queries,
#: fitted before the serving and logging costs were cut, read 1.7-3x high)
DEFAULT_DOC_CUT_S = 0.002
DEFAULT_VECTOR_INDEX_S = 0.0004
DEFAULT_CONFIG_S = 0.7
DEFAULT_QUERY_S = 0.001
DEFAULT_RERANK_PAIR_S = 0.01
DEFAULT_LLM_CALL_S = 2.0

#: peak resident memory (bytes) measured on this 2-core Linux machine (2026-12-03): a sweep process without a
#: model (BM25 over 300 SciFact abstracts, its report, DuckDB: 443 MB), what logging to MLflow adds (559 MB in
#: all), and what each model runtime adds once imported beside it (torch with sentence-transformers; onnxruntime)
SWEEP_PROCESS_BYTES = 440 * 2**20
MLFLOW_BYTES = 115 * 2**20
RUNTIME_BYTES = {"torch": 310 * 2**20, "onnx": 20 * 2**20}


@dataclass(frozen=True)
class ChunkWork:
    """One chunker: its label, the corpus' ``documents``, its ``chunks``, whether they were ``cached``, and their
    ``bytes`` in memory."""

    chunker: str
    documents: int
    chunks: int
    cached: bool
    bytes: int = 0


@dataclass(frozen=True)
class EmbedWork:
    """Texts one model will see for one chunker (``chunker`` None: the queries): ``unique`` texts, of which
    ``cached`` are in the vector cache and ``new`` are not; ``new_tokens``: the new texts' encoded tokens
    (:func:`~ragbench.sweep.calibrate.encoded_tokens`)."""

    chunker: str | None
    model: str
    unique: int
    cached: int
    new: int
    new_tokens: int


@dataclass(frozen=True)
class IndexWork:
    """A collection to build: chunker x model, with ``vectors`` vectors (``hybrid``: with BM25 sparse vectors)."""

    chunker: str
    model: str
    vectors: int
    hybrid: bool = False


@dataclass(frozen=True)
class WorkCounts:
    """Everything a sweep will compute after its caches: per stage, the counts :func:`estimate` prices.
    ``run``/``reuse``/``skip``: configs evaluated now, copied from an earlier sweep, already done in this one;
    ``rerank_pairs``: query x candidate pairs the rerankers of the configs run will score; ``llm_calls``: answers and
    query rewrites; ``dims``: vector dimension per model; ``model_bytes``: resident memory per model the sweep
    loads; ``data_bytes``: the corpus in memory (each chunker's chunks: ``ChunkWork.bytes``); ``runtimes``: model
    runtimes loaded (``torch``, ``onnx``); ``mlflow``: whether the sweep logs to MLflow. A screened sweep
    (``search: {strategy: screen}``): ``screen``, each pair's texts of the pooled sub-corpus (``pool_documents``
    documents, cut at ``pool_depth`` documents per query and cheap retriever), and ``embeds`` then counts only what
    the screen leaves new."""

    chunks: tuple[ChunkWork, ...] = ()
    embeds: tuple[EmbedWork, ...] = ()
    indexes: tuple[IndexWork, ...] = ()
    run: int = 0
    reuse: int = 0
    skip: int = 0
    queries: int = 0
    rerank_pairs: int = 0
    llm_calls: int = 0
    dims: Mapping[str, int] = field(default_factory=dict)
    model_bytes: Mapping[str, int] = field(default_factory=dict)
    screen: tuple[EmbedWork, ...] = ()
    pool_documents: int = 0
    pool_depth: int = 0
    data_bytes: int = 0
    runtimes: tuple[str, ...] = ()
    mlflow: bool = False

    @property
    def pool_share(self) -> float | None:
        """The screen's pool as a share of the corpus' documents (None: no screen)."""
        corpus = max((c.documents for c in self.chunks), default=0)
        return self.pool_documents / corpus if self.screen and corpus else None


@dataclass(frozen=True)
class Rates:
    """Seconds per unit of work; ``seconds_per_token`` (per encoded token) and ``load_seconds`` (loading it) per
    model, from a calibration."""

    seconds_per_token: Mapping[str, float] = field(default_factory=dict)
    load_seconds: Mapping[str, float] = field(default_factory=dict)
    seconds_per_doc_cut: float = DEFAULT_DOC_CUT_S
    seconds_per_vector_indexed: float = DEFAULT_VECTOR_INDEX_S
    seconds_per_config: float = DEFAULT_CONFIG_S
    seconds_per_query: float = DEFAULT_QUERY_S
    seconds_per_rerank_pair: float = DEFAULT_RERANK_PAIR_S
    seconds_per_llm_call: float = DEFAULT_LLM_CALL_S


@dataclass(frozen=True)
class StageCost:
    """One row of the plan: ``stage`` (chunk, embed, index, evaluate, llm), ``what`` it works on, the ``count``
    of units it computes, ``cached`` units it does not, and the estimated ``seconds``."""

    stage: str
    what: str
    count: int
    cached: int
    seconds: float


@dataclass(frozen=True)
class Estimate:
    """The priced plan: its rows, ``total_seconds`` (their sum), ``disk_bytes`` and ``peak_memory_bytes`` (the sum
    of ``memory``: process, data, runtimes, models, collection). ``pair_seconds``: on a screened sweep, each chunker
    x model pair's full embedding and collections (what the screen saves when it screens the pair out);
    ``unpriced``: models with new texts and no calibration (their encoding is priced 0 until the sweep measures
    it)."""

    rows: tuple[StageCost, ...]
    disk_bytes: int
    peak_memory_bytes: int
    pair_seconds: Mapping[str, float] = field(default_factory=dict)
    unpriced: tuple[str, ...] = ()
    memory: Mapping[str, int] = field(default_factory=dict)

    @property
    def total_seconds(self) -> float:
        """Every row: on a screened sweep, as if the screen kept every pair."""
        return sum(r.seconds for r in self.rows)

    @property
    def floor_seconds(self) -> float:
        """A screened sweep's total if the screen keeps only its cheapest pair (``total_seconds`` otherwise)."""
        if not self.pair_seconds:
            return self.total_seconds
        return self.total_seconds - sum(self.pair_seconds.values()) + min(self.pair_seconds.values())

    def seconds_of(self, stage: str) -> float:
        return sum(r.seconds for r in self.rows if r.stage == stage)


def encode_seconds(model: str, tokens: int, rates: Rates) -> float:
    """``seconds_per_token[model] x tokens`` (0 when nothing is new)."""
    return rates.seconds_per_token.get(model, 0.0) * tokens if tokens else 0.0


def estimate(counts: WorkCounts, rates: Rates) -> Estimate:
    """Price ``counts`` with ``rates`` (the conventions are in the module docstring)."""
    rows = [StageCost("chunk", c.chunker, 0 if c.cached else c.documents, c.documents if c.cached else 0,
                      0.0 if c.cached else rates.seconds_per_doc_cut * c.documents) for c in counts.chunks]
    # a model with new texts is loaded once
    loads = dict.fromkeys(e.model for e in counts.screen + counts.embeds if e.new)
    rows += [StageCost("load", m, 1, 0, rates.load_seconds.get(m, 0.0)) for m in loads]
    rows += [StageCost(stage, f"{e.chunker or 'queries'} x {e.model}", e.new, e.cached,
                       encode_seconds(e.model, e.new_tokens, rates))
             for stage, work in (("screen", counts.screen), ("embed", counts.embeds)) for e in work]
    rows += [StageCost("index", f"{i.chunker} x {i.model}" + (" + BM25" if i.hybrid else ""), i.vectors, 0,
                       rates.seconds_per_vector_indexed * i.vectors) for i in counts.indexes]
    pairs: dict[str, float] = {}
    if counts.screen:
        for e in counts.embeds:
            if e.chunker is not None:
                key = f"{e.chunker} x {e.model}"
                pairs[key] = pairs.get(key, 0.0) + encode_seconds(e.model, e.new_tokens, rates)
        for i in counts.indexes:
            key = f"{i.chunker} x {i.model}"
            pairs[key] = pairs.get(key, 0.0) + rates.seconds_per_vector_indexed * i.vectors
    rows.append(StageCost("evaluate", "configs", counts.run, counts.reuse + counts.skip,
                          counts.run * (rates.seconds_per_config + rates.seconds_per_query * counts.queries)
                          + rates.seconds_per_rerank_pair * counts.rerank_pairs))
    if counts.llm_calls:
        rows.append(StageCost("llm", "calls", counts.llm_calls, 0, rates.seconds_per_llm_call * counts.llm_calls))
    new_vectors: dict[str, int] = {}
    for e in counts.screen + counts.embeds:
        new_vectors[e.model] = new_vectors.get(e.model, 0) + e.new
    disk = sum(2 * 4 * counts.dims.get(m, 384) * n for m, n in new_vectors.items())
    memory = memory_parts(counts)
    unpriced = tuple(m for m in loads if m not in rates.seconds_per_token)
    return Estimate(tuple(rows), disk, sum(memory.values()), pairs, unpriced, memory)


def memory_parts(counts: WorkCounts) -> dict[str, int]:
    """The peak memory's parts in bytes (the convention is in the module docstring): ``process``, ``data``,
    ``runtimes``, ``models``, ``collection``."""
    return {"process": SWEEP_PROCESS_BYTES + (MLFLOW_BYTES if counts.mlflow else 0),
            "data": counts.data_bytes + sum(c.bytes for c in counts.chunks),
            "runtimes": sum(RUNTIME_BYTES.get(r, 0) for r in counts.runtimes),
            "models": sum(counts.model_bytes.values()),
            "collection": max((4 * counts.dims.get(i.model, 384) * i.vectors for i in counts.indexes), default=0)}


def stage_seconds(stage: str, units: float, tokens: int, model: str | None, rates: Rates) -> float:
    """The estimated seconds of one stage of a running sweep: ``embed`` (``tokens`` new encoded tokens of ``model``),
    ``index`` (``units`` vectors), ``evaluate`` (one config over ``units`` queries)."""
    if stage == "embed":
        return encode_seconds(model or "", tokens, rates)
    if stage == "index":
        return rates.seconds_per_vector_indexed * units
    return rates.seconds_per_config + rates.seconds_per_query * units
