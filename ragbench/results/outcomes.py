"""What a sweep produces: one :class:`ConfigResult` per evaluated config (everything it measured, in one value),
the :class:`ConfigOutcome` summary the leaderboard shows, and the :class:`SweepResult`.

Measures of every kind travel in one long table (:data:`MEASURE_SCHEMA`): a per-query measure (``ndcg_at_10``,
``span_recall_at_5``) has one row per query; a config-level measure (``reach_hit_at_10_of_50``,
``rerank_ms_per_query``, ``ann_recall_vs_exact_at_10``, oracle verdict counts) has one row with ``query_id`` null.
:meth:`ConfigResult.summary` aggregates both the same way for every consumer (DuckDB, MLflow, the leaderboard).

A :class:`ConfigResult` is where measure names become measure keys (:func:`ragbench.core.measure_keys.measure_key`):
the evaluation stages may name them ``ndcg@10``; everything recorded, logged or printed uses ``ndcg_at_10``, and
lookups (``ConfigOutcome.metrics[...]``, :meth:`ConfigResult.value`) accept both spellings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from ragbench.core.cache import EmbedStats
from ragbench.core.measure_keys import MeasureMap, measure_key, measure_key_expr, measure_keys
from ragbench.evaluation.metrics import aggregate

#: query_id null = a config-level value; query_class travels with per-query rows
MEASURE_SCHEMA = {"query_id": pl.String, "query_class": pl.String, "measure": pl.String, "value": pl.Float64}
SUMMARY_SCHEMA = {"measure": pl.String, "mean": pl.Float64, "n": pl.Int64, "n_unlabelled": pl.Int64}


def config_level(values: dict[str, float]) -> pl.DataFrame:
    """Config-level measures as rows of the long measure table (``query_id`` null)."""
    return pl.DataFrame({"query_id": [None] * len(values), "query_class": [None] * len(values),
                         "measure": list(values), "value": [float(v) for v in values.values()]},
                        schema=MEASURE_SCHEMA)


@dataclass(frozen=True)
class ConfigResult:
    """Everything one config produced, recorded by :func:`ragbench.results.record.record` in one step."""

    config_id: str
    name: str
    spec: dict
    dataset_fingerprint: str
    measures: pl.DataFrame  # MEASURE_SCHEMA
    rankings: pl.DataFrame  # RUN_SCHEMA
    n_queries: int
    n_unlabelled: int
    ms_per_query: float
    chunk_stats: dict[str, float] = field(default_factory=dict)
    diagnostics: pl.DataFrame | None = None  # reachability per query
    ann: pl.DataFrame | None = None  # HNSW recall vs exact per hnsw_ef
    answers: pl.DataFrame | None = None  # LLM answers and oracle verdicts
    artifacts: dict[str, pl.DataFrame] = field(default_factory=dict)  # further tables for MLflow
    eval_key: str | None = None  # what the results depend on: a later sweep with the same key reuses them
    measure_versions: dict[str, int] | None = None  # rank measure -> the version its values were computed with

    def __post_init__(self):
        if self.measures.height and self.measures["measure"].str.contains(r"[@/]").any():  # ndcg@10 -> ndcg_at_10
            object.__setattr__(self, "measures",
                               self.measures.with_columns(measure_key_expr(pl.col("measure"))))

    @property
    def per_query(self) -> pl.DataFrame:
        """The per-query rows (``query_id, query_class, measure, value``)."""
        return self.measures.filter(pl.col("query_id").is_not_null())

    @property
    def n_without_evidence(self) -> int | None:
        """Queries without evidence, the unlabelled count of every span-family measure
        (:func:`ragbench.evaluation.spans.without_evidence`); None without span measures."""
        from ragbench.evaluation.spans import without_evidence

        return without_evidence(self.per_query)

    def summary(self) -> pl.DataFrame:
        """One row per measure: the mean over labelled queries (NaN excluded) with ``n`` scored and
        ``n_unlabelled`` (for a span-family measure: :attr:`n_without_evidence`, the one count of its family); a
        config-level value is its own mean, over the config's labelled queries."""
        from ragbench.evaluation.spans import SPAN_FAMILY_PREFIXES

        agg = aggregate(self.per_query)
        unlabelled = self.n_without_evidence
        if unlabelled is not None:
            span = pl.any_horizontal([pl.col("measure").str.starts_with(p) for p in SPAN_FAMILY_PREFIXES])
            agg = agg.with_columns(n=pl.when(span).then(pl.lit(self.n_queries - unlabelled, pl.Int64))
                                   .otherwise(pl.col("n")),
                                   n_unlabelled=pl.when(span).then(pl.lit(unlabelled, pl.Int64))
                                   .otherwise(pl.col("n_unlabelled")))
        level = self.measures.filter(pl.col("query_id").is_null()).select(
            "measure", pl.col("value").alias("mean"), n=pl.lit(self.n_queries - self.n_unlabelled, pl.Int64),
            n_unlabelled=pl.lit(self.n_unlabelled, pl.Int64))
        return pl.concat([agg.cast(SUMMARY_SCHEMA), level.cast(SUMMARY_SCHEMA)])

    def means(self) -> MeasureMap:
        """``measure -> mean`` of :meth:`summary` (lookups accept either spelling of a measure)."""
        s = self.summary()
        return MeasureMap(zip(s["measure"], s["mean"]))

    def value(self, measure: str, default: float = float("nan")) -> float:
        """The mean of ``measure`` (``ndcg@10`` or ``ndcg_at_10``), ``default`` when it was not measured."""
        return self.means().get(measure_key(measure), default)

    @property
    def label(self) -> str:
        """The config's name for people (:func:`ragbench.config.labels.config_label`)."""
        from ragbench.config.labels import config_label

        return config_label(self.spec, self.name)

    def outcome(self) -> "ConfigOutcome":
        chunkstats = {f"chunkstat_{k}": v for k, v in self.chunk_stats.items()}
        return ConfigOutcome(self.config_id, self.name, self.spec, "finished", {**self.means(), **chunkstats},
                             self.n_queries, self.n_unlabelled)


#: the error of a config a budgeted sweep did not start (stored with status ``over_budget``, not ``failed``)
OVER_BUDGET = "not run: over budget"


#: the error of a config a screened sweep did not run (``search: {strategy: screen}``; status ``screened_out``): its
#: chunker x model pair was significantly worse than the screen's leader on the pooled sub-corpus
SCREENED_OUT = "not run: screened out"

#: statuses of configs recorded without results that did not fail: a later sweep evaluates them
NOT_RUN_STATUSES = ("over_budget", "screened_out")

#: how people read a config's stored status (``over_budget`` is not run, never failed)
STATUS_WORDS = {"over_budget": OVER_BUDGET, "screened_out": SCREENED_OUT}


def failure_status(error: str | None) -> str:
    """``over_budget`` for a config the budget stopped (its error starts with :data:`OVER_BUDGET`),
    ``screened_out`` for one the screen left out (:data:`SCREENED_OUT`), else ``failed``."""
    prefixes = {OVER_BUDGET: "over_budget", SCREENED_OUT: "screened_out"}
    return next((status for prefix, status in prefixes.items() if (error or "").startswith(prefix)), "failed")


@dataclass(frozen=True)
class ConfigFailure:
    """A config that failed: its id, name and spec on the dataset ``dataset_fingerprint``, and the ``error``."""

    config_id: str
    name: str
    spec: dict
    dataset_fingerprint: str
    error: str


@dataclass(frozen=True)
class ConfigOutcome:
    config_id: str
    name: str
    spec: dict
    # finished | failed | over_budget | screened_out | skipped (finished in an earlier attempt of this sweep, or
    # reused)
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    n_queries: int = 0
    n_unlabelled: int = 0
    error: str | None = None
    reused_from: str | None = None  # the sweep whose stored results this config reused

    def finished_from(self, stored: dict[str, tuple[dict[str, float], int, int]]) -> "ConfigOutcome":
        """This config finished with its stored results (``stored``: ``ResultStore.stored_config_metrics``, config
        id -> (metrics, n_queries, n_unlabelled)), as a reused or earlier-finished config is reported."""
        return ConfigOutcome(self.config_id, self.name, self.spec, "finished",
                             *stored.get(self.config_id, ({}, 0, 0)), reused_from=self.reused_from)

    @property
    def label(self) -> str:
        """The config's name for people (:func:`ragbench.config.labels.config_label`)."""
        from ragbench.config.labels import config_label

        return config_label(self.spec, self.name)

    def __post_init__(self):
        if not isinstance(self.metrics, MeasureMap):
            object.__setattr__(self, "metrics", MeasureMap(self.metrics))


@dataclass(frozen=True)
class SweepResult:
    sweep_id: str
    name: str
    dataset_fingerprint: str
    home: Path
    outcomes: list[ConfigOutcome]
    embed_stats: list[EmbedStats]
    seconds: float
    primary: str
    show: tuple[str, ...] | None = None
    up_to_date: bool = False  # nothing was recorded: ``sweep_id`` already held it all (ragbench.sweep.up_to_date)

    def __post_init__(self):  # the config may spell them ndcg@10
        object.__setattr__(self, "primary", measure_key(self.primary))
        object.__setattr__(self, "show", measure_keys(self.show))

    @property
    def n_failed(self) -> int:
        return sum(o.status == "failed" for o in self.outcomes)

    @property
    def vectors_computed(self) -> int:
        return sum(s.computed for s in self.embed_stats)
