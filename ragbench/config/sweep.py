"""Sweep configuration: a YAML file validated with pydantic before any heavy work.

A sweep is the product ``chunkers x embedders x retrievers``; a BM25 retriever depends on the chunker only, so it is
paired with each chunker once. Every expanded configuration gets a stable id: the hash of its canonical spec.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ragbench.core.errors import ConfigError
from ragbench.core.hashing import stable_hash

PrefixMode = Literal["none", "title", "breadcrumb"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def canonical(self) -> dict[str, Any]:
        """The spec as a plain dict without its display name: what identifies it."""
        return self.model_dump(mode="json", exclude={"name"})

    @property
    def spec_id(self) -> str:
        return stable_hash(self.canonical())


# ---------------------------------------------------------------- dataset
class DatasetSpec(_Spec):
    """Where the labelled data is. Relative paths are resolved against the config file's folder."""

    name: str | None = None
    format: Literal["beir", "squad"] = "beir"
    path: Path
    split: str = "test"
    queries: Literal["in_qrels", "all"] = Field(
        "in_qrels", description="in_qrels: only queries judged in this split (BEIR convention); all: every query, "
        "unjudged ones counted as unlabelled")
    spans: bool = Field(True, description="load span labels when the dataset has them")
    squad_documents: Literal["paragraph", "article"] = "paragraph"
    max_queries: int | None = Field(None, gt=0, description="evaluate a seeded sample of this many queries")
    max_docs: int | None = Field(None, gt=0, description="keep all judged docs plus seeded distractors up to this many")
    seed: int = 0


# ---------------------------------------------------------------- chunkers
class _ChunkerBase(_Spec):
    name: str | None = None
    prefix: PrefixMode = Field(
        "title", description="text prepended to each chunk for embedding and BM25 (offsets unchanged): none, the "
        "document title, or title plus heading breadcrumb")


class WholeDocChunker(_ChunkerBase):
    kind: Literal["whole"] = "whole"


class _SizedChunker(_ChunkerBase):
    unit: Literal["tokens", "chars"] = "tokens"
    size: int = Field(..., gt=0)
    overlap: int = Field(0, ge=0)
    tokenizer: str = Field("all-MiniLM-L6-v2", description="tokenizer that counts tokens (an embedder name)")

    @model_validator(mode="after")
    def _overlap_below_size(self):
        if self.overlap >= self.size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than size ({self.size})")
        return self


class FixedChunker(_SizedChunker):
    kind: Literal["fixed"] = "fixed"


class RecursiveChunker(_SizedChunker):
    kind: Literal["recursive"] = "recursive"
    separators: tuple[str, ...] = ("\n\n", "\n", ". ", " ", "")


class SentenceChunker(_ChunkerBase):
    kind: Literal["sentences"] = "sentences"
    window: int = Field(3, gt=0, description="sentences per chunk")
    stride: int = Field(0, ge=0, description="sentences to advance; 0 means window (no overlap)")

    @model_validator(mode="after")
    def _stride_within_window(self):
        if self.stride > self.window:
            raise ValueError(f"stride ({self.stride}) larger than window ({self.window}) would skip sentences")
        return self


class MarkdownChunker(_ChunkerBase):
    kind: Literal["markdown"] = "markdown"
    max_tokens: int | None = Field(None, gt=0, description="split sections longer than this recursively")
    tokenizer: str = "all-MiniLM-L6-v2"


ChunkerSpec = Annotated[
    Union[WholeDocChunker, FixedChunker, RecursiveChunker, SentenceChunker, MarkdownChunker],
    Field(discriminator="kind"),
]


def chunker_label(spec) -> str:
    if spec.name:
        return spec.name
    match spec.kind:
        case "whole":
            return "whole"
        case "fixed" | "recursive":
            return f"{spec.kind}{spec.size}{'t' if spec.unit == 'tokens' else 'c'}o{spec.overlap}"
        case "sentences":
            return f"sent{spec.window}s{spec.stride or spec.window}"
        case "markdown":
            return f"markdown{spec.max_tokens or ''}"
    return spec.kind


# ---------------------------------------------------------------- embedders
class EmbedderSpec(_Spec):
    name: str | None = None
    model: str
    query_prompt: str = ""
    document_prompt: str = ""
    batch_size: int = Field(64, gt=0)
    max_seq_length: int | None = Field(None, gt=0)

    @property
    def label(self) -> str:
        return self.name or self.model.split("/")[-1]


# ---------------------------------------------------------------- index
class IndexSpec(_Spec):
    """Qdrant collection parameters. ``full_scan_threshold_kb`` below which Qdrant searches brute force."""

    distance: Literal["cosine", "dot", "euclid"] = "cosine"
    hnsw_m: int = Field(16, gt=0)
    ef_construct: int = Field(100, gt=0)
    full_scan_threshold_kb: int = Field(10_000, ge=0)


# ---------------------------------------------------------------- retrievers
class RerankSpec(_Spec):
    """Rerank the top ``top_n`` candidates and keep the best ``keep``.

    ``biencoder``: rescore with a second (stronger) embedding model, cosine similarity (works offline);
    ``crossencoder``: a sentence-transformers ``CrossEncoder`` (needs its weights locally).
    """

    kind: Literal["biencoder", "crossencoder"] = "biencoder"
    model: str
    top_n: int = Field(50, gt=0)
    keep: int | None = Field(None, gt=0, description="default: top_n")

    @model_validator(mode="after")
    def _keep_within_top_n(self):
        if self.keep is not None and self.keep > self.top_n:
            raise ValueError(f"keep ({self.keep}) cannot exceed top_n ({self.top_n})")
        return self


class ParentsSpec(_Spec):
    """Small-to-big: search small chunks, return their enclosing parent (markdown section or a fixed window)."""

    mode: Literal["section", "window"] = "section"
    window_chars: int = Field(2000, gt=0)
    max_level: int = Field(6, ge=1, le=6)
    align: Literal["grid", "center"] = "grid"


class _RetrieverBase(_Spec):
    name: str | None = None
    depth: int = Field(100, gt=0, description="chunks fetched per query")
    rerank: RerankSpec | None = None
    parents: ParentsSpec | None = None
    filter: dict[str, Any] | None = Field(None, description="metadata filter on the corpus' metadata fields, e.g. "
                                          "{tenant: public} or {doc_type: [api, reference]}; recall is reported "
                                          "with and without it")


class DenseRetriever(_RetrieverBase):
    kind: Literal["dense"] = "dense"
    exact: bool = False
    hnsw_ef: int | None = Field(None, gt=0)


class BM25Params(_Spec):
    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = "lucene"
    stopwords: str | None = "en"
    stemmer: str | None = "english"


class BM25Retriever(_RetrieverBase, BM25Params):
    kind: Literal["bm25"] = "bm25"


class DenseParams(_Spec):
    depth: int = Field(100, gt=0)
    exact: bool = False
    hnsw_ef: int | None = Field(None, gt=0)


class HybridBM25Params(BM25Params):
    depth: int = Field(100, gt=0)


class HybridRetriever(_RetrieverBase):
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

    @model_validator(mode="after")
    def _qdrant_engine_is_plain_rrf(self):
        if self.engine == "qdrant" and (self.fusion != "rrf" or tuple(self.weights) != (1.0, 1.0)
                                        or not float(self.k).is_integer()):
            raise ValueError("engine: qdrant supports unweighted RRF with an integer k only (Qdrant weights RRF by "
                             "another formula)")
        return self


RetrieverSpec = Annotated[Union[DenseRetriever, BM25Retriever, HybridRetriever], Field(discriminator="kind")]


def retriever_label(spec) -> str:
    if spec.name:
        return spec.name
    if spec.kind == "bm25":
        base = f"bm25(k1={spec.k1:g},b={spec.b:g})"
    elif spec.kind == "hybrid":
        w = "" if tuple(spec.weights) == (1.0, 1.0) else f",w={spec.weights[0]:g}/{spec.weights[1]:g}"
        base = f"hybrid-{spec.fusion}{w}" + ("@qdrant" if spec.engine == "qdrant" else "")
    else:
        base = "dense-exact" if spec.exact else f"dense-hnsw{spec.hnsw_ef or ''}"
    if spec.rerank:
        base += f" > rerank[{spec.rerank.model.split('/')[-1]}@{spec.rerank.top_n}]"
    if spec.parents:
        base += f" > parents[{spec.parents.mode}]"
    if spec.filter:
        base += " filter[" + ",".join(f"{k}={v}" for k, v in spec.filter.items()) + "]"
    return base


class AnnFidelitySpec(_Spec):
    """For every dense config, recall@k of HNSW results against exact search, over a sweep of ``hnsw_ef``."""

    enabled: bool = True
    k: int = Field(10, gt=0)
    ef_values: tuple[int, ...] = (16, 32, 64, 128, 256)


class DiagnosticsSpec(_Spec):
    """Reachability split: a query's first relevant document within k (hit), in the top ``pool`` but below k
    (ranked badly: a reranker's job), or not in the pool (unreachable: a representation problem)."""

    k: int = Field(10, gt=0)
    pool: int = Field(50, gt=0)


class QueryClassSpec(_Spec):
    """Classes for queries the dataset leaves unclassified: first matching ``(class, regex)`` rule wins."""

    rules: tuple[tuple[str, str], ...] | None = Field(None, description="default: identifier-like tokens")
    default: str = "natural"
    override: bool = False


# ---------------------------------------------------------------- metrics and output
class MetricsSpec(_Spec):
    measures: tuple[Literal["recall", "precision", "mrr", "ndcg", "hit"], ...] = (
        "recall", "precision", "mrr", "ndcg", "hit")
    cutoffs: tuple[int, ...] = (1, 3, 5, 10, 20, 100)
    gain: Literal["exponential", "linear"] = "exponential"
    primary: str = "ndcg@10"
    spans: bool = Field(True, description="span-level and budget-matched metrics when the dataset has span labels")
    show: tuple[str, ...] | None = Field(None, description="columns of the printed leaderboard (any measure, e.g. "
                                         "span_recall@5, evidence_recall@512tok, chunkstat_spans_split)")
    budgets: tuple[int, ...] = Field((256, 512, 1024, 2048), description="context budgets in tokens (tokenizer "
                                     "of the embedder) for evidence_recall@{N}tok")

    @field_validator("cutoffs", "budgets")
    @classmethod
    def _positive(cls, v):
        if not v or any(k <= 0 for k in v):
            raise ValueError("must be a non-empty list of positive integers")
        return tuple(sorted(set(v)))


class ContextAssemblySpec(_Spec):
    """How retrieved chunks become the prompt's context (see :mod:`ragbench.generation.llm.context`)."""

    k: int = Field(5, gt=0)
    ordering: Literal["score", "edges", "best_last"] = "score"
    dedupe: bool = True
    dedupe_threshold: float = Field(0.8, gt=0, le=1)
    token_budget: int | None = Field(1500, gt=0)
    tokenizer: str = "all-MiniLM-L6-v2"
    instruction: str | None = Field(None, description="default: answer using ONLY the context, else reply "
                                                      "exactly INSUFFICIENT_CONTEXT")


class LocalServerSpec(_Spec):
    ctx: int = Field(4096, gt=0)
    parallel: int = Field(1, gt=0)
    threads: int = Field(1, gt=0, description="1 is fastest on a shared 2-core machine")
    startup_timeout: float = Field(120, gt=0)


class KSweepSpec(_Spec):
    ks: tuple[int, ...] = (1, 3, 5, 10, 20)
    token_budget: int | None = Field(3000, gt=0)


class GenerationSpec(_Spec):
    """End-to-end answer accuracy and the oracle test with an LLM.

    ``endpoint: local`` starts llama.cpp's ``llama-server`` on 127.0.0.1 (built by ``make llm``) with ``model`` from
    the packaged registry (or a .gguf path); otherwise ``endpoint`` is an OpenAI-compatible base URL and ``model``
    its model name. The API key is read from ``api_key_env`` and never logged or stored.
    """

    enabled: bool = True
    endpoint: str = "local"
    model: str = "smollm2-135m"
    server: LocalServerSpec = LocalServerSpec()
    api_key_env: str = "RAGBENCH_LLM_API_KEY"
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(64, gt=0)
    timeout: float = Field(60, gt=0)
    retries: int = Field(2, ge=0)
    concurrency: int = Field(1, gt=0)
    extra_body: dict[str, Any] = Field(default_factory=lambda: {"cache_prompt": False},
                                       description="extra request fields; {} for hosted APIs")
    sample: int | None = Field(30, gt=0, description="seeded sample of queries to answer; null = all")
    seed: int = 0
    context: ContextAssemblySpec = ContextAssemblySpec()
    oracle: bool = True
    pool_depth: int = Field(50, gt=0)
    k_sweep: KSweepSpec | None = KSweepSpec()

    @model_validator(mode="after")
    def _pool_covers_context(self):
        if self.pool_depth < self.context.k:
            raise ValueError(f"pool_depth ({self.pool_depth}) must be >= context.k ({self.context.k})")
        return self


class OutputSpec(_Spec):
    home: Path | None = Field(None, description="local folder for caches, DuckDB, embedded Qdrant and MLflow "
                                                "(default: $RAGBENCH_HOME or ./.ragbench)")
    mlflow_tracking_uri: str | None = Field(None, description="default: $MLFLOW_TRACKING_URI or SQLite under home")
    experiment: str | None = None
    mlflow: bool = True


class SweepConfig(_Spec):
    name: str
    dataset: DatasetSpec
    chunkers: tuple[ChunkerSpec, ...] = Field(..., min_length=1)
    embedders: tuple[EmbedderSpec, ...] = ()
    retrievers: tuple[RetrieverSpec, ...] = Field(..., min_length=1)
    index: IndexSpec = IndexSpec()
    metrics: MetricsSpec = MetricsSpec()
    ann_fidelity: AnnFidelitySpec = AnnFidelitySpec()
    diagnostics: DiagnosticsSpec = DiagnosticsSpec()
    query_classes: QueryClassSpec = QueryClassSpec()
    generation: GenerationSpec | None = None
    output: OutputSpec = OutputSpec()

    @model_validator(mode="after")
    def _dense_needs_embedder(self):
        if any(r.kind in ("dense", "hybrid") for r in self.retrievers) and not self.embedders:
            raise ValueError("a dense or hybrid retriever needs at least one entry under 'embedders'")
        return self

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"output"})

    def expand(self) -> list["RunConfig"]:
        """The sweep grid. Dense retrievers pair with every embedder; BM25 with none."""
        configs: list[RunConfig] = []
        for chunker in self.chunkers:
            for retriever in self.retrievers:
                embedders = self.embedders if retriever.kind in ("dense", "hybrid") else (None,)
                for embedder in embedders:
                    configs.append(RunConfig(chunker, embedder, retriever, self.index if embedder else None))
        seen: dict[str, RunConfig] = {}
        for c in configs:
            seen.setdefault(c.config_id, c)
        return list(seen.values())


@dataclass(frozen=True)
class RunConfig:
    """One point of the sweep grid."""

    chunker: Any
    embedder: EmbedderSpec | None
    retriever: Any
    index: IndexSpec | None

    def spec(self) -> dict[str, Any]:
        return {
            "chunker": self.chunker.canonical(),
            "embedder": self.embedder.canonical() if self.embedder else None,
            "retriever": self.retriever.canonical(),
            "index": self.index.canonical() if self.index else None,
        }

    @property
    def config_id(self) -> str:
        return stable_hash(self.spec())

    @property
    def name(self) -> str:
        parts = [chunker_label(self.chunker)]
        if self.embedder:
            parts.append(self.embedder.label)
        parts.append(retriever_label(self.retriever))
        return " | ".join(parts)


# ---------------------------------------------------------------- loading with file:line errors
def _yaml_line(root: yaml.Node | None, loc: tuple) -> int | None:
    """1-based line of the YAML node at pydantic error location ``loc`` (deepest node found)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if k.value == str(key)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            nxt = node.value[key]
        else:
            nxt = None
        if nxt is None:
            break
        node, line = nxt, nxt.start_mark.line + 1
    return line


def load_config(path: str | os.PathLike) -> SweepConfig:
    """Read and validate a sweep YAML. Errors name the file and line; dataset paths resolve against the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    text = path.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text)
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level")
    ds = raw.get("dataset")
    if isinstance(ds, dict) and "path" in ds:
        p = Path(os.path.expandvars(str(ds["path"])))
        ds["path"] = str(p if p.is_absolute() else (path.parent / p).resolve())
    try:
        return SweepConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x in {
                "whole", "fixed", "recursive", "sentences", "markdown", "dense", "bm25", "hybrid"}))
            line = _yaml_line(root, loc)
            dotted = ".".join(str(x) for x in loc) or "(top level)"
            lines.append(f"{path}:{line}: {dotted}: {err['msg']}")
        raise ConfigError("invalid sweep config\n" + "\n".join(lines)) from None
