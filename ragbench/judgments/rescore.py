"""Re-judging stored rankings on new labels: what a sweep rerun does after ``ragbench judge merge``.

A config's evaluation key is ``<retrieval key>+<labels fingerprint>`` once judgments are added
(:func:`ragbench.sweep.evaluate.evaluation_key`). When a rerun finds no result under its key but one whose
retrieval part is the same (same config, corpus, questions, models, settings: only the labels differ), that
result's rows are copied into the new sweep and every measure the document labels decide is recomputed from its
stored rankings (:func:`rejudge`): nothing is chunked, embedded or retrieved. Those measures are the document rank
measures at every cutoff (``judged@k`` included; tuning and ``heldout/`` sets as a full evaluation splits them),
the reachability diagnostics (``reach_*``) and the ``unpooled_*`` "before" means (:func:`unpooled_means`). Span
and chunk-level measures read span labels, which judgments never change.

A config is re-judged only when its stored rankings are exactly what those measures were computed on
(:func:`can_rejudge`): no reranker (reachability reads the first stage), no small-to-big parents and no metadata
filter (their other runs are not stored). Those, and a config whose count of unlabelled queries changed (a judgment
labelled a query that had no relevant document: document depth counts labelled queries), are evaluated again —
from cached chunks and vectors.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from ragbench.core.measure_keys import measure_key, measure_key_expr
from ragbench.core.progress import log
from ragbench.data.dataset import Dataset
from ragbench.data.holdout import HELDOUT_PREFIX, holdout_split
from ragbench.evaluation.diagnostics import reachability, reachability_summary
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.measures import Measure, measure_version
from ragbench.evaluation.metrics import aggregate, evaluate_per_query
from ragbench.results.outcomes import SUMMARY_SCHEMA
from ragbench.results.store import ResultStore

#: the prefix of a document rank measure's mean on the dataset's own labels only (``unpooled_ndcg_at_10``)
UNPOOLED_PREFIX = "unpooled_"


def can_rejudge(run_config) -> bool:
    """Whether a config's stored rankings hold every run its label-dependent measures read (see the module)."""
    r = run_config.retriever
    return r.rerank is None and r.parents is None and r.filter is None


def _restrict(ds: Dataset, query_ids) -> Dataset:
    ids = pl.Series(sorted(query_ids), dtype=pl.String).implode()
    primary = ds.primary_qrels.filter(pl.col("query_id").is_in(ids)) if ds.primary_qrels is not None else None
    return replace(ds, queries=ds.queries.filter(pl.col("query_id").is_in(ids)),
                   qrels=ds.qrels.filter(pl.col("query_id").is_in(ids)),
                   spans=ds.spans.filter(pl.col("query_id").is_in(ids)), primary_qrels=primary)


def parts(ds: Dataset, spec) -> list[tuple[Dataset, str]]:
    """``(dataset, measure prefix)`` of each set a config is judged on: the whole dataset, or the tuning set and
    the held-out one (``heldout/``) when ``spec.holdout`` is set, split as the evaluation splits it."""
    if spec.holdout is None:
        return [(ds, "")]
    split = holdout_split(ds.queries, ds.qrels, spec.holdout, spec.holdout_seed)
    return [(_restrict(ds, split.tuning), ""), (_restrict(ds, split.heldout), HELDOUT_PREFIX)]


def unpooled_means(ds: Dataset, chunk_run: pl.DataFrame, measures) -> dict[str, float]:
    """``unpooled_<measure> -> mean`` of every document rank measure on the dataset's own labels only
    (:attr:`~ragbench.data.dataset.Dataset.primary_qrels`): the score before the added judgments, from the same
    ranking. Empty when no judgment was added."""
    if ds.primary_qrels is None:
        return {}
    qids = ds.queries["query_id"].to_list()
    per_query = evaluate_per_query(document_run(chunk_run), ds.primary_qrels, qids, measures)
    return {UNPOOLED_PREFIX + measure_key(m): float("nan") if mean is None else mean
            for m, mean in aggregate(per_query).select("measure", "mean").iter_rows()}


def rejudge_sources(store: ResultStore, retrieval_keys: dict[str, str], configs: dict,
                    n_unlabelled: int) -> dict[str, tuple[str, str]]:
    """``config_id -> (sweep, origin)`` of the stored results the configs of ``retrieval_keys`` (``config_id ->``
    the retrieval part of their evaluation key) can be re-judged from: same rankings, other labels, a config
    :func:`can_rejudge` and the same count of unlabelled (tuning) queries ``n_unlabelled``."""
    found = store.rejudgeable_configs(retrieval_keys)
    return {c: (sweep, origin) for c, (sweep, origin, n) in found.items()
            if can_rejudge(configs[c]) and n == n_unlabelled}


def tuning_unlabelled(ds: Dataset, spec) -> int:
    """The unlabelled count a config's stored row holds: of the tuning set when there is a held-out one."""
    return parts(ds, spec)[0][0].n_unlabelled


def rejudge(store: ResultStore, sweep_id: str, config_ids, configs: dict, ds: Dataset, spec,
            eval_keys: dict[str, str]) -> None:
    """Recompute, in the sweep's stored copy of each config of ``config_ids``, every measure the document labels
    decide (see the module docstring) from its stored rankings and ``ds``'s labels, and store its new evaluation
    key ``eval_keys[config_id]``. ``spec``: the sweep's evaluation settings (``metrics``, ``diagnostics``,
    ``holdout``, ``holdout_seed``)."""
    metrics, diag = spec.metrics, spec.diagnostics
    measures = [Measure(name, k, metrics.gain) for name in metrics.rank_measures for k in metrics.cutoffs]
    for config_id in config_ids:
        rankings = store.rankings(sweep_id, config_id)
        per_query, level, diagnostics = [], [], []
        for part, prefix in parts(ds, spec):
            qids = part.queries["query_id"].to_list()
            run = rankings.filter(pl.col("query_id").is_in(pl.Series(qids, dtype=pl.String).implode()))
            doc_run = document_run(run)
            values = evaluate_per_query(doc_run, part.qrels, qids, measures)
            per_query.append(values.join(part.queries.select("query_id", "query_class"), on="query_id", how="left")
                             .select("query_id", "query_class", (pl.lit(prefix) + pl.col("measure")).alias("measure"),
                                     "value"))
            reach = reachability(doc_run, part.qrels, qids, k=diag.k, pool=diag.pool)
            diagnostics.append(reach)
            means = unpooled_means(part, run, measures)
            for category, _, _, share in reachability_summary(reach).iter_rows():  # of the labelled, as evaluated
                if category != "unlabelled":
                    means[f"reach_{category}@{diag.k}/{diag.pool}"] = share if share is not None else float("nan")
            n_scored = part.queries.height - part.n_unlabelled
            level += [(measure_key(prefix + m), v, n_scored, part.n_unlabelled) for m, v in means.items()]
        table = pl.concat(per_query).with_columns(measure_key_expr(pl.col("measure")))
        summary = pl.concat([aggregate(table).cast(SUMMARY_SCHEMA),
                             pl.DataFrame(level, schema=SUMMARY_SCHEMA, orient="row")])
        stored_versions = store.measure_versions(sweep_id).get(config_id, {})
        versions = {**stored_versions, **{m: measure_version(m) for m in sorted(set(metrics.rank_measures))}}
        store.replace_measures(sweep_id, config_id, table, summary, versions)
        store.set_rejudged(sweep_id, config_id, pl.concat(diagnostics), eval_keys[config_id])
        log.info("config %s: re-judged from its stored rankings on the new labels (nothing retrieved or embedded)",
                 configs[config_id].name)
