"""device: auto on a CPU-only torch build resolves to the CPU without importing torch (a warm rerun that encodes
nothing never pays its import); a CUDA-capable build is still asked. Texts go to the model in consecutive batches,
one call each, four times larger on CUDA: a text's vector depends on its batch alone, wherever it runs. On CUDA the
tokenizer runs its own threads while the model encodes, and the switch is restored after."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version

import numpy as np
import pytest
from conftest import ROOT

from ragbench.core.models import device_batch_size, encode_in_batches
from ragbench.core.settings import TOKENIZER_THREADS, tokenizer_threads

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
        self.threads: list[str | None] = []  # TOKENIZERS_PARALLELISM as each call found it

    def encode(self, texts, prompt=None, batch_size=64, convert_to_numpy=True, show_progress_bar=False):
        self.calls.append(list(texts))
        self.threads.append(os.environ.get(TOKENIZER_THREADS))
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


def test_the_tokenizer_runs_its_threads_during_a_cuda_encode_only_and_the_switch_is_restored(monkeypatch):
    monkeypatch.setenv(TOKENIZER_THREADS, "false")  # as Settings.apply leaves it
    cpu, cuda = _CallRecorder(), _CallRecorder()
    encode_in_batches(cpu, ["a", "b", "c"], 2)
    encode_in_batches(cuda, ["a", "b", "c"], 2, device="cuda")
    assert (cpu.threads, cuda.threads) == (["false", "false"], ["true", "true"])
    assert os.environ[TOKENIZER_THREADS] == "false"
    first, second = tokenizer_threads(), tokenizer_threads()  # two encodes overlapping in threads
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert os.environ[TOKENIZER_THREADS] == "true"  # the other encode still runs
    second.__exit__(None, None, None)
    assert os.environ[TOKENIZER_THREADS] == "false"
    monkeypatch.delenv(TOKENIZER_THREADS)
    with pytest.raises(RuntimeError), tokenizer_threads():
        raise RuntimeError("the encode failed")
    assert TOKENIZER_THREADS not in os.environ  # unset before, unset after


class _TokenizerRecorder:
    """A tokenizer (the ``encode_batch`` protocol count_tokens calls) noting the switch each call found."""

    def __init__(self):
        self.threads: list[str | None] = []

    def encode_batch(self, texts, add_special_tokens=False):
        self.threads.append(os.environ.get(TOKENIZER_THREADS))
        return [type("Encoding", (), {"ids": t.split()})() for t in texts]


def test_counting_tokens_runs_the_tokenizers_threads(monkeypatch):
    from ragbench.core import models

    tokenizer = _TokenizerRecorder()
    monkeypatch.setenv(TOKENIZER_THREADS, "false")
    monkeypatch.setattr(models, "load_tokenizer", lambda name: tokenizer)
    assert models.count_tokens(["one two", "three"], "any") == [2, 1]
    assert tokenizer.threads == ["true"] and os.environ[TOKENIZER_THREADS] == "false"
