"""Screening before the full embed (``search: {strategy: screen}``) on the demo.

The grid has one chunker and two dense models: MiniLM, and a deliberately crippled copy of it that reads only the
first few tokens of each chunk (``max_seq_length: 6``, its own vector space). On the pooled sub-corpus the crippled
pair is significantly worse than the leader (paired test, Holm), so it is screened out: its dense config is
recorded ``screened_out`` (DuckDB, MLflow: a KILLED run, the --json lines, the outcome), the sweep exits 0 and encodes fewer passages than
the same sweep without the screen, and the kept configs' stored per-query values equal the unscreened sweep's."""

from __future__ import annotations

import json

from conftest import ROOT, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.evaluation.cost import COST_MEASURES
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = f"""name: screened
dataset: {{name: nimbus-demo, path: {ROOT / 'datasets' / 'demo'}, split: test, queries: all}}
chunkers: [{{kind: markdown, prefix: breadcrumb, max_tokens: 256}}]
embedders: [{{model: all-MiniLM-L6-v2}}, {{model: all-MiniLM-L6-v2, max_seq_length: 6, name: minilm-first-4-tokens}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
search: {{strategy: screen, depth: 1}}
"""


def _values(store: ResultStore, sweep_id: str, config_id: str):
    rows = store.query_metrics(sweep_id, config_id)
    rows = rows.filter(~rows["measure"].is_in(list(COST_MEASURES)))
    return sorted((q, m, None if v != v else v) for q, m, v in rows.select("query_id", "measure", "value").iter_rows())


def test_a_screened_sweep_skips_the_bad_pair_and_keeps_the_values_of_the_rest(tmp_path, settings, ragbench_log):
    cfg = load_config(write_config(tmp_path / "s.yaml", SWEEP))
    path = write_config(tmp_path / "logged.yaml", SWEEP.replace("mlflow: false", "mlflow: true"))  # the CLI logs
    plain = load_config(write_config(tmp_path / "p.yaml", SWEEP.replace("strategy: screen", "strategy: grid")))
    assert cfg.canonical() == plain.canonical()  # the search strategy is not part of what a sweep measures
    screened_home, plain_home = tmp_path / "screened", tmp_path / "plain"
    res = CliRunner().invoke(app, ["sweep", str(path), "--orchestrator", "local", "--json", "--home",
                                   str(screened_home), "--no-report"])
    assert res.exit_code == 0, res.output
    # a fresh home has no calibration: the pairs are priced at the rates the screen measured on its pool
    assert any(m.startswith("screen: each pair's full embed priced in seconds: ") for m in ragbench_log), ragbench_log
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    status = {r["config_id"]: r["status"] for r in rows}
    bad = next(c for c in cfg.expand() if c.embedder is not None and c.embedder.max_seq_length)
    assert status[bad.config_id] == "screened_out"
    assert {s for c, s in status.items() if c != bad.config_id} == {"finished"}  # BM25 and the leader run
    error = next(r["error"] for r in rows if r["config_id"] == bad.config_id)
    assert error.startswith("not run: screened out (Δ -") and "Holm p" in error and "all-MiniLM-L6-v2" in error
    store = ResultStore(screened_home / "results.duckdb")
    sweep_id = store.sweeps()["sweep_id"].to_list()[-1]
    stored = dict(store.query("SELECT config_id, status FROM configs WHERE sweep_id = ?", [sweep_id]).iter_rows())
    assert stored == status
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{screened_home / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.`ragbench.status` = 'screened_out'")
    assert [(r.info.status, r.data.tags.get("ragbench.config_id")) for r in runs] == [("KILLED", bad.config_id)]
    # the report: the screened-out config last, NOT RUN with the screen's evidence (said once), and the section
    report = CliRunner().invoke(app, ["report", sweep_id, "--home", str(screened_home)], env={"COLUMNS": "400"})
    assert report.exit_code == 0, report.output
    assert "NOT RUN: screened out (Δ -" in report.output and "not run: screened out" not in report.output
    assert "Screening" in report.output
    # the plan of the screened sweep on a cold home: the pool per pair, priced, then the rest of each pair
    again = tmp_path / "screened-again"
    planned = CliRunner().invoke(app, ["plan", str(path), "--json", "--home", str(again)])
    assert planned.exit_code == 0, planned.output
    plan = json.loads(next(line for line in planned.stdout.splitlines() if line.startswith("{")))
    # the same sweep in full, in its own home: more passages encoded, the same values for every config kept
    screened = run_sweep(cfg, settings.with_home(again))
    full = run_sweep(plain, settings.with_home(plain_home))
    assert screened.n_failed == 0 and {o.status for o in full.outcomes} == {"finished"}
    assert [o.status for o in screened.outcomes if o.config_id == bad.config_id] == ["screened_out"]
    assert 0 < screened.vectors_computed < full.vectors_computed
    # what the plan said: every pair's pooled texts, then the kept pair's remaining texts, then the queries
    rows = plan["rows"]
    assert {r["what"].rsplit(" x ", 1)[1] for r in rows if r["stage"] == "screen"} == {"all-MiniLM-L6-v2",
                                                                                        "minilm-first-4-tokens"}
    kept_texts = sum(r["count"] for r in rows if r["stage"] == "screen" or r["stage"] == "embed"
                     and (r["what"].endswith(" x all-MiniLM-L6-v2") or r["what"].startswith("queries x ")))
    assert screened.vectors_computed == kept_texts
    assert plan["texts_to_embed"] == full.vectors_computed  # the screen moves texts between rows, adds none
    screen_row = ResultStore(again / "results.duckdb").query("SELECT DISTINCT n_docs, cost_unit FROM screening").rows()
    assert screen_row == [(plan["screen"]["pool_documents"], "seconds")]  # each pair's full embed priced in seconds
    assert plan["screen"]["floor_seconds"] < plan["total_seconds"]
    ref = ResultStore(plain_home / "results.duckdb")
    for c in cfg.expand():
        if c.config_id != bad.config_id:
            assert _values(store, sweep_id, c.config_id) == _values(ref, full.sweep_id, c.config_id), c.name


def test_a_resumed_screened_sweep_decides_on_the_prices_its_first_screen_stored(tmp_path, ragbench_log):
    """Killed after its screen and its full embeds, the sweep resumes: its screen is computed again on the cached
    pool (no encoding left to time: priced anew, its finished embed would cost nothing and the rest the stored
    calibration's rate) and decides on the prices the first run stored. The kill is the state it leaves: the
    screen's rows stored, the dense configs not finished, the sweep's row still ``running``."""
    path = write_config(tmp_path / "m.yaml", SWEEP.replace("depth: 1}", "depth: 1, margin: 0.02}"))
    cfg, home = load_config(path), tmp_path / "home"
    first = CliRunner().invoke(app, ["sweep", str(path), "--orchestrator", "local", "--home", str(home),
                                     "--no-report"])
    assert first.exit_code == 0, first.output
    store = ResultStore(home / "results.duckdb")
    sweep_id = store.sweeps()["sweep_id"].to_list()[-1]
    stored = store.screening(sweep_id)
    assert stored["cost_unit"].to_list() == ["seconds"] * 2 and stored["full_embed_cost"].null_count() == 0
    priced = [m for m in ragbench_log if m.startswith("screen: each pair's full embed priced in")]
    assert priced and "first screen" not in priced[-1]
    import duckdb

    fingerprint = store.sweep(sweep_id)["dataset_fingerprint"]
    for c in cfg.expand():  # as a kill -9 after the full embeds leaves it: the dense configs not finished
        if c.embedder is not None:
            store.write_config_failure(sweep_id, c.config_id, c.name, c.spec(), fingerprint, "killed")
    with duckdb.connect(str(home / "results.duckdb")) as con:
        con.execute("UPDATE sweeps SET status = 'running' WHERE sweep_id = ?", [sweep_id])
    again = CliRunner().invoke(app, ["sweep", str(path), "--orchestrator", "local", "--home", str(home),
                                     "--no-report"])
    assert again.exit_code == 0, again.output
    assert store.sweeps()["sweep_id"].to_list()[-1] == sweep_id  # the same sweep, resumed
    priced = [m for m in ragbench_log if m.startswith("screen: each pair's full embed priced in")]
    assert priced[-1].startswith("screen: each pair's full embed priced in seconds (as this sweep's first screen "
                                 "priced it): "), priced[-1]
    assert store.screening(sweep_id)["full_embed_cost"].to_list() == stored["full_embed_cost"].to_list()
