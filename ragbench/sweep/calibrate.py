"""How fast a model encodes on this machine: a seeded sample of the texts it will see, encoded once, timed, and
kept per machine, model and device under ``<home>/calibration/<machine>-<model>-<device>.json`` until the model's
weights change (the file records the model key, weights revision included). Each sweep that encodes at least a
sample's worth of new texts for 10 s or more in its own process then replaces the stored rate with the one it
measured, or stores it when there was none (:func:`learn_rate`): the sample is 64 texts taken once, and one taken
while the machine was busy would otherwise price every later plan and budget; ``ragbench plan --recalibrate``
measures a sample afresh.

The rate is seconds per character, each text's characters capped at the model's window
(:func:`~ragbench.sweep.estimate.CHARS_PER_TOKEN` x window tokens), so a rate measured on one chunker's texts
prices another's (:mod:`ragbench.sweep.estimate`).
"""

from __future__ import annotations

import json
import os
import platform
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ragbench.core.models import resolve_device, resolve_model
from ragbench.core.paths import slug
from ragbench.core.progress import log
from ragbench.core.resources import files_bytes, peak_rss_bytes, rss_bytes
from ragbench.sweep.estimate import CHARS_PER_TOKEN

#: texts encoded (timed) per calibration, after one untimed warm-up batch
CALIBRATION_SAMPLE = 64
CALIBRATION_VERSION = 2  # 2: the rate is per padded character of the sample
#: model seconds a sweep stage must have spent for its rate to replace the stored one: a shorter stage measures
#: thread start-up and pauses of the process more than the model (under Prefect one 0.9 s pause in a batch made
#: a static model's 0.08 s stage read 12 times slower)
LEARN_MIN_SECONDS = 10.0


@dataclass(frozen=True)
class Calibration:
    """A model's measured rate on this machine: ``seconds_per_char`` (window-capped characters), ``dim`` (vector
    width), ``weight_bytes`` (its files), over ``texts`` sampled texts of ``chars`` capped characters;
    ``load_seconds``: the warm-up encode, which loads the model; ``measured_by``: ``sample`` (:func:`calibrate`)
    or ``sweep`` (:func:`learn_rate`: ``texts`` and ``chars`` are then the sweep stage's); ``memory_bytes``: the
    growth of the process's peak resident memory over the load and the sample's encode, or of its resident memory
    when more (a peak earlier in the process hides a smaller one), its runtime (torch, onnxruntime) imported before
    (the plan counts that once, :mod:`ragbench.sweep.estimate`), at least ``weight_bytes`` (a model loaded earlier
    in the process adds only its activations); 0 when not measured."""

    model_key: str
    device: str
    seconds_per_char: float
    dim: int
    weight_bytes: int
    texts: int
    chars: int
    machine: str
    version: int = CALIBRATION_VERSION
    load_seconds: float = 0.0  # the first encode: loading the model (once per sweep process)
    measured_by: str = "sample"
    memory_bytes: int = 0  # peak resident memory the model added: loaded and encoding (0: not measured)


def machine_name() -> str:
    """This machine as a file-name component (its host name)."""
    return slug(platform.node() or "machine")


def window_chars(spec) -> int | None:
    """Characters of one text the model reads: its window in tokens x :data:`CHARS_PER_TOKEN` (None: all)."""
    from ragbench.embedding.embed import embedding_window

    window = embedding_window(spec)
    return None if window is None else int(window * CHARS_PER_TOKEN)


def capped_chars(texts, cap: int | None) -> int:
    """Sum of each text's length, capped at ``cap`` characters (None: uncapped)."""
    return sum(len(t) if cap is None else min(len(t), cap) for t in texts)


def padded_chars(texts: list[str], cap: int | None, batch_size: int) -> int:
    """Characters the model pays for when ``texts`` (longest first) are encoded in batches of ``batch_size``: each
    batch as long as its longest text (padding), each text capped at ``cap``. A sweep encodes thousands of texts
    sorted by length, so its batches barely pad and its cost is its capped characters; a small sample pads a lot,
    so its rate is taken per padded character."""
    lengths = sorted((len(t) if cap is None else min(len(t), cap) for t in texts), reverse=True)
    return sum(len(lengths[i:i + batch_size]) * lengths[i] for i in range(0, len(lengths), batch_size))


def calibration_path(home: Path, spec, device: str) -> Path:
    """``<home>/calibration/<machine>-<model><backend>-<device>.json``: one file per encoder, so an ONNX or int8
    embedder of a model keeps its own rate beside the torch one (``backend_suffix`` is empty for torch)."""
    suffix = getattr(spec, "backend_suffix", "")
    name = f"{spec.model}-{suffix}" if suffix else spec.model
    return Path(home) / "calibration" / f"{machine_name()}-{slug(name)}-{device}.json"


def load_calibration(home: Path, spec) -> Calibration | None:
    """The stored calibration of ``spec`` on this machine and device, when its model key still matches."""
    from ragbench.embedding.embed import model_key

    device = resolve_device(spec.device)
    path = calibration_path(home, spec, device)
    try:
        data = json.loads(path.read_text())
        cal = Calibration(**data)
    except (OSError, ValueError, TypeError):
        return None
    return cal if cal.model_key == model_key(spec) and cal.version == CALIBRATION_VERSION else None


def calibrate(home: Path, spec, texts: list[str], *, sample: int = CALIBRATION_SAMPLE, seed: int = 0,
              again: bool = False) -> Calibration:
    """The calibration of ``spec`` (stored, or measured now on a seeded sample of ``texts`` and stored; ``again``:
    measured now whatever is stored).

    Measured: one untimed warm-up encode (loads the model), then the sample, longest first as the sweep sorts its
    texts, encoded without the cache; ``seconds_per_char = seconds /`` :func:`padded_chars` of the sample."""
    from ragbench.embedding.embed import encode_uncached, import_runtime, model_key

    found = None if again else load_calibration(home, spec)
    if found is not None:
        return found
    device = resolve_device(spec.device)
    cap = window_chars(spec)
    picked = [texts[i] for i in random.Random(seed).sample(range(len(texts)), min(sample, len(texts)))] or ["text"]
    picked.sort(key=len, reverse=True)
    t_load = time.perf_counter()
    import_runtime(spec)  # its seconds are the load's; its memory the plan counts once (ragbench.sweep.estimate)
    peak_before, rss_before = peak_rss_bytes(), rss_bytes()
    encode_uncached(picked[:2], spec, "document")
    load = time.perf_counter() - t_load
    t0 = time.perf_counter()
    vectors = encode_uncached(picked, spec, "document")
    seconds = time.perf_counter() - t0
    chars = max(1, padded_chars(picked, cap, spec.batch_size))
    weights = weight_bytes(spec)
    cal = Calibration(model_key(spec), device, seconds / chars, int(vectors.shape[1]), weights, len(picked), chars,
                      machine_name(), load_seconds=load,
                      memory_bytes=max(peak_rss_bytes() - peak_before, rss_bytes() - rss_before, weights))
    _store(home, spec, cal)
    log.info("calibrated %s on %s: %.0f texts/s on this sample (%d texts, %.1f s)", spec.label, device,
             len(picked) / seconds if seconds else float("inf"), len(picked), seconds)
    return cal


def learn_rate(home: Path, spec, seconds: float, chars: int, texts: int) -> Calibration | None:
    """The stored calibration of ``spec`` with the rate a sweep stage measured: ``seconds`` of model time over
    ``texts`` new texts of ``chars`` window-capped characters (``seconds_per_char = seconds / chars``; the stage
    encodes its texts sorted by length, so its batches barely pad and capped characters are what it paid for).

    Only from at least :data:`CALIBRATION_SAMPLE` texts and :data:`LEARN_MIN_SECONDS` of model time. Over a stored
    calibration its vector width, weight bytes, load time and memory are kept; with none stored (a sweep not planned
    first) the calibration is made here: the width from one encode of the loaded model, the weight bytes from its
    files, the load time and memory from this process's first load of it (:func:`~ragbench.embedding.embed.
    first_load`: the memory of the loaded weights, at least their bytes, without a sample's activations; 0 s and the
    weight bytes when it was loaded elsewhere). Returns the new calibration, or None when nothing was stored."""
    from ragbench.embedding.embed import encode_uncached, first_load, model_key

    if texts < CALIBRATION_SAMPLE or seconds < LEARN_MIN_SECONDS or chars <= 0:
        return None
    learned = {"seconds_per_char": seconds / chars, "texts": texts, "chars": chars, "measured_by": "sweep"}
    stored = load_calibration(home, spec)
    if stored is None:
        device = resolve_device(spec.device)
        dim = int(encode_uncached(["width"], spec, "document").shape[1])
        load_seconds, load_bytes = first_load(spec) or (0.0, 0)
        weights = weight_bytes(spec)
        stored = Calibration(model_key(spec), device, 0.0, dim, weights, 0, 0, machine_name(),
                             load_seconds=load_seconds, memory_bytes=max(load_bytes, weights))
    cal = replace(stored, **learned)
    _store(home, spec, cal)
    return cal


def weight_bytes(spec) -> int:
    """Bytes of the model's files on disk (0 for a model without a local folder)."""
    path = resolve_model(spec.model).path
    return files_bytes(path) if path is not None else 0


def _store(home: Path, spec, cal: Calibration) -> None:
    """Write ``cal`` as the calibration of ``spec`` (atomically: a reader sees the old file or the new)."""
    out = calibration_path(home, spec, cal.device)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(cal), indent=1))
    tmp.replace(out)
