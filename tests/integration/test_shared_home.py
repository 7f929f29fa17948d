"""Two different sweeps that share a chunker and a model, started together on one fresh home: both finish every
config, both reach MLflow, and their numbers equal those of the same sweeps run one after the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import DEMO, ROOT, without_costs, write_config

SWEEP = """name: {name}
dataset: {{path: {demo}, queries: all}}
chunkers: [{{kind: recursive, size: 128}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: dense, exact: true}}, {retriever}]
metrics: {{cutoffs: [1, 10]}}
"""


def _start(cfg, home) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env.update(RAGBENCH_PROGRESS="0")
    return subprocess.Popen([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local",
                             "--json", "--home", str(home)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _metrics(out: str) -> dict[str, dict]:
    return {r["config_id"]: without_costs(r["metrics"]) for r in map(json.loads, out.splitlines())
            if r["status"] == "finished"}


def test_two_sweeps_sharing_a_collection_run_together_and_agree_with_sequential_runs(tmp_path):
    cfgs = [write_config(tmp_path / f"{n}.yaml", SWEEP.format(name=n, demo=DEMO, retriever=r))
            for n, r in [("left", "{kind: bm25}"), ("right", "{kind: hybrid}")]]
    shared = tmp_path / "shared"
    procs = [_start(c, shared) for c in cfgs]
    together = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        assert "WouldBlock" not in err and "alembic_version" not in err
        together.append(_metrics(out))
    assert [len(t) for t in together] == [2, 2]

    alone = []
    for i, c in enumerate(cfgs):
        p = _start(c, tmp_path / f"alone{i}")
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        alone.append(_metrics(out))
    for t, a in zip(together, alone):
        assert t.keys() == a.keys()
        for cid in t:
            assert t[cid] == pytest.approx(a[cid], nan_ok=True)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{shared / 'mlflow.db'}")
    for name in ("left", "right"):
        exp = client.get_experiment_by_name(f"ragbench/{name}")
        assert exp is not None, f"sweep {name} never reached MLflow"
        children = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("ragbench.kind") == "config"]
        assert len(children) == 2 and all(r.info.status == "FINISHED" for r in children)


HOLDER = """
import sys, time
from pathlib import Path
from ragbench.index.qdrant import EdgeIndex
index = EdgeIndex(Path(sys.argv[1]))
with index.session(sys.argv[2]):
    index._shards(sys.argv[2])  # the shard is open: Qdrant Edge's WAL lock is taken
    print("held", flush=True)
    time.sleep(3)
"""


def test_a_collection_open_in_another_process_is_waited_for_not_failed(tmp_path):
    import time

    import numpy as np

    from ragbench.index.qdrant import CollectionMeta, EdgeIndex

    x = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32)
    meta = CollectionMeta(name="c", model_key="m@1", dim=8, distance="cosine", count=50, hnsw_m=16, ef_construct=100,
                          full_scan_threshold_kb=10_000)
    index = EdgeIndex(tmp_path)
    index.ensure(meta, x, [{"chunk_id": str(i)} for i in range(50)])
    index.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "c"], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    hits = index.search("c", x[:3], "m@1", 5, exact=True)  # waits for the holder instead of failing on the WAL
    waited = time.monotonic() - t0
    holder.wait(timeout=30)
    assert [int(h[0]) for h in hits.ids] == [0, 1, 2] and waited > 1.0


def test_processes_checking_one_home_at_once_do_not_trip_each_other(tmp_path):
    """Every sweep checks that its home can be written; two starting together must not unlink each other's probe
    (a shared probe name made one of them fail with 'home … cannot be written')."""
    import subprocess
    import sys

    check = ("import sys; from ragbench.core.settings import Settings; s = Settings(home=sys.argv[1])\n"
             "for _ in range(400): s.ensure_home()")
    procs = [subprocess.Popen([sys.executable, "-c", check, str(tmp_path / "home")], stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
