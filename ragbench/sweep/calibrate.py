"""How fast a model encodes on this machine: a seeded sample of the texts it will see, encoded once, timed, and
kept per machine, encoder and device under ``<home>/calibration/<machine>-<model>-<device>.json`` until the model's
weights change (the file records the model key, weights revision included). Each sweep that encodes at least a
sample's worth of new texts for 10 s or more in its own process then replaces the stored rate with the one it
measured, or stores it when there was none (:func:`learn_rate`): the sample is 64 texts taken once, and one taken
while the machine was busy would otherwise price every later plan and budget; ``ragbench plan --recalibrate``
measures a sample afresh.

The rate is seconds per encoded token (:func:`encoded_tokens`: the tokens the encoder computes on, its batches
padded to their longest text and each text cut at the model's window), so a rate measured on one chunker's texts
prices another's, and one corpus' another's (:mod:`ragbench.sweep.estimate`). Before, it was per character: on a
real HTML manual, code-heavy chunks near the 256-token window cost 40 % more per character than SciFact abstracts
(3.6 characters per token, not 4.1-4.4, and batches sorted by characters still pad by a quarter in tokens), and the
plan priced that manual's embedding 30 % low; per encoded token four chunkings of the two corpora cost 160-189 µs
on 2 cores, per character 46-65 µs (docs/cost.md).
"""

from __future__ import annotations

import json
import math
import platform
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ragbench.core.atomic import write_text_atomically
from ragbench.core.models import resolve_device, resolve_model
from ragbench.core.paths import slug
from ragbench.core.progress import log
from ragbench.core.resources import files_bytes, peak_rss_bytes, rss_bytes
from ragbench.sweep.estimate import CHARS_PER_TOKEN

#: texts encoded (timed) per calibration, after one untimed warm-up batch
CALIBRATION_SAMPLE = 64
#: timings of the sample, the fastest kept: one 3-second timing beside a Prefect server starting in the same sweep
#: read MiniLM at 15 texts/s against 20 alone, and a budget then refused both embeddings of a 33-page manual it
#: could afford
CALIBRATION_TIMINGS = 2
CALIBRATION_VERSION = 3  # 2: per padded character of the sample; 3: per encoded token
#: model seconds a sweep stage must have spent for its rate to replace the stored one: a shorter stage measures
#: thread start-up and pauses of the process more than the model (under Prefect one 0.9 s pause in a batch made
#: a static model's 0.08 s stage read 12 times slower)
LEARN_MIN_SECONDS = 10.0


@dataclass(frozen=True)
class Calibration:
    """A model's measured rate on this machine: ``seconds_per_token`` (per encoded token, :func:`encoded_tokens`),
    ``dim`` (vector width), ``weight_bytes`` (its files), over ``texts`` sampled texts of ``tokens`` encoded tokens;
    ``load_seconds``: the warm-up encode, which loads the model; ``measured_by``: ``sample`` (:func:`calibrate`)
    or ``sweep`` (:func:`learn_rate`: ``texts`` and ``tokens`` are then the sweep stage's); ``memory_bytes``: the
    growth of the process's peak resident memory over the load and the sample's encode, or of its resident memory
    when more (a peak earlier in the process hides a smaller one), its runtime (torch, onnxruntime) imported before
    (the plan counts that once, :mod:`ragbench.sweep.estimate`), at least ``weight_bytes`` (a model loaded earlier
    in the process adds only its activations); 0 when not measured."""

    model_key: str
    device: str
    seconds_per_token: float
    dim: int
    weight_bytes: int
    texts: int
    tokens: int
    machine: str
    version: int = CALIBRATION_VERSION
    load_seconds: float = 0.0  # the first encode: loading the model (once per sweep process)
    measured_by: str = "sample"
    memory_bytes: int = 0  # peak resident memory the model added: loaded and encoding (0: not measured)


def machine_name() -> str:
    """This machine as a file-name component (its host name)."""
    return slug(platform.node() or "machine")


def encoded_tokens(texts: list[str], spec, device: str | None = None) -> int:
    """Tokens the encoder computes on for ``texts`` (each as the model reads it, its prompt included), batched as the
    embed stage batches them: longest first by characters, :func:`~ragbench.core.models.device_batch_size` per batch
    on ``device`` (default: where ``spec`` encodes; four times ``spec.batch_size`` on CUDA),
    each batch padded to its longest text in tokens, each text cut at the model's window, special tokens counted
    (:func:`padded_tokens`). A static model (no window) looks each token up, nothing padded: its tokens. A model
    without a ``tokenizer.json``: :data:`~ragbench.sweep.estimate.CHARS_PER_TOKEN` characters a token."""
    from ragbench.core.errors import ModelError
    from ragbench.core.models import count_tokens, device_batch_size, special_tokens
    from ragbench.embedding.embed import embedding_window, encoder_device

    ordered = sorted(texts, key=len, reverse=True)
    try:
        window = embedding_window(spec)
        counts = count_tokens(ordered, spec.model)
        specials = 0 if window is None else special_tokens(spec.model)
    except ModelError:
        window, specials = None, 0
        counts = [-(-len(t) // int(CHARS_PER_TOKEN)) for t in ordered]
    if window is None:
        return sum(counts)
    return padded_tokens(counts, window, specials, device_batch_size(spec.batch_size, device or encoder_device(spec)))


def padded_tokens(counts: list[int], window: int, specials: int, batch_size: int) -> int:
    """``sum over batches of len(batch) x (min(longest, window) + specials)``: the tokens a transformer computes
    on for texts of ``counts`` content tokens, in the order given, ``batch_size`` per batch."""
    return sum(len(counts[i:i + batch_size]) * (min(max(counts[i:i + batch_size]), window) + specials)
               for i in range(0, len(counts), batch_size))


def calibration_path(home: Path, spec, device: str) -> Path:
    """``<home>/calibration/<machine>-<model>[-L<max_seq_length>][-<backend>]-<device>.json``: one file per encoder,
    so an embedder of a model with its own sequence length, or an ONNX or int8 one, keeps its own rate beside the
    plain torch one (two encoders sharing a file would each find the other's model key there and calibrate again,
    over it)."""
    suffix = getattr(spec, "backend_suffix", "")
    length = getattr(spec, "max_seq_length", None)
    name = "-".join([spec.model] + ([f"L{length}"] if length else []) + ([suffix] if suffix else []))
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
    texts, encoded without the cache :data:`CALIBRATION_TIMINGS` times; ``seconds_per_token = (the fastest
    timing) /`` :func:`encoded_tokens` of the sample."""
    from ragbench.embedding.embed import encode_uncached, import_runtime, model_key

    found = None if again else load_calibration(home, spec)
    if found is not None:
        return found
    device = resolve_device(spec.device)
    picked = [texts[i] for i in random.Random(seed).sample(range(len(texts)), min(sample, len(texts)))] or ["text"]
    picked.sort(key=len, reverse=True)
    t_load = time.perf_counter()
    import_runtime(spec)  # its seconds are the load's; its memory the plan counts once (ragbench.sweep.estimate)
    peak_before, rss_before = peak_rss_bytes(), rss_bytes()
    encode_uncached(picked[:2], spec, "document")
    load = time.perf_counter() - t_load
    seconds = math.inf
    for _ in range(CALIBRATION_TIMINGS):  # the faster: what else the machine does only adds time
        t0 = time.perf_counter()
        vectors = encode_uncached(picked, spec, "document")
        seconds = min(seconds, time.perf_counter() - t0)
    tokens = max(1, encoded_tokens([spec.document_prompt + t for t in picked], spec))
    weights = weight_bytes(spec)
    cal = Calibration(model_key(spec), device, seconds / tokens, int(vectors.shape[1]), weights, len(picked), tokens,
                      machine_name(), load_seconds=load,
                      memory_bytes=max(peak_rss_bytes() - peak_before, rss_bytes() - rss_before, weights))
    _store(home, spec, cal)
    log.info("calibrated %s on %s: %.0f texts/s on this sample (%d texts, %.1f s)", spec.label, device,
             len(picked) / seconds if seconds else float("inf"), len(picked), seconds)
    return cal


def learn_rate(home: Path, spec, seconds: float, tokens: int, texts: int) -> Calibration | None:
    """The stored calibration of ``spec`` with the rate a sweep stage measured: ``seconds`` of model time over
    ``texts`` new texts of ``tokens`` encoded tokens (``seconds_per_token = seconds / tokens``, the plan's count
    of the stage's texts, :func:`encoded_tokens`).

    Only from at least :data:`CALIBRATION_SAMPLE` texts and :data:`LEARN_MIN_SECONDS` of model time. Over a stored
    calibration its vector width, weight bytes, load time and memory are kept; with none stored (a sweep not planned
    first) the calibration is made here: the width from one encode of the loaded model, the weight bytes from its
    files, the load time and memory from this process's first load of it (:func:`~ragbench.embedding.embed.
    first_load`: the memory of the loaded weights, at least their bytes, without a sample's activations; 0 s and the
    weight bytes when it was loaded elsewhere). Returns the new calibration, or None when nothing was stored."""
    from ragbench.embedding.embed import encode_uncached, first_load, model_key

    if texts < CALIBRATION_SAMPLE or seconds < LEARN_MIN_SECONDS or tokens <= 0:
        return None
    learned = {"seconds_per_token": seconds / tokens, "texts": texts, "tokens": tokens, "measured_by": "sweep"}
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
    write_text_atomically(calibration_path(home, spec, cal.device), json.dumps(asdict(cal), indent=1))
