"""Evaluating one config: retrieve, judge, diagnose -> one :class:`~ragbench.results.outcomes.ConfigResult`.

Every measure, per query or config-level, comes out in the one long measure table; nothing is stored here
(:func:`ragbench.results.record.record` does that).

A config's stored results are reused by a later sweep when its :func:`evaluation_key` is unchanged: same config,
same dataset fingerprint, same evaluation settings and models, same component versions (chunker, embedder,
retriever, reranker, rewrite: :attr:`ragbench.core.spec.Spec.version`) and :data:`EVALUATION_VERSION`. Rank
measures carry their own versions (``@rank_measure("ndcg", version=1)``), stored with each config's results
(:func:`measure_versions`): a measure whose version changed is recomputed from the stored rankings
(:func:`refresh_measures`), not the whole config.

Behaviour is pinned by golden per-query values of the demo sweep (tests/golden/demo_values.json with the component
versions they were made with): a value that changes while those versions did not fails
tests/integration/test_golden_values.py.
"""

from __future__ import annotations

import hashlib
from contextlib import ExitStack
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ragbench.config import RunConfig
from ragbench.core.cache import ChunkCache
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import measure_key_expr
from ragbench.core.hashing import stable_hash
from ragbench.core.models import count_tokens, resolve_model
from ragbench.core.progress import log
from ragbench.core.spec import Spec, versions_above_one
from ragbench.data.dataset import Dataset
from ragbench.data.holdout import HELDOUT_PREFIX, holdout_split
from ragbench.embedding.embed import model_key
from ragbench.evaluation.ann import EfSweep, ann_fidelity
from ragbench.evaluation.cost import serving_latency, size_measures
from ragbench.evaluation.diagnostics import reachability, reachability_summary
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.measures import Measure, measure_version
from ragbench.evaluation.measures.judged import COVERAGE_MEASURES
from ragbench.evaluation.metrics import aggregate, document_depth, evaluate_per_query
from ragbench.evaluation.spans import chunk_level_run_metrics
from ragbench.judgments.rescore import unpooled_means
from ragbench.generation.stage import answer_in_context_metrics, generation_stage
from ragbench.results.outcomes import SUMMARY_SCHEMA, ConfigResult, config_level
from ragbench.results.store import ResultStore
from ragbench.retrieval import RetrievalOutput, RetrievalResources, retrieve
from ragbench.sweep.plan import ConfigInputs, EvaluationSpec
from ragbench.sweep.stages import chunk_stage, context_tokenizer, evaluate_stage

#: The version of the evaluation code no component owns (judging, span and budget measures, diagnostics, context
#: assembly, the oracle, chunk statistics, what is stored): bump it when such a change can alter a stored result,
#: and every config is evaluated again. A chunker, retriever, reranker, rewrite or measure change bumps that
#: component's own version instead. (4: the number of the keys made before component versions.)
EVALUATION_VERSION = 4


def component_versions(run_config: RunConfig) -> dict[str, int]:
    """``component -> version`` of every versioned part of ``run_config``: ``chunker <kind>``, ``embedder``,
    ``retriever <kind>``, ``rerank <kind>``, ``rewrite <kind>`` (parts the config lacks are left out)."""
    return {label: part.behaviour_version for label, part in _components(run_config).items()}


def _components(run_config: RunConfig) -> dict[str, Spec]:
    r = run_config.retriever
    parts: dict[str, Spec | None] = {f"chunker {run_config.chunker.kind}": run_config.chunker,
                                     "embedder": run_config.embedder, f"retriever {r.kind}": r}
    for role, part in (("rerank", r.rerank), ("rewrite", r.rewrite)):
        if part is not None:
            parts[f"{role} {part.kind}"] = part
    return {label: part for label, part in parts.items() if part is not None}


def measure_versions(names) -> dict[str, int]:
    """``measure -> version`` of the rank measures ``names`` (what a config's stored results were computed with)."""
    return {name: measure_version(name) for name in sorted(set(names))}


def evaluation_key(run_config: RunConfig, dataset_fingerprint: str, spec: EvaluationSpec,
                   labels_fingerprint: str | None = None) -> str:
    """What a config's results depend on, hashed: the config's spec, the dataset fingerprint, the evaluation
    settings (metrics, diagnostics, ANN fidelity, generation, query classes), the weights revision of every model
    it loads (embedder, reranker, tokenizers), :data:`EVALUATION_VERSION` and the versions of the config's
    components that are above 1 (none while every version is 1: the key is the one made before component versions).
    Rank-measure versions are not in it: a new measure version recomputes that measure only. Equal keys = results
    to reuse.

    Not covered: a local .gguf LLM file changed in place under the same path (name it anew, or ``--fresh``).

    ``labels_fingerprint`` (:attr:`~ragbench.data.dataset.Dataset.labels_fingerprint`: judgments added to the
    dataset's labels) is appended as ``<key>+<labels>``: the part before ``+`` is what the stored rankings depend
    on, so results whose labels alone differ are re-judged from their rankings
    (:mod:`ragbench.judgments.rescore`); without added judgments the key is the one made before them.
    """
    names = {run_config.embedder.model if run_config.embedder else None, run_config.chunker.tokenizer_name,
             getattr(run_config.retriever.rerank, "model", None)}
    models = {}
    try:
        names.add(context_tokenizer(run_config))
        for name in sorted(n for n in names if n):
            models[name] = resolve_model(name).key
    except RagbenchError:  # evaluating will fail and say why; nothing is reused for it meanwhile
        models["unresolved"] = sorted(n for n in names if n)
    keyed = {"evaluation_version": EVALUATION_VERSION, "config": run_config.spec(), "dataset": dataset_fingerprint,
             "evaluation": spec.canonical(), "models": models}
    versions = versions_above_one(_components(run_config))
    if versions:
        keyed["component_versions"] = versions
    key = stable_hash(keyed)
    return key if labels_fingerprint is None else f"{key}+{labels_fingerprint[:16]}"


def evaluate_config(run_config: RunConfig, ds: Dataset, measures, spec: EvaluationSpec,
                    inputs: ConfigInputs) -> tuple[ConfigResult, RetrievalOutput]:
    """Retrieve and judge one config; returns its result and the retrieval output (the run and the chunks it
    refers to, for the k sweep of the best config)."""
    res = inputs.resources
    with ExitStack() as held:  # an embedded collection is held (and closed) once per config, not per search
        for name in {res.collection, res.hybrid_collection} - {None}:
            held.enter_context(res.index.session(name))
        return _evaluate(run_config, ds, measures, spec, inputs)


def _evaluate(run_config: RunConfig, ds: Dataset, measures, spec: EvaluationSpec,
              inputs: ConfigInputs) -> tuple[ConfigResult, RetrievalOutput]:
    out = retrieve(run_config, ds, inputs.resources, spec.diagnostics.k)
    if spec.holdout is None:
        return _judge(run_config, ds, out, measures, spec, inputs), out
    # one retrieval for every query; judged apart so that the tuning measures (what ranks configs) never see the
    # held-out queries, which come back as heldout/<measure>
    split = holdout_split(ds.queries, ds.qrels, spec.holdout, spec.holdout_seed)
    tuning = _judge(run_config, _only(ds, split.tuning), _restrict(out, split.tuning), measures, spec, inputs)
    held = _judge(run_config, _only(ds, split.heldout), _restrict(out, split.heldout), measures, spec, inputs,
                  held_out=True)
    renamed = held.measures.with_columns((pl.lit(HELDOUT_PREFIX) + pl.col("measure")).alias("measure"))
    diagnostics = pl.concat([tuning.diagnostics, held.diagnostics]) if tuning.diagnostics is not None else None
    return replace(tuning, measures=pl.concat([tuning.measures, renamed]), rankings=out.run, diagnostics=diagnostics,
                   ms_per_query=1000 * out.seconds / max(ds.queries.height, 1)), out


def tuning_part(ds: Dataset, spec: EvaluationSpec) -> Dataset:
    """``ds`` restricted to its tuning queries (``spec.holdout``'s split; all of ``ds`` without one): what ranks
    configs and steers a sweep, never the held-out queries."""
    if spec.holdout is None:
        return ds
    return _only(ds, holdout_split(ds.queries, ds.qrels, spec.holdout, spec.holdout_seed).tuning)


def _only(ds: Dataset, query_ids: frozenset[str]) -> Dataset:
    ids = pl.Series(sorted(query_ids), dtype=pl.String).implode()
    return replace(ds, queries=ds.queries.filter(pl.col("query_id").is_in(ids)),
                   qrels=ds.qrels.filter(pl.col("query_id").is_in(ids)),
                   spans=ds.spans.filter(pl.col("query_id").is_in(ids)))


def _restrict(out: RetrievalOutput, query_ids: frozenset[str]) -> RetrievalOutput:
    ids = pl.Series(sorted(query_ids), dtype=pl.String).implode()
    keep = pl.col("query_id").is_in(ids)
    return replace(out, run=out.run.filter(keep), first_stage_run=out.first_stage_run.filter(keep),
                   truncated=out.truncated & query_ids,
                   unfiltered_run=out.unfiltered_run.filter(keep) if out.unfiltered_run is not None else None)


def _judge(run_config: RunConfig, ds: Dataset, out: RetrievalOutput, measures, spec: EvaluationSpec,
           inputs: ConfigInputs, held_out: bool = False) -> ConfigResult:
    """Every measure of one config's retrieval ``out`` on the queries of ``ds``. ``held_out``: the held-out set,
    measured without the LLM and without the query-independent extras (latency, ANN fidelity)."""
    token_counts = inputs.token_counts
    if out.judged_chunks is not inputs.resources.chunks:  # small-to-big: budgets are measured on the parents
        token_counts = dict(zip(out.judged_chunks["chunk_id"],
                                count_tokens(out.judged_chunks["text"].to_list(), inputs.tokenizer)))
    per_query = evaluate_stage(ds, out.run, measures, chunks=out.judged_chunks, metrics_spec=spec.metrics,
                               token_counts=token_counts)
    qids = ds.queries["query_id"].to_list()
    level: dict[str, float] = {} if held_out else dict(out.metrics)
    texts = inputs.context_texts if out.judged_chunks is inputs.resources.chunks else None  # parents: their own
    level.update(answer_in_context_metrics(ds, out.run, out.judged_chunks, spec.generation, texts))
    answers = None
    if inputs.generator is not None and not held_out:  # an LLM failure fails the config here, before any write
        gen_metrics, answers = generation_stage(ds, out.run, out.judged_chunks, inputs.generator, texts)
        level.update(gen_metrics)
    if out.unfiltered_run is not None:
        unfiltered = evaluate_per_query(document_run(out.unfiltered_run), ds.qrels, qids, measures)
        for m, mean in aggregate(unfiltered).select("measure", "mean").iter_rows():
            level[f"unfiltered_{m}"] = mean
    labelled = ds.qrels.filter(pl.col("relevance") > 0)["query_id"].unique().sort().to_list()
    level.update(document_depth(document_run(out.run), labelled, out.truncated, max(spec.metrics.cutoffs)))
    level.update(unpooled_means(ds, out.run, measures))  # before added judgments (none added: nothing)
    diag = spec.diagnostics
    reach = reachability(document_run(out.first_stage_run), ds.qrels, qids, k=diag.k, pool=diag.pool)
    for category, _, _, share in reachability_summary(reach).iter_rows():
        if category != "unlabelled":
            level[f"reach_{category}@{diag.k}/{diag.pool}"] = share if share is not None else float("nan")
    ann = None
    dense = run_config.retriever.dense_search()
    if dense is not None and run_config.embedder is not None and spec.ann_fidelity.enabled and not held_out:
        ann = _collection_ann_fidelity(inputs.resources, model_key(run_config.embedder), spec.ann_fidelity, dense)
        configured = ann.filter(pl.col("configured"))
        level[f"ann_recall_vs_exact@{spec.ann_fidelity.k}"] = 1.0 if dense.exact else float(configured["recall_vs_exact"][0])
    if not held_out:  # what the config costs: latency on the serving path, index size, memory, embedding time
        level.update(serving_latency(run_config, ds, inputs.resources))
        level.update(size_measures(run_config, inputs.resources, inputs.embed_seconds))
    per_query = per_query.select("query_id", "query_class", "measure", "value")
    result = ConfigResult(
        config_id=run_config.config_id, name=run_config.name, spec=run_config.spec(),
        dataset_fingerprint=ds.fingerprint, measures=pl.concat([per_query, config_level(level)]),
        rankings=out.run, n_queries=ds.queries.height, n_unlabelled=ds.n_unlabelled,
        ms_per_query=1000 * out.seconds / max(ds.queries.height, 1), chunk_stats=inputs.chunk_stats,
        diagnostics=reach, ann=ann, answers=answers, artifacts=dict(out.tables),
        measure_versions=measure_versions(spec.metrics.rank_measures))
    return result


def _collection_ann_fidelity(res: RetrievalResources, key: str, af, dense) -> pl.DataFrame:
    """The ANN fidelity table of the collection ``res`` searches (:func:`~ragbench.evaluation.ann.ann_fidelity`),
    measured once per collection, query vectors and swept values in a sweep: a dense and a hybrid config over one
    collection share it."""
    sweep = EfSweep(k=af.k, ef_values=tuple(af.ef_values), depth=max(dense.depth, af.k), configured_ef=dense.hnsw_ef)
    vectors = np.ascontiguousarray(res.query_vectors, dtype=np.float32)
    memo = (res.collection, key, hashlib.blake2b(vectors.tobytes(), digest_size=16).hexdigest(), sweep)
    if memo not in res.ann_tables:
        res.ann_tables[memo] = ann_fidelity(res.index, res.collection, vectors, key, sweep)
    return res.ann_tables[memo]


# ---------------------------------------------------------------- measures of a newer version on stored results
@dataclass(frozen=True)
class MeasureRefresh:
    """What a warm rerun does with reusable configs whose stored rank measures are of an older version:
    ``recompute`` (``config_id -> measure names``) from the stored rankings, or evaluate ``re_evaluate`` again
    (what their stale measures need is not stored: the unfiltered run of a filtered config, a small-to-big
    config's parent chunks)."""

    recompute: dict[str, tuple[str, ...]]
    re_evaluate: frozenset[str]

    def only(self, config_ids) -> "MeasureRefresh":
        """The refresh of the configs ``config_ids`` only (those the sweep does hold)."""
        return MeasureRefresh({c: m for c, m in self.recompute.items() if c in config_ids},
                              self.re_evaluate & frozenset(config_ids))


def stale_measures(stored: dict[str, int], spec: EvaluationSpec) -> tuple[str, ...]:
    """The config's measures whose registered version differs from the ``stored`` one (missing: version 1; a
    label-coverage measure missing was never computed, so it is stale: added from the stored rankings)."""
    return tuple(m for m in spec.metrics.rank_measures
                 if stored.get(m, 0 if m in COVERAGE_MEASURES else 1) != measure_version(m))


def plan_measure_refresh(store: ResultStore, sources: dict[str, str], configs: dict[str, RunConfig],
                         spec: EvaluationSpec) -> MeasureRefresh:
    """Which of the reusable configs ``sources`` (``config_id -> sweep holding its results``) have stale measures,
    and whether those can be recomputed from what is stored (see :class:`MeasureRefresh`)."""
    stored = {sweep: store.measure_versions(sweep) for sweep in set(sources.values())}
    recompute: dict[str, tuple[str, ...]] = {}
    again: set[str] = set()
    for config_id, sweep in sources.items():
        stale = stale_measures(stored[sweep].get(config_id, {}), spec)
        retriever = configs[config_id].retriever
        ranked_only = all(m in COVERAGE_MEASURES for m in stale)  # judged@k reads the stored ranking alone
        if stale and not ranked_only and (retriever.parents is not None or retriever.filter is not None):
            again.add(config_id)
        elif stale:
            recompute[config_id] = stale
    return MeasureRefresh(recompute, frozenset(again))


def refresh_measures(store: ResultStore, sweep_id: str, refresh: MeasureRefresh, configs: dict[str, RunConfig],
                     ds: Dataset, spec: EvaluationSpec, chunk_cache: ChunkCache) -> None:
    """Recompute the stale measures of ``refresh.recompute`` in the sweep's stored results, from each config's
    stored rankings and the dataset's labels (chunks from the chunk cache for the chunk-level variants), and
    replace their rows; nothing is retrieved or embedded. The values are those a full evaluation would store:
    the same per-query functions on the same ranking (document, ``chunk_`` and ``heldout/`` variants)."""
    for config_id, stale in refresh.recompute.items():
        run_config = configs[config_id]
        rankings = store.rankings(sweep_id, config_id)
        chunks = chunk_stage(ds, run_config.chunker, chunk_cache) if spec.metrics.spans and ds.spans.height \
            else None
        measures = [Measure(name, k, spec.metrics.gain) for name in stale for k in spec.metrics.cutoffs]
        parts = [_rank_values(ds, rankings, chunks, measures)]
        if spec.holdout is not None:
            split = holdout_split(ds.queries, ds.qrels, spec.holdout, spec.holdout_seed)
            parts = [_rank_values(_only(ds, split.tuning), rankings, chunks, measures),
                     _rank_values(_only(ds, split.heldout), rankings, chunks, measures)
                     .with_columns((pl.lit(HELDOUT_PREFIX) + pl.col("measure")).alias("measure"))]
        per_query = pl.concat(parts).with_columns(measure_key_expr(pl.col("measure")))
        summary = aggregate(per_query).cast(SUMMARY_SCHEMA)
        store.replace_measures(sweep_id, config_id, per_query, summary, measure_versions(spec.metrics.rank_measures))
        log.info("config %s: %s recomputed from its stored rankings (new measure version)", run_config.labels.text,
                 ", ".join(stale))


def _rank_values(ds: Dataset, rankings: pl.DataFrame, chunks: pl.DataFrame | None, measures) -> pl.DataFrame:
    """The rank measures ``measures`` of the queries of ``ds``, as :func:`evaluate_stage` computes them: on
    documents, and on chunks (``chunk_`` prefix) when the dataset has span labels."""
    qids = ds.queries["query_id"].to_list()
    run = rankings.filter(pl.col("query_id").is_in(pl.Series(qids, dtype=pl.String).implode()))
    parts = [evaluate_per_query(document_run(run), ds.qrels, qids, measures)]
    if chunks is not None and ds.spans.height:
        parts.append(chunk_level_run_metrics(run, chunks, ds.spans, measures, query_ids=qids))
    return pl.concat(parts).join(ds.queries.select("query_id", "query_class"), on="query_id", how="left")\
        .select("query_id", "query_class", "measure", "value")
