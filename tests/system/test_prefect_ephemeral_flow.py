"""The Prefect flow in ephemeral mode (no server): the default orchestrator of `ragbench sweep`.

A fresh PREFECT_HOME makes Prefect migrate its database on first start, which takes longer than Prefect's default
ephemeral-startup timeout on a loaded 2-core machine; flows/settings.py raises it. This test proves that works.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
from conftest import DEMO, ROOT, write_config


def test_cli_runs_the_prefect_flow_in_ephemeral_mode(tmp_path):
    cfg = write_config(tmp_path / "tiny.yaml", f"""name: flow-test
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: sentences, window: 4}}]
retrievers: [{{kind: bm25}}]
output: {{mlflow: false}}
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "RAGBENCH_"))}
    env.update(RAGBENCH_HOME=str(tmp_path / "home"), RAGBENCH_PROGRESS="0")
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and all(r["status"] == "finished" for r in rows)
    assert (tmp_path / "home" / "prefect").is_dir()  # Prefect's state lives under the ragbench home
    con = duckdb.connect(str(tmp_path / "home" / "results.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM configs WHERE status = 'finished'").fetchall()[0][0] == 2
    con.close()
