"""Recording each config as it finishes: its result (DuckDB, then MLflow, one config at a time), its log lines and
warnings, a failure's message, and the best config so far (for the k sweep)."""

from __future__ import annotations

import math
import threading
import traceback
from dataclasses import dataclass

import polars as pl

from ragbench.config import RunConfig
from ragbench.core.errors import RagbenchError
from ragbench.core.measure_keys import measure_key
from ragbench.core.progress import log
from ragbench.core.redact import redact
from ragbench.evaluation.metrics import MetricsSpec
from ragbench.results.outcomes import ConfigOutcome, ConfigResult, failure_status

#: warn when an embedder's window hides more than this share of the chunks' tokens
WINDOW_WARN_SHARE = 0.05


@dataclass(frozen=True)
class Best:
    """The best config evaluated in this process (by the primary measure): its run and judged chunks."""

    value: float
    run_config: RunConfig
    run: pl.DataFrame
    judged: pl.DataFrame
    position: int


class Recorder:
    """Writes each config's result through ``writer`` (a :class:`~ragbench.results.spool.SweepWriter`), one at a
    time; ``advance(1)`` moves the progress bar; :attr:`best` is the best config recorded so far (the first in
    config order among equals, as a loop over the configs would keep)."""

    def __init__(self, writer, metrics: MetricsSpec, dataset_fingerprint: str):
        self.writer, self.metrics, self.fingerprint = writer, metrics, dataset_fingerprint
        self.lock = threading.RLock()  # DuckDB then MLflow, one config at a time
        self.best: Best | None = None
        self.advance = lambda n: None

    def record(self, position: int, run_config: RunConfig, evaluated) -> ConfigOutcome:
        """Store one config's result (its evaluation: ``(result, retrieval output)``)."""
        result, out = evaluated
        with self.lock:
            self.writer.record(result)
            log_result(result, self.metrics)
            value, best = result.value(self.metrics.primary), self.best
            if value == value and (best is None or value > best.value
                                   or (value == best.value and position < best.position)):
                self.best = Best(value, run_config, out.run, out.judged_chunks, position)
        self.advance(1)
        return result.outcome()

    def failed(self, run_config: RunConfig, e: BaseException) -> ConfigOutcome:
        """Record a config that failed with ``e`` (its message redacted) and move the progress bar; one a budget
        stopped (:class:`~ragbench.sweep.budget.OverBudget`) as :meth:`not_run`."""
        from ragbench.sweep.budget import OverBudget

        if isinstance(e, OverBudget):
            return self.not_run(run_config, str(e))
        msg = redact(str(e) if isinstance(e, RagbenchError) else f"{type(e).__name__}: {e}")
        with self.lock:
            log.error("config %s failed: %s", run_config.labels.text, msg)
            log.debug("%s", "".join(traceback.format_exception(e)))
            self.writer.record_failure(run_config.config_id, run_config.name, run_config.spec(), self.fingerprint,
                                       msg)
        self.advance(1)
        return ConfigOutcome(run_config.config_id, run_config.name, run_config.spec(), "failed", error=msg)

    def not_run(self, run_config: RunConfig, reason: str) -> ConfigOutcome:
        """Record a config the sweep chose not to start, not failed: ``reason`` starts with
        :data:`~ragbench.results.outcomes.OVER_BUDGET` (a budgeted sweep ran out of time) or
        :data:`~ragbench.results.outcomes.SCREENED_OUT` (the screen's evidence), which gives its status
        (:func:`~ragbench.results.outcomes.failure_status`)."""
        with self.lock:
            log.info("config %s: %s", run_config.labels.text, reason)
            self.writer.record_failure(run_config.config_id, run_config.name, run_config.spec(), self.fingerprint,
                                       reason)
        self.advance(1)
        return ConfigOutcome(run_config.config_id, run_config.name, run_config.spec(), failure_status(reason),
                             error=reason)


def log_result(result: ConfigResult, metrics: MetricsSpec) -> None:
    """The config's primary score (and answer scores), then its warnings."""
    means = result.means()
    log.info("config %s: %s = %.4f", result.label, measure_key(metrics.primary), means.get(metrics.primary, math.nan))
    if result.answers is not None:
        verdicts = (dict(result.answers["verdict"].drop_nulls().value_counts().iter_rows())
                    if "verdict" in result.answers.columns else {})
        log.info("config %s: answers EM %.3f F1 %.3f contains %.3f accuracy %.3f, answer-in-context %.3f; "
                 "oracle %s", result.label, means["answer_em"], means["answer_f1"], means["answer_contains"],
                 means["answer_accuracy"], means["answer_in_context"], verdicts)
    warn(result.label, {**means, **{f"chunkstat_{k}": v for k, v in result.chunk_stats.items()}}, metrics.primary)


def warn(name: str, metrics: dict[str, float], primary: str) -> None:
    """Warnings next to the config's score: empty contexts, and an embedder window that hides the chunks (more
    than :data:`WINDOW_WARN_SHARE` of their tokens never embedded)."""
    primary = measure_key(primary)
    score = f"{primary} = {metrics.get(primary, math.nan):.4f}"
    for key, value in metrics.items():
        if key.startswith(measure_key("empty_contexts@")) and value > 0:
            log.warning("config %s (%s): %d quer%s got an empty context (%s): the budget left no room or nothing "
                        "was retrieved", name, score, value, "y" if value == 1 else "ies", key)
    over = metrics.get("chunkstat_chunks_over_embed_window", 0.0)
    unseen = metrics.get("chunkstat_tokens_never_embedded", 0.0)
    if unseen > WINDOW_WARN_SHARE:
        log.warning("config %s (%s): %.0f%% of its chunks are longer than the embedder's %d-token window; "
                    "%.0f%% of their tokens are never embedded (the model reads only the start of long chunks: "
                    "chunk smaller or raise max_seq_length)", name, score, 100 * over,
                    metrics.get("chunkstat_embed_window_tokens", 0), 100 * unseen)
