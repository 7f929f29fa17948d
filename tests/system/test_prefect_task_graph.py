"""The sweep as a graph of Prefect tasks: real dependency edges, independent branches at once, and the same
per-query numbers as the plain-Python runner.

One Prefect flow run (ephemeral server, in a subprocess that reads its own task runs back through the Prefect API
before it exits) of a slice of configs/demo.yaml: two chunkers × the fast static embedder × BM25 / dense / hybrid,
plus an embedder whose weights are broken (its configs must fail with the cause, the others must not notice).
The same sweep then runs here with the plain-Python runner on the same home (vectors cached) and must store
identical per-query metrics.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys

from conftest import DEMO, ROOT, clean_env, price_model_high, write_config

from ragbench.config import load_config
from ragbench.core.settings import Settings
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

#: runs the flow, then reads the flow run's task runs through the Prefect API while the ephemeral server is up
PROBE = """
import json, sys
from flows.sweep import sweep_flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

state = sweep_flow(sys.argv[1], home=sys.argv[2], publish=False, return_state=True)
result = state.result()
with get_client(sync_client=True) as client:
    run = client.read_flow_run(state.state_details.flow_run_id)
    tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])), limit=200)
print("GRAPH " + json.dumps({"sweep_id": result.sweep_id, "flow_state": run.state.type.value, "tasks": [
    {"id": str(t.id), "name": t.name, "state": t.state.type.value, "state_name": t.state.name,
     "start": t.start_time.timestamp() if t.start_time else None,
     "end": t.end_time.timestamp() if t.end_time else None,
     "upstream": sorted({str(i.id) for inputs in t.task_inputs.values() for i in inputs
                         if getattr(i, "input_type", None) == "task_run"})} for t in tasks]}))
"""


def _closure(task: dict, by_id: dict[str, dict]) -> set[str]:
    """Names of every task upstream of ``task``, directly or through other tasks."""
    seen: set[str] = set()
    todo = list(task["upstream"])
    while todo:
        tid = todo.pop()
        if tid in seen or tid not in by_id:
            continue
        seen.add(tid)
        todo += by_id[tid]["upstream"]
    return {by_id[t]["name"] for t in seen}


def test_prefect_sweep_is_a_graph_with_edges_and_overlap_and_matches_the_local_runner(tmp_path):
    broken = tmp_path / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    cfg_path = write_config(tmp_path / "graph.yaml", f"""name: graph
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
embedders: [{{model: static-retrieval-m2v}}, {{model: {broken}}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}, {{kind: hybrid, fusion: rrf}}]
metrics: {{cutoffs: [1, 5, 10]}}
output: {{mlflow: false}}
""")
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(cfg_path), str(home)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=clean_env(RAGBENCH_HOME=str(home)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    graph = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("GRAPH "))[6:])
    assert graph["flow_state"] == "COMPLETED"
    tasks = graph["tasks"]
    by_id = {t["id"]: t for t in tasks}
    by_name = {t["name"]: t for t in tasks}
    assert len(by_name) == len(tasks)  # every task says what it does: no two alike

    for chunker in ("whole document", "recursive 128 tok, overlap 0"):
        bm25 = by_name[f"evaluate {chunker} | BM25"]
        assert bm25["state"] == "COMPLETED"
        # a BM25 config waits for its chunks only: no embedding, no index upstream
        assert _closure(bm25, by_id) == {f"chunk {chunker}", "load-dataset"}
        for retriever in ("dense exact", "hybrid RRF"):
            dense = by_name[f"evaluate {chunker} | static-retrieval-m2v | {retriever}"]
            upstream = _closure(dense, by_id)
            assert {f"chunk {chunker}", f"embed {chunker} × static-retrieval-m2v",
                    f"index {chunker} × static-retrieval-m2v", "embed queries × static-retrieval-m2v",
                    "load-dataset"} <= upstream, upstream
            assert not any("broken" in name or "bm25" in name.lower() for name in upstream)  # other branches
            record = by_name[f"record {chunker} | static-retrieval-m2v | {retriever}"]
            assert dense["id"] in record["upstream"] and record["state"] == "COMPLETED"
        assert by_name[f"embed {chunker} × broken-model"]["state"] == "FAILED"
        index = by_name[f"index {chunker} × static-retrieval-m2v"]
        assert index["state"] == "COMPLETED"
        assert by_name[f"embed {chunker} × static-retrieval-m2v"]["id"] in index["upstream"]

    # the broken model's branch stops at its embedding: its index, evaluate and record tasks never ran (Prefect
    # leaves those given a failed future unnamed: a task run's name is rendered only once its inputs resolve)
    not_ready = sorted(re.split(r"[ -]", t["name"], maxsplit=1)[0] for t in tasks if t["state_name"] == "NotReady")
    assert not_ready == ["evaluate"] * 4 + ["index"] * 2 + ["record"] * 4
    failed = sorted(t["name"] for t in tasks if t["state"] == "FAILED")
    assert failed == ["embed queries × broken-model", "embed recursive 128 tok, overlap 0 × broken-model",
                      "embed whole document × broken-model"]
    assert sum(t["state"] == "COMPLETED" for t in tasks) == len(tasks) - len(not_ready) - len(failed) == 20

    # independent branches at once: two tasks running at the same time, among those that hold no slot or lock (an
    # embedding waiting for the model slot, or a record for the store, counts as running in Prefect)
    free = [t for t in tasks if t["start"] is not None and t["end"] is not None
            and t["name"].split(" ", 1)[0] in ("chunk", "index", "evaluate")]
    overlapping = [(a["name"], b["name"]) for i, a in enumerate(free) for b in free[i + 1:]
                   if a["start"] < b["end"] and b["start"] < a["end"]]
    assert overlapping, "no two tasks ran at the same time"

    store = ResultStore(home / "results.duckdb")
    statuses = store.query("SELECT name, status, error FROM configs WHERE sweep_id = ?", [graph["sweep_id"]])
    failed = statuses.filter(statuses["status"] == "failed")
    assert statuses.height == 10 and failed.height == 4
    assert all("failed to load" in e and str(broken) in e for e in failed["error"])  # the cause, not "upstream"

    local = run_sweep(load_config(cfg_path), Settings(home=home), fresh=True)  # plain Python, same cached vectors
    assert local.vectors_computed == 0 and local.n_failed == 4

    def per_query(sweep_id: str) -> dict:
        rows = store.query("SELECT config_id, query_id, measure, value FROM query_metrics WHERE sweep_id = ?",
                           [sweep_id]).iter_rows()
        return {(c, q, m): v for c, q, m, v in rows}

    prefect_values, local_values = per_query(graph["sweep_id"]), per_query(local.sweep_id)
    assert len(prefect_values) > 1000 and prefect_values.keys() == local_values.keys()
    differ = [k for k, v in prefect_values.items()
              if not (v == local_values[k] or (math.isnan(v) and math.isnan(local_values[k])))]
    assert not differ, differ[:5]


def test_the_screen_runs_as_prefect_tasks_before_the_full_embed_of_the_pairs_it_keeps(tmp_path):
    """A screened sweep (MiniLM and a crippled copy of it, as in tests/integration/test_screening.py) under the
    Prefect flow: the pool and the screen are task runs, the kept pair's full embedding starts after the screen
    ends, the screened-out pair has no task at all, and DuckDB holds its configs as screened_out."""
    cfg_path = write_config(tmp_path / "screened.yaml", f"""name: screened
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}, {{model: all-MiniLM-L6-v2, max_seq_length: 6, name: minilm-first-4-tokens}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
output: {{mlflow: false}}
search: {{strategy: screen, depth: 1}}
""")
    home = tmp_path / "home"
    proc = subprocess.run([sys.executable, "-c", PROBE, str(cfg_path), str(home)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=clean_env(RAGBENCH_HOME=str(home)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    graph = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("GRAPH "))[6:])
    by_name = {t["name"]: t for t in graph["tasks"]}
    pool, screen = by_name["screen pool"], by_name["screen pairs"]
    assert pool["state"] == screen["state"] == "COMPLETED" and pool["end"] <= screen["start"]
    embeds = [t for name, t in by_name.items() if name.startswith("embed whole document × ")]
    assert [t["name"] for t in embeds] == ["embed whole document × all-MiniLM-L6-v2"]  # none for the crippled pair
    assert screen["end"] <= embeds[0]["start"]
    stored = ResultStore(home / "results.duckdb").query(
        "SELECT name, status FROM configs WHERE sweep_id = ?", [graph["sweep_id"]]).rows()
    assert sorted(status for _, status in stored) == ["finished", "finished", "screened_out"]
    assert [name for name, status in stored if status == "screened_out"][0].count("minilm-first-4-tokens") == 1


def test_stages_a_budget_did_not_start_are_not_run_tasks_not_failures(tmp_path):
    """A budget under the Prefect flow (the static model priced at hours by the calibration hook): the embeddings
    it does not start, and every index, evaluate and record task after them, complete in a state named "Not run"
    — no task run Failed or NotReady, which a schedule's alerts would take for a broken sweep — while the BM25
    configs run; DuckDB holds the dense configs as over_budget, as under the plain runner."""
    cfg_path = write_config(tmp_path / "budget.yaml", f"""name: budget-graph
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
output: {{mlflow: false}}
budget: 1h
""")
    home = tmp_path / "home"
    price_model_high(home, load_config(cfg_path).embedders[0])
    proc = subprocess.run([sys.executable, "-c", PROBE, str(cfg_path), str(home)], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=clean_env(RAGBENCH_HOME=str(home)))
    assert proc.returncode == 0, proc.stderr[-4000:]
    graph = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("GRAPH "))[6:])
    assert graph["flow_state"] == "COMPLETED"
    tasks = {t["name"]: t for t in graph["tasks"]}
    assert {n: t["state_name"] for n, t in tasks.items() if t["state"] != "COMPLETED"} == {}
    not_run = sorted(n for n, t in tasks.items() if t["state_name"] == "Not run")
    chunkers = ("recursive 128 tok, overlap 0", "whole document")
    assert not_run == sorted(f"{stage} {c}{what}" for c in chunkers for stage, what in (
        ("embed", " × static-retrieval-m2v"), ("index", " × static-retrieval-m2v"),
        ("evaluate", " | static-retrieval-m2v | dense exact"), ("record", " | static-retrieval-m2v | dense exact")))
    assert all(tasks[f"{stage} {c} | BM25"]["state_name"] == "Completed" for c in chunkers
               for stage in ("evaluate", "record"))
    stored = ResultStore(home / "results.duckdb").query(
        "SELECT name, status FROM configs WHERE sweep_id = ?", [graph["sweep_id"]]).rows()
    assert sorted(status for _, status in stored) == ["finished", "finished", "over_budget", "over_budget"]
