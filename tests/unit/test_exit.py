"""A command's process freezes its heap at exit, after every other exit handler, and not before."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT, clean_env

SCRIPT = """
import atexit, gc
atexit.register(lambda: print("at exit:", gc.get_freeze_count() > 0, flush=True))  # registered first: runs last
import ragbench.cli
atexit.register(lambda: print("in a later handler:", gc.get_freeze_count() > 0, flush=True))
print("while running:", gc.get_freeze_count() > 0, flush=True)
"""


def test_the_command_line_skips_the_final_collection_only_once_its_handlers_ran():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["while running: False", "in a later handler: False", "at exit: True"]
