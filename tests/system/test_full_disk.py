"""A full disk is reported with its real cause, and what was stored before is untouched. Runs on a small tmpfs
mounted for the test (skipped where mounting is not permitted)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import duckdb
import pytest
from conftest import DEMO, ROOT, write_config

SWEEP = f"""name: full
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: SIZE}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
output: {{mlflow: false}}
"""


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)],
                                                       capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _sweep(cfg, home):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGBENCH_", "MLFLOW_"))}
    env.update(RAGBENCH_PROGRESS="0", RAGBENCH_MIN_FREE_BYTES="0")  # past the guard: the write itself must fail
    return subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--orchestrator", "local",
                           "--home", str(home)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _rows(home):
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        return con.execute("SELECT config_id, measure, mean FROM config_metrics ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_a_full_disk_names_its_cause_and_keeps_earlier_results(small_disk, tmp_path):
    home = small_disk / "home"
    first = _sweep(write_config(tmp_path / "a.yaml", SWEEP.replace("SIZE", "64")), home)
    assert first.returncode == 0, first.stderr[-2000:]
    before = _rows(home)
    free = shutil.disk_usage(small_disk).free
    (small_disk / "filler").write_bytes(b"\0" * max(free - 150_000, 0))  # leave ~150 KB
    second = _sweep(write_config(tmp_path / "b.yaml", SWEEP.replace("SIZE", "48")), home)
    out = second.stdout + second.stderr
    assert second.returncode != 0
    assert "No space left on device" in out
    assert "cannot rollback" not in out and "Traceback" not in out
    (small_disk / "filler").unlink()
    assert set(before) <= set(_rows(home))  # earlier rows intact
