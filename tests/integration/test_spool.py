"""A busy results.duckdb never blocks a sweep: finished configs wait in the spool (checksummed, written atomically)
and are merged — by the sweep when the file frees, by the next sweep, or by ``doctor --repair`` — into exactly the
rows a direct record writes, with nothing lost and nothing doubled."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
from conftest import DEMO, ROOT, clean_env, write_config

from ragbench.core.errors import StoreBusyError
from ragbench.results.doctor import examine
from ragbench.results.outcomes import ConfigResult, config_level
from ragbench.results.record import record
from ragbench.results.spool import Spool
from ragbench.results.store import ResultStore
from ragbench.results.store_schema import PER_CONFIG_TABLES

SWEEP = f"""name: spooled
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 64}}, {{kind: recursive, size: 48}}, {{kind: recursive, size: 32}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
output: {{mlflow: MLFLOW}}
"""
N_CONFIGS = 4

#: holds results.duckdb open (read-only as a notebook does, or for writing: argv[3]) until the file argv[2] exists
HOLDER = """
import sys, time
from pathlib import Path
import duckdb
con = duckdb.connect(sys.argv[1], read_only=sys.argv[3] == "read-only")
print("held", flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.05)
con.close()
"""

#: the columns that differ between two runs by construction (ids, clocks, measured timings); measures of
#: wall-clock time (latency_p50_ms, ...) are left out of the comparison too
VOLATILE = {"sweep_id", "finished_at", "mlflow_run_id", "reused_from", "retrieval_ms_per_query"}


def _rows(db: Path, sweep_id: str | None = None) -> dict[str, list[tuple]]:
    """Every per-config table and ``configs`` of one sweep (the only one when None), volatile columns left out,
    sorted."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        sweep_id = sweep_id or con.execute("SELECT sweep_id FROM sweeps").fetchall()[0][0]
        out = {}
        for table in (*PER_CONFIG_TABLES, "configs"):
            cols = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall() if r[0] not in VOLATILE]
            timed = " AND NOT regexp_matches(measure, '(latency|_ms)')" if "measure" in cols else ""
            rows = con.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE sweep_id = ?{timed} ORDER BY ALL",
                               [sweep_id]).fetchall()
            out[table] = [tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rows]
        return out
    finally:
        con.close()


def _sweep_args(cfg: Path, home: Path) -> list[str]:
    return [sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local", "--home", str(home),
            "--no-report"]


def _hold(db: Path, release: Path, mode: str = "read-only") -> subprocess.Popen:
    ResultStore(db)  # the file and its tables exist, as they do when a notebook opens them
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(release), mode], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def _flat(text: str) -> str:
    return " ".join(text.split())  # log lines wrap at the terminal's width


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory) -> dict[str, list[tuple]]:
    """The rows of the same sweep recorded directly, in a home nobody else holds."""
    tmp = tmp_path_factory.mktemp("clean")
    cfg = write_config(tmp / "s.yaml", SWEEP.replace("MLFLOW", "false"))
    proc = subprocess.run(_sweep_args(cfg, tmp / "home"), cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = _rows(tmp / "home" / "results.duckdb")
    assert len(rows["configs"]) == N_CONFIGS and all(rows[t] for t in ("config_metrics", "rankings"))
    return rows


def test_a_reader_holding_the_file_spools_results_then_they_are_merged_when_it_frees(tmp_path, clean_run):
    home, release = tmp_path / "home", tmp_path / "release"
    cfg = write_config(tmp_path / "s.yaml", SWEEP.replace("MLFLOW", "true"))
    holder = _hold(home / "results.duckdb", release)
    sweep = subprocess.Popen(_sweep_args(cfg, home), cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             text=True, env=clean_env(RAGBENCH_RESULTS_BUSY_WAIT="0.5",
                                                      RAGBENCH_RESULTS_FINAL_WAIT="60", COLUMNS="1000"))
    lines = []
    for line in sweep.stderr:  # let go once the first result went to the spool: the rest follows the merge
        lines.append(line)
        if "are kept in spool/" in _flat("".join(lines)):
            release.touch()
            break
    lines += sweep.stderr.readlines()
    assert sweep.wait(timeout=600) == 0, "".join(lines)[-3000:]
    holder.wait(timeout=30)
    log = _flat("".join(lines))
    assert f"results.duckdb is held by pid {holder.pid} (" in log
    assert "results of config" in log and "they are merged when it frees" in log
    assert "merged" in log and "spooled result(s)" in log
    # every config evaluated once, none lost, and the rows are those of a direct record
    assert log.count(": ndcg_at_10 = ") == N_CONFIGS
    assert _rows(home / "results.duckdb") == clean_run
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        status = con.execute("SELECT status, mlflow_run_id IS NOT NULL FROM sweeps").fetchall()
        mlflow_runs = con.execute("SELECT count(mlflow_run_id) FROM configs").fetchall()[0][0]
    finally:
        con.close()
    assert status == [("finished", True)]
    assert mlflow_runs == N_CONFIGS  # merged into DuckDB first, then logged to MLflow
    assert Spool(home).count() == 0 and not Spool(home).sweep_ids()


@pytest.mark.parametrize("mode", ["read-only", "read-write"])
def test_held_past_the_end_fails_with_results_safe_then_a_plain_rerun_merges_them(tmp_path, clean_run, mode):
    home, release = tmp_path / "home", tmp_path / "release"
    cfg = write_config(tmp_path / "s.yaml", SWEEP.replace("MLFLOW", "false"))
    holder = _hold(home / "results.duckdb", release, mode)
    env = clean_env(RAGBENCH_RESULTS_BUSY_WAIT="0.5", RAGBENCH_RESULTS_FINAL_WAIT="1", COLUMNS="1000")
    first = subprocess.run(_sweep_args(cfg, home), cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    release.touch()
    holder.wait(timeout=30)
    out = _flat(first.stdout + first.stderr)
    assert first.returncode == 1, out[-3000:]
    assert "waiting up to 1 s for pid" in out
    assert f"results.duckdb is still held by pid {holder.pid}" in out and "are safe in" in out
    assert "`ragbench sweep`" in out and "`ragbench doctor --repair` merges them" in out
    assert "Traceback" not in out
    # a writer shuts readers out too: the sweep then reads nothing and evaluates everything
    assert ("earlier results cannot be read" in out) == (mode == "read-write")
    assert out.count(": ndcg_at_10 = ") == N_CONFIGS
    spool = Spool(home)
    [sweep_id] = spool.sweep_ids()
    assert len(spool.entries(sweep_id)) == N_CONFIGS and spool.state(sweep_id)["status"] == "finished"
    assert _rows(home / "results.duckdb", sweep_id)["configs"] == []  # nothing reached DuckDB yet

    rerun = subprocess.run(_sweep_args(cfg, home), cwd=ROOT, env=clean_env(COLUMNS="1000"), capture_output=True,
                           text=True, timeout=600)
    log = _flat(rerun.stderr)
    assert rerun.returncode == 0, log[-3000:]
    assert f"merged {N_CONFIGS} spooled result(s) of sweep {sweep_id}" in log
    assert log.count(f"reused the results of sweep {sweep_id}") == N_CONFIGS
    assert ": ndcg_at_10 = " not in log  # nothing evaluated again
    assert _rows(home / "results.duckdb", sweep_id) == clean_run
    assert spool.sweep_ids() == []


# ------------------------------------------------------------------------- in process: format, damage, interruption

def _full_result(config_id: str = "c1") -> ConfigResult:
    """A ConfigResult with every part filled, nulls, NaN and non-ASCII text included."""
    per_query = pl.DataFrame({"query_id": ["q1", "q2", "q1"], "query_class": ["how", None, "how"],
                              "measure": ["ndcg_at_10", "ndcg_at_10", "recall_at_10"],
                              "value": [0.5, math.nan, 1.0 / 3]})
    measures = pl.concat([per_query, config_level({"reach_hit_at_10_of_50": 0.25})])
    rankings = pl.DataFrame({"query_id": ["q1", "q1", "q2"], "rank": [1, 2, 1], "chunk_id": ["a#0", "b#1", "a#0"],
                             "doc_id": ["a", "b", "a"], "score": [2.5, 1.25, 0.1]},
                            schema={"query_id": pl.String, "rank": pl.Int32, "chunk_id": pl.String,
                                    "doc_id": pl.String, "score": pl.Float64})
    diagnostics = pl.DataFrame({"query_id": ["q1", "q2"], "first_relevant_rank": [1, None],
                                "category": ["hit", "never retrieved"]})
    ann = pl.DataFrame({"hnsw_ef": [16, 64], "configured": [False, True], "k": [10, 10], "depth": [50, 50],
                        "recall_vs_exact": [0.9, 1.0], "ms_per_query_ann": [0.2, 0.4],
                        "ms_per_query_exact": [1.5, 1.5]})
    answers = pl.DataFrame({"query_id": ["q1", "q2"], "query_class": ["how", None], "answerable": [True, False],
                            "n_chunks": [2, 0], "chunk_ids": [["a#0", "b#1"], []], "answer": ["Zürich — 42", None],
                            "em": [1.0, 0.0], "correct": [True, None], "verdict": ["ok", None]})
    return ConfigResult(config_id, "whole | bm25", {"chunker": {"kind": "whole"}, "retriever": {"k1": 1.2}}, "fp1",
                        measures, rankings, n_queries=3, n_unlabelled=1, ms_per_query=0.123456789,
                        chunk_stats={"mean_tokens": 12.5, "chunks": 3.0}, diagnostics=diagnostics, ann=ann,
                        answers=answers, artifacts={"extra.parquet": pl.DataFrame({"x": [1, 2]})}, eval_key="ek1")


def _begin(store: ResultStore, sweep_id: str) -> None:
    store.begin_sweep(sweep_id, "s", "h", {"name": "s"}, "demo", "fp1")


def test_a_spooled_result_merges_into_the_rows_of_a_direct_record(tmp_path):
    result = _full_result()
    direct = ResultStore(tmp_path / "direct.duckdb")
    _begin(direct, "s1")
    record(result, "s1", direct, None, None)

    spool = Spool(tmp_path / "home")
    entry = spool.put_result("s1", result)
    assert (entry / "manifest.json").is_file() and not list(entry.parent.glob(".tmp-*"))
    kind, fields, tables = spool.load(spool.entries("s1")[0])
    back = spool.config_result(fields, tables)
    for f in ("measures", "rankings", "diagnostics", "ann", "answers"):
        assert getattr(back, f).equals(getattr(result, f), null_equal=True), f
        assert getattr(back, f).schema == getattr(result, f).schema, f
    assert back.artifacts.keys() == result.artifacts.keys() and back.artifacts["extra.parquet"].equals(
        result.artifacts["extra.parquet"])
    assert (back.spec, back.chunk_stats, back.ms_per_query, back.eval_key, back.n_queries, back.n_unlabelled) == (
        result.spec, result.chunk_stats, result.ms_per_query, result.eval_key, result.n_queries, result.n_unlabelled)

    merged = ResultStore(tmp_path / "home" / "results.duckdb")
    _begin(merged, "s1")
    assert spool.merge(merged, "s1") == 1
    assert _rows(merged.path, "s1") == _rows(direct.path, "s1")
    assert all(_rows(merged.path, "s1")[t] for t in PER_CONFIG_TABLES)
    assert spool.sweep_ids() == []


def test_an_interrupted_merge_leaves_the_entry_and_a_repeated_one_doubles_nothing(tmp_path):
    home = tmp_path / "home"
    db, release = home / "results.duckdb", tmp_path / "release"
    store = ResultStore(db)
    _begin(store, "s1")
    spool = Spool(home)
    spool.put_result("s1", _full_result())
    holder = _hold(db, release)
    try:
        with pytest.raises(StoreBusyError) as busy:
            spool.merge(store.with_wait(0), "s1")
    finally:
        release.touch()
        holder.wait(timeout=30)
    assert f"pid {holder.pid}" in busy.value.holder
    [entry] = spool.entries("s1")  # the commit failed: the entry stays, whole
    spool.load(entry)
    # killed after the commit, before the entry was deleted: merging it again replaces, never doubles
    kept = tmp_path / "kept"
    shutil.copytree(entry.path, kept)
    assert spool.merge(store, "s1") == 1
    once = _rows(db, "s1")
    shutil.copytree(kept, entry.path)
    (entry.path.parent / ".tmp-c1-killed").mkdir()  # a write killed half-way: incomplete, never merged
    assert spool.merge(store, "s1") == 1
    assert _rows(db, "s1") == once and len(once["configs"]) == 1
    assert spool.sweep_ids() == [] and not (home / "spool" / "s1").exists()


def test_a_damaged_spool_entry_is_quarantined_and_the_good_ones_merged_by_doctor(tmp_path, settings, ragbench_log):
    home = Path(settings.home)
    store = ResultStore(home / "results.duckdb")
    _begin(store, "s1")
    spool = Spool(home)
    spool.put_result("s1", _full_result("good"))
    bad = spool.put_result("s1", _full_result("bad"))
    manifest = json.loads((bad / "manifest.json").read_text())
    measures_file = bad / manifest["body"]["tables"]["measures"]["file"]
    # valid Parquet with other values: only the checksum can tell
    pl.read_parquet(measures_file).with_columns(pl.col("value") * 0.5).write_parquet(measures_file)

    checked = examine(settings)
    problems = [f.problem for f in checked.findings]
    assert any("damaged spooled result" in p and "checksum mismatch" in p for p in problems), problems
    assert any("2 result(s) wait in the spool" in p for p in problems) and not checked.healthy

    repaired = examine(settings, repair=True)
    assert repaired.healthy, repaired.findings
    assert [f.action for f in repaired.findings if f.component == "results"] == [
        "quarantined; the next sweep evaluates that config again"]
    assert any("is damaged" in m and "not merged" in m for m in ragbench_log)
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        finished = con.execute("SELECT config_id FROM configs WHERE sweep_id = 's1'").fetchall()
    finally:
        con.close()
    assert finished == [("good",)]  # the damaged one is not merged: a later sweep evaluates it again
    assert spool.sweep_ids() == [] and len(list((home / "spool" / ".quarantine" / "s1").iterdir())) == 1


def test_the_waits_come_from_the_environment():
    from ragbench.core.settings import Settings

    s = Settings.from_env({"RAGBENCH_RESULTS_BUSY_WAIT": "0.5", "RAGBENCH_RESULTS_FINAL_WAIT": "7"})
    assert (s.results_busy_wait_s, s.results_final_wait_s) == (0.5, 7.0)
