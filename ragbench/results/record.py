"""Recording a config: DuckDB first (the record), then MLflow (for browsing), in one call.

DuckDB is written first so that a config MLflow shows as finished is always in DuckDB; a config whose MLflow
logging failed is uploaded later by ``ragbench sync-mlflow`` (it finds the configs without an MLflow run id).
"""

from __future__ import annotations

from ragbench.core.progress import log
from ragbench.core.redact import redact
from ragbench.results.outcomes import ConfigFailure, ConfigResult
from ragbench.results.store import ResultStore
from ragbench.results.tracking import ConfigRun, Tracker, with_questions



def evidence_metric(n_without_evidence: int | None) -> dict[str, float]:
    """The MLflow metric of the span family's unlabelled count (``n_without_evidence``, as ``configs`` has it);
    nothing for a config without span measures."""
    return {} if n_without_evidence is None else {"n_without_evidence": float(n_without_evidence)}

def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def record(result: ConfigResult, sweep_id: str, store: ResultStore, tracker: Tracker | None,
           parent_run: str | None) -> str | None:
    """Store ``result`` in DuckDB (one transaction), then log it as an MLflow child run; returns the run id (None
    when MLflow is off or failed: the result is safe in DuckDB)."""
    store.write_config(sweep_id, result)
    if not (tracker and parent_run):
        return None
    tables = {"per_query.parquet": result.per_query.select("query_id", "measure", "value", "query_class"),
              "rankings.parquet": result.rankings}
    if result.diagnostics is not None:
        tables["reachability.parquet"] = result.diagnostics
    if result.ann is not None:
        tables["ann_fidelity.parquet"] = result.ann
    if result.answers is not None:
        tables["answers.parquet"] = result.answers
    try:
        # the question beside each id in MLflow's per-query table
        tables["per_query.parquet"] = with_questions(tables["per_query.parquet"],
                                                     store.query_texts(result.dataset_fingerprint))
        run = ConfigRun(parent_run, sweep_id, result.config_id, result.name, result.spec, result.dataset_fingerprint)
        run_id = tracker.log_config_result(
            run, metrics={**result.means(), **evidence_metric(result.n_without_evidence)},
            chunk_stats=result.chunk_stats, n_queries=result.n_queries,
            n_unlabelled=result.n_unlabelled, ms_per_query=result.ms_per_query, tables={**tables, **result.artifacts})
        store.set_config_mlflow_run(sweep_id, result.config_id, run_id)
        return run_id
    except Exception as e:
        log.warning("MLflow: could not log config %s (%s); it is in DuckDB — run `ragbench sync-mlflow` later",
                    result.label, _first_line(e))
        return None


def record_failure(failure: ConfigFailure, sweep_id: str, store: ResultStore, tracker: Tracker | None,
                   parent_run: str | None) -> None:
    """Store a failed config (its error, credentials masked) in DuckDB, then as a FAILED MLflow child run."""
    f = failure
    error = redact(f.error)
    store.write_config_failure(sweep_id, f.config_id, f.name, f.spec, f.dataset_fingerprint, error)
    if not (tracker and parent_run):
        return
    try:
        run_id = tracker.log_config_failure(
            ConfigRun(parent_run, sweep_id, f.config_id, f.name, f.spec, f.dataset_fingerprint), error)
        store.set_config_mlflow_run(sweep_id, f.config_id, run_id)
    except Exception as e:
        log.warning("MLflow: could not record the failure of %s: %s", f.name, _first_line(e))
