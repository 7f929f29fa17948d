"""device: auto on a CPU-only torch build resolves to the CPU without importing torch (a warm rerun that encodes
nothing never pays its import); a CUDA-capable build is still asked."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from conftest import ROOT

PROBE = ("import sys; from ragbench.core.models import resolve_device; "
         "print(resolve_device('auto'), resolve_device('cpu'), 'torch' in sys.modules)")


@pytest.mark.skipif(not version("torch").endswith("+cpu"), reason="needs a CPU-only torch build (+cpu)")
def test_auto_on_a_cpu_build_does_not_import_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "cpu", "False"]
