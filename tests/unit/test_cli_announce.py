"""`ragbench sweep CONFIG` announces itself before its heavy imports, once, and only for a sweep."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, clean_env

from ragbench.cli.announce import _announce_sweep


def test_announces_only_a_sweep_with_a_config(capsys):
    assert _announce_sweep(["ragbench", "sweep", "configs/demo.yaml", "--orchestrator", "local"])
    assert capsys.readouterr().err == "starting sweep configs/demo.yaml …\n"
    for argv in (["ragbench", "sweep", "--help"], ["ragbench", "sweep", "c.yaml", "--help"], ["ragbench", "sweep"],
                 ["ragbench", "report", "latest"], ["ragbench", "sweep", "--json"]):
        assert not _announce_sweep(argv), argv
    assert capsys.readouterr().err == ""


def test_the_first_line_is_said_once(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(tmp_path / "missing.yaml"),
                           "--orchestrator", "local"], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=300)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and lines[0] == f"starting sweep {tmp_path / 'missing.yaml'} …", proc.stderr
    assert sum(line.startswith("starting sweep") for line in lines) == 1, proc.stderr
