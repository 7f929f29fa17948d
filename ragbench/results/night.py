"""A sweep read as a whole on MLflow: every config of the sweep is a child of the sweep's parent run.

A config an earlier sweep evaluated (reused: its rows copied into this sweep) is not recomputed; it gets a child run
under this sweep's parent with the metrics DuckDB holds for it, tagged with the sweep that computed it
(:data:`COMPUTED_IN`) and that sweep's run (:data:`COMPUTED_RUN`, where its per-query tables and rankings are). A
config this sweep evaluated carries :data:`COMPUTED_IN` = the sweep itself, so a search such as
``tags.`ragbench.computed_in_sweep` != '<sweep id>'`` lists what a night reused.
"""

from __future__ import annotations

import json

from ragbench.core.progress import log
from ragbench.results.outcomes import NOT_RUN_STATUSES
from ragbench.results.record import evidence_metric
from ragbench.results.store import ResultStore
from ragbench.results.tracking import CONFIG_TAG, SWEEP_TAG, ConfigRun, Tracker, with_questions

#: a child run's tag: the sweep that evaluated the config (this sweep, or the one whose results it reused)
COMPUTED_IN = "ragbench.computed_in_sweep"
#: a reused child's tag: the MLflow run of the evaluation it copies (per-query tables and rankings are there)
COMPUTED_RUN = "ragbench.computed_in_run"


def sweep_children(tracker: Tracker, sweep_id: str) -> dict:
    """``config_id -> Run`` of the sweep's child runs (the newest one of a config, should there be two)."""
    runs = tracker.client.search_runs(
        [tracker.experiment_id], filter_string=f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`ragbench.kind` = 'config'",
        max_results=10_000, order_by=["attributes.start_time DESC"])
    out: dict = {}
    for r in runs:
        out.setdefault(r.data.tags.get(CONFIG_TAG), r)
    return out


def log_unlogged(tracker: Tracker, store: ResultStore, sweep_id: str, parent_run: str,
                 dataset_fingerprint: str) -> int:
    """Log in full, under ``parent_run``, every config of ``sweep_id`` that DuckDB holds without an MLflow run;
    returns how many. Such a config was stored while MLflow was down, or its process was killed between the DuckDB
    write and the MLflow log (a resumed sweep does not evaluate it again). Its child (found again by tag, never
    doubled) gets the stored means, chunk statistics, counts, per-query table and rankings; a failed or
    over-budget config a FAILED or KILLED child."""
    uploaded = 0
    for config_id, cname, cspec, cstatus, error, n_q, n_u, ms in store.pending_mlflow_configs(sweep_id).iter_rows():
        run = ConfigRun(parent_run, sweep_id, config_id, cname, json.loads(cspec), dataset_fingerprint)
        if cstatus in ("failed", *NOT_RUN_STATUSES):  # over budget, screened out: not run (KILLED)
            run_id = tracker.log_config_failure(run, error)
        else:
            evidence = store.without_evidence(sweep_id, config_id)
            metrics = {**store.config_means(sweep_id, config_id), **evidence_metric(evidence)}
            stats = dict(store.chunk_stats(sweep_id, config_id).select("stat", "value").iter_rows())
            per_query = with_questions(store.query_metrics(sweep_id, config_id),
                                       store.query_texts(dataset_fingerprint))
            run_id = tracker.log_config_result(
                run, metrics=metrics, chunk_stats=stats, n_queries=n_q or 0, n_unlabelled=n_u or 0,
                ms_per_query=ms or 0.0,
                tables={"per_query.parquet": per_query, "rankings.parquet": store.rankings(sweep_id, config_id)})
        store.set_config_mlflow_run(sweep_id, config_id, run_id)
        uploaded += 1
    return uploaded


def _origin(tracker: Tracker, run_id: str) -> tuple[str | None, str]:
    """``(sweep that computed it, its run)`` from the run DuckDB names for a copied config."""
    tags = tracker.client.get_run(run_id).data.tags
    return tags.get(COMPUTED_IN) or tags.get(SWEEP_TAG), run_id


def log_night(tracker: Tracker, store: ResultStore, sweep_id: str, parent_run: str, dataset_fingerprint: str) -> int:
    """Make every finished config of ``sweep_id`` in DuckDB a child of ``parent_run``; returns how many reused
    configs were logged now.

    A finished config without a child under this sweep whose stored MLflow run belongs to another sweep was reused:
    its child gets the stored means (``config_metrics``), chunk statistics, counts and ``config.json``, and the tags
    :data:`COMPUTED_IN` and :data:`COMPUTED_RUN`. A config with no MLflow run at all waits for ``sync-mlflow``
    (which logs it in full). Children this sweep computed get :data:`COMPUTED_IN` = ``sweep_id``. Idempotent."""
    children = sweep_children(tracker, sweep_id)
    for cid, run in children.items():
        if COMPUTED_IN not in run.data.tags:
            tracker.client.set_tag(run.info.run_id, COMPUTED_IN, sweep_id)
    board = store.leaderboard(sweep_id)
    stored = store.stored_config_metrics(sweep_id)
    logged = 0
    for row in board.iter_rows(named=True):
        cid, origin_run = row["config_id"], row["mlflow_run_id"]
        if row["status"] != "finished" or cid in children or origin_run is None:
            continue
        try:
            computed_in, computed_run = _origin(tracker, origin_run)
        except Exception:  # the earlier run is gone (another tracking store): the sweep is all we know
            computed_in, computed_run = None, origin_run
        if computed_in == sweep_id:  # this sweep's own run under another parent: left as it is
            continue
        metrics, n_queries, n_unlabelled = stored.get(cid, ({}, 0, 0))
        metrics = {**metrics, "n_queries": n_queries, "n_unlabelled": n_unlabelled,
                   "retrieval_ms_per_query": row["retrieval_ms_per_query"] or 0.0,
                   **evidence_metric(row["n_without_evidence"])}
        run = ConfigRun(parent_run, sweep_id, cid, row["name"], json.loads(row["spec_json"] or "{}"),
                        dataset_fingerprint)
        tracker.log_config(run, {k: v for k, v in metrics.items() if v is not None}, {},
                           extra_tags={COMPUTED_IN: computed_in or "unknown", COMPUTED_RUN: computed_run,
                                       "ragbench.reused": "true"}, known_new=True)  # not among ``children``
        logged += 1
    if logged:
        log.info("MLflow: %d reused config(s) logged under sweep %s's run (not recomputed)", logged, sweep_id)
    return logged
