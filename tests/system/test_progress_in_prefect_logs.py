"""Progress lines reach Prefect's task logs: a stage inside a Prefect task (ephemeral server, as `ragbench sweep`
runs by default) that outlasts the interval logs its `progress:` lines through the ragbench log, from the
progress thread, and Prefect files them under that task run (read back through Prefect's own client)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT, clean_env

SCRIPT = r"""
import json, time
from pathlib import Path
from ragbench.core.settings import Settings
from flows.settings import configure_prefect

settings = Settings(home=Path(HOME), progress_interval_s=0.3).apply()
configure_prefect(settings)
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.logging.handlers import APILogHandler
from ragbench.core.progress import log, progress

@task(name="embed")
def embed():
    with progress("embed toy [document]", 10) as advance:
        for _ in range(10):
            time.sleep(0.2)
            advance(1)
    from prefect.runtime import task_run
    return task_run.id

@flow(name="progress-logs")
def run():
    handler = APILogHandler()
    log.addHandler(handler)
    try:
        return str(embed())
    finally:
        log.removeHandler(handler)

task_id = run()
APILogHandler().flush()
with get_client(sync_client=True) as client:
    logs = client.read_logs()
print(json.dumps({"task": task_id, "logs": [[str(l.task_run_id), l.message] for l in logs]}))
"""


def test_progress_lines_are_in_the_task_runs_prefect_logs(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT.replace("HOME", repr(str(tmp_path / "home")))], cwd=ROOT,
                          env=clean_env(RAGBENCH_HOME=str(tmp_path / "home")), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    mine = [m for run, m in out["logs"] if run == out["task"] and m.startswith("progress: embed toy [document]: ")]
    assert len(mine) >= 3, out["logs"]  # about 2 s at 0.3 s a line, all under the task's run
