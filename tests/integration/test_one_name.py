"""One name per config: the label people read (``whole document | BM25``) is what the sweep's output and log lines,
``report``, ``explain``, ``promote`` and ``production`` print and what MLflow names the config's run and tags it
with; the stored name (``whole | bm25(k1=1.2,b=0.75)``) shows on none of them, yet commands still accept it, the
label and the rank as input. Grep-style, through the CLI as a user runs it (subprocesses, wide terminal)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import DEMO, ROOT, clean_env, write_config
from mlflow.tracking import MlflowClient

from ragbench.config.labels import config_label
from ragbench.results.lookup import ranked_config_ids
from ragbench.results.store import ResultStore

GRID = f"""name: names
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
retrievers: [{{kind: bm25}}, {{kind: bm25, k1: 0.9, b: 0.4}}]
metrics: {{cutoffs: [1, 10]}}
ann_fidelity: {{enabled: false}}
"""


def _cli(home, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", *args, "--home", str(home)], cwd=ROOT,
                          env=clean_env(COLUMNS="250"), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (args, proc.stdout[-2000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    """A sweep of four BM25 configs, then report, explain (by label, stored name and rank), promote (by the stored
    name) and production; every output kept, with the configs' labels and stored names from DuckDB."""
    tmp = tmp_path_factory.mktemp("names")
    home = tmp / "home"
    cfg = write_config(tmp / "names.yaml", GRID)
    out = {"sweep": _cli(home, "sweep", str(cfg), "--orchestrator", "local")}
    store = ResultStore(home / "results.duckdb")
    sid = store.latest_sweep_id()
    board = store.leaderboard(sid)
    names = {c: (n, config_label(json.loads(s), n)) for c, n, s in board.select("config_id", "name", "spec_json")
             .iter_rows()}
    out["report"] = _cli(home, "report", "latest", "--out", str(tmp / "report"))
    qid = store.query_metrics(sid, board["config_id"][0])["query_id"][0]
    best = ranked_config_ids(store, sid)[0]
    stored, label = names[best]
    out["explain"] = _cli(home, "explain", "latest", label, qid)
    out["explain_stored"] = _cli(home, "explain", "latest", stored, qid)
    out["explain_rank"] = _cli(home, "explain", "latest", "1", qid)
    out["promote"] = _cli(home, "promote", "latest", stored)
    out["production"] = _cli(home, "production")
    out["production_json"] = _cli(home, "production", "--json")
    return home, sid, best, names, out


def _text(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout + proc.stderr


def test_every_surface_shows_the_label_and_never_the_stored_name(surfaces):
    _, sid, best, names, out = surfaces
    stored, label = names[best]
    assert stored != label and all(n != lb for n, lb in names.values())
    # labels can be prefixes of one another ("... | BM25", "... | BM25 k1=0.9 b=0.4"): each is matched in context
    shown = {"sweep": f"config {label}: ndcg_at_10 = ", "report": f"{label} wins on ndcg_at_10",
             "explain": f"{label}  ·  sweep {sid}", "promote": f"{label}  ({best})",
             "production": f"{label}  ({best})"}
    for surface, context in shown.items():
        text = _text(out[surface])
        assert context in text, (surface, context, text[-3000:])
        leaked = [n for n, _ in names.values() if n in text]
        assert not leaked, (surface, leaked, text[-3000:])
    sweep = _text(out["sweep"])
    for n, lb in names.values():  # each config's log line names it by its label
        assert f"config {lb}: ndcg_at_10 = " in sweep, sweep[-3000:]


def test_commands_accept_the_label_the_stored_name_and_the_rank(surfaces):
    _, sid, best, names, out = surfaces
    _, label = names[best]
    heads = {k: _text(out[k]).splitlines() for k in ("explain", "explain_stored", "explain_rank")}
    titles = {k: next(line for line in v if "  ·  sweep " in line).strip("╭─╮ ") for k, v in heads.items()}
    assert set(titles.values()) == {f"{label}  ·  sweep {sid}"}, titles  # one config, whichever way it was named
    live = json.loads(out["production_json"].stdout.strip().splitlines()[-1])
    assert live["config_id"] == best and live["label"] == label


def test_mlflow_names_and_tags_the_config_by_its_label(surfaces):
    home, sid, best, names, _ = surfaces
    stored, label = names[best]
    client = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragbench/names")
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`ragbench.sweep_id` = '{sid}'")
    children = {r.data.tags["ragbench.config_id"]: r for r in runs if r.data.tags.get("ragbench.kind") == "config"}
    parent = next(r for r in runs if r.data.tags.get("ragbench.kind") == "sweep")
    assert {c: r.info.run_name for c, r in children.items()} == {c: lb for c, (_, lb) in names.items()}
    assert parent.data.tags["ragbench.best_config"] == label and parent.data.tags["ragbench.best_config_id"] == best
    all_stored = {n for n, _ in names.values()}
    for r in [parent, *children.values()]:
        assert not [v for v in r.data.tags.values() if any(n in v for n in all_stored)], r.data.tags
    version = client.get_model_version_by_alias("ragbench-retriever", "production")
    assert version.tags["config"] == label and version.tags["config_id"] == best
