"""The schema of the results file: every table's DDL, the columns added since, and the migration of old files.

The tables (``sweeps``, ``configs``, the per-config tables of :data:`PER_CONFIG_TABLES`, ``k_sweep``,
``screening`` and ``promotions``) are created, and old files migrated, by the first connection of a
:class:`ragbench.results.store.ResultStore` that may write (:meth:`~ragbench.results.store_connection.StoreConnection.
connect`). ``CREATE TABLE IF NOT EXISTS`` leaves an old table alone, so a column added later comes with an
``ALTER TABLE ... ADD COLUMN IF NOT EXISTS`` line; measures once stored as ``ndcg@10`` are rewritten to their keys
(:data:`MEASURE_KEY_MIGRATION`).
"""

from __future__ import annotations

from ragbench.core.measure_keys import SPELLINGS

SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id VARCHAR PRIMARY KEY, name VARCHAR, spec_hash VARCHAR, spec_json VARCHAR, dataset_name VARCHAR,
    dataset_fingerprint VARCHAR, status VARCHAR, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
    mlflow_run_id VARCHAR, experiment VARCHAR);
CREATE TABLE IF NOT EXISTS configs (
    sweep_id VARCHAR, config_id VARCHAR, name VARCHAR, spec_json VARCHAR, dataset_fingerprint VARCHAR,
    status VARCHAR, error VARCHAR, n_queries INTEGER, n_unlabelled INTEGER, retrieval_ms_per_query DOUBLE,
    mlflow_run_id VARCHAR, finished_at TIMESTAMPTZ, PRIMARY KEY (sweep_id, config_id));
CREATE TABLE IF NOT EXISTS config_metrics (
    sweep_id VARCHAR, config_id VARCHAR, measure VARCHAR, mean DOUBLE, n INTEGER, n_unlabelled INTEGER);
CREATE TABLE IF NOT EXISTS query_metrics (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, query_class VARCHAR, measure VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS chunk_stats (
    sweep_id VARCHAR, config_id VARCHAR, stat VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS query_diagnostics (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, first_relevant_rank INTEGER, category VARCHAR);
CREATE TABLE IF NOT EXISTS ann_fidelity (
    sweep_id VARCHAR, config_id VARCHAR, hnsw_ef INTEGER, configured BOOLEAN, k INTEGER, depth INTEGER,
    recall_vs_exact DOUBLE, ms_per_query_ann DOUBLE, ms_per_query_exact DOUBLE);
CREATE TABLE IF NOT EXISTS answers (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, query_class VARCHAR, answerable BOOLEAN,
    n_chunks INTEGER, chunk_ids VARCHAR[], context_tokens INTEGER, prompt_tokens INTEGER, answer VARCHAR,
    em DOUBLE, f1 DOUBLE, contains DOUBLE, insufficient BOOLEAN, correct BOOLEAN, answer_in_context DOUBLE,
    cached BOOLEAN, seconds DOUBLE, b_answer VARCHAR, b_correct BOOLEAN, gold_in_context BOOLEAN,
    gold_in_pool BOOLEAN, verdict VARCHAR);
CREATE TABLE IF NOT EXISTS k_sweep (
    sweep_id VARCHAR, config_id VARCHAR, k INTEGER, n_queries INTEGER, accuracy DOUBLE, em DOUBLE, f1 DOUBLE,
    contains DOUBLE, answer_in_context DOUBLE, insufficient_rate DOUBLE, mean_chunks DOUBLE,
    mean_context_tokens DOUBLE, recall DOUBLE, recall_measure VARCHAR);
CREATE TABLE IF NOT EXISTS rankings (
    sweep_id VARCHAR, config_id VARCHAR, query_id VARCHAR, rank INTEGER, chunk_id VARCHAR, doc_id VARCHAR,
    score DOUBLE);
CREATE TABLE IF NOT EXISTS promotions (
    promoted_at TIMESTAMPTZ, sweep_id VARCHAR, config_id VARCHAR, name VARCHAR, spec_json VARCHAR,
    dataset_fingerprint VARCHAR, primary_measure VARCHAR, primary_value DOUBLE, p_value DOUBLE, forced BOOLEAN,
    reason VARCHAR, who VARCHAR, mlflow_model_version VARCHAR, collection VARCHAR, active BOOLEAN,
    rolled_back_at TIMESTAMPTZ, model_name VARCHAR, evidence VARCHAR);
CREATE TABLE IF NOT EXISTS assessor_agreement (
    measured_at TIMESTAMPTZ, model VARCHAR, prompt_version INTEGER, dataset_name VARCHAR, dataset_fingerprint VARCHAR,
    n INTEGER, n_relevant INTEGER, kappa DOUBLE, confusion VARCHAR, relevant_table VARCHAR,
    seconds_per_pair DOUBLE, seed INTEGER, note VARCHAR);
CREATE TABLE IF NOT EXISTS queries (
    dataset_fingerprint VARCHAR, query_id VARCHAR, text VARCHAR, query_class VARCHAR,
    PRIMARY KEY (dataset_fingerprint, query_id));
CREATE TABLE IF NOT EXISTS screening (
    sweep_id VARCHAR, chunker VARCHAR, model VARCHAR, mean DOUBLE, delta DOUBLE, p DOUBLE, p_holm DOUBLE,
    kept BOOLEAN, leader BOOLEAN, n_docs BIGINT, n_chunks BIGINT, n_queries BIGINT, alpha DOUBLE);
-- the value migrations this file has had (ragbench.results.store_migrations), each once
CREATE TABLE IF NOT EXISTS migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMPTZ);
-- files written before a column existed get it here (CREATE TABLE IF NOT EXISTS leaves old tables alone)
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS experiment VARCHAR;
ALTER TABLE sweeps ADD COLUMN IF NOT EXISTS dataset_notes VARCHAR;
ALTER TABLE configs ADD COLUMN IF NOT EXISTS eval_key VARCHAR;
ALTER TABLE configs ADD COLUMN IF NOT EXISTS reused_from VARCHAR;
-- the rank-measure versions a config's results were computed with (JSON; NULL: before versions, all 1)
ALTER TABLE configs ADD COLUMN IF NOT EXISTS measure_versions VARCHAR;
ALTER TABLE configs ADD COLUMN IF NOT EXISTS n_without_evidence INTEGER;
ALTER TABLE answers ADD COLUMN IF NOT EXISTS budget_cut INTEGER;
ALTER TABLE answers ADD COLUMN IF NOT EXISTS budget_dropped INTEGER;
ALTER TABLE answers ADD COLUMN IF NOT EXISTS gold_lost_to_budget BOOLEAN;
ALTER TABLE screening ADD COLUMN IF NOT EXISTS margin DOUBLE;
ALTER TABLE screening ADD COLUMN IF NOT EXISTS full_embed_cost DOUBLE;
ALTER TABLE screening ADD COLUMN IF NOT EXISTS cost_unit VARCHAR;
-- the screen's test: 'less' (one-sided); NULL: written before it, two-sided
ALTER TABLE screening ADD COLUMN IF NOT EXISTS alternative VARCHAR;
"""

def _key_sql(column: str) -> str:
    """:func:`ragbench.core.measure_keys.measure_key` in SQL."""
    for written, stored in SPELLINGS:
        column = f"replace({column}, '{written}', '{stored}')"
    return column


#: files written before measure keys (``ndcg@10`` stored as such) are rewritten to keys when opened
MEASURE_KEY_MIGRATION = "\n".join(
    f"UPDATE {table} SET {col} = {_key_sql(col)} WHERE "
    + " OR ".join(f"contains({col}, '{written}')" for written, _ in SPELLINGS) + ";"
    for table, col in (("config_metrics", "measure"), ("query_metrics", "measure"),
                       ("promotions", "primary_measure")))

PER_CONFIG_TABLES = ("config_metrics", "query_metrics", "rankings", "chunk_stats", "query_diagnostics",
                     "ann_fidelity", "answers")
