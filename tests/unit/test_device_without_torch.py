"""device: auto on a CPU-only torch build resolves to the CPU without importing torch (a warm rerun that encodes
nothing never pays its import); a CUDA-capable build is still asked. Texts go to the model in consecutive batches,
one call each, four times larger on CUDA: a text's vector depends on its batch alone, wherever it runs."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest
from conftest import ROOT

from ragbench.core.models import device_batch_size, encode_in_batches

PROBE = ("import sys; from ragbench.core.models import resolve_device; "
         "print(resolve_device('auto'), resolve_device('cpu'), 'torch' in sys.modules)")


@pytest.mark.skipif(not version("torch").endswith("+cpu"), reason="needs a CPU-only torch build (+cpu)")
def test_auto_on_a_cpu_build_does_not_import_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["cpu", "cpu", "False"]


class _CallRecorder:
    """An encoder (the ``encode`` protocol the sweep calls) whose vector of a text is (its length, its call)."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode(self, texts, prompt=None, batch_size=64, convert_to_numpy=True, show_progress_bar=False):
        self.calls.append(list(texts))
        return np.array([[len((prompt or "") + t), len(self.calls)] for t in texts], dtype=np.float32)


def test_texts_are_encoded_in_consecutive_batches_one_call_each_with_rows_in_input_order():
    texts = [f"text {'x' * i}" for i in range(10)]
    model, seen = _CallRecorder(), []
    vectors = encode_in_batches(model, texts, 4, "q: ", after_call=lambda n, seconds: seen.append(n))
    assert model.calls == [texts[0:4], texts[4:8], texts[8:10]]
    assert seen == [4, 4, 2]
    assert vectors[:, 0].tolist() == [len("q: " + t) for t in texts]
    assert vectors[:, 1].tolist() == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    assert (device_batch_size(64, "cuda"), device_batch_size(64, "cpu")) == (256, 64)
