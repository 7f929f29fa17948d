"""The plan before the run: what a sweep will compute after its caches (:func:`count_work`), priced with this
machine's calibrations (:func:`forecast`), as a table (:func:`plan_lines`) and as JSON (:func:`plan_json`).

``ragbench plan`` and the start of every sweep print the same table. Counting reads the caches only: the chunks of
a chunker not yet cached are cut (cheap; they go to the chunk cache, where the sweep finds them), texts are
hashed as the embed stage hashes them and looked up in the vector cache, and which configs run or are reused is
:func:`~ragbench.sweep.decide.decide` on what the result store holds."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ragbench.config import RunConfig, SweepConfig
from ragbench.core.cache import ChunkCache, VectorCache
from ragbench.core.progress import rough_duration
from ragbench.core.resources import memory_limit_bytes
from ragbench.core.schemas import index_texts
from ragbench.data import Dataset
from ragbench.sweep.calibrate import Calibration, calibrate, encoded_tokens, load_calibration, weight_bytes
from ragbench.sweep.decide import SweepPlan
from ragbench.sweep.estimate import ChunkWork, EmbedWork, Estimate, IndexWork, Rates, WorkCounts, estimate
from ragbench.sweep.wrap_up import WrapUp, wrap_up_of


@dataclass(frozen=True)
class Forecast:
    """Counts, their price, the calibrations used (per model label) and the memory this process may use
    (:func:`~ragbench.core.resources.memory_limit_bytes`; None: not checked)."""

    counts: WorkCounts
    estimate: Estimate
    calibrations: dict[str, Calibration]
    memory_limit: int | None = None
    wrap_up: WrapUp = WrapUp()  # after the last stage: closing the sweep, its report (ragbench.sweep.wrap_up)

    @property
    def wrap_up_seconds(self) -> float:
        """The wrap-up's seconds when every config to run has run (:meth:`WrapUp.seconds`)."""
        return self.wrap_up.seconds(self.counts.run)

    def memory_warning(self) -> str | None:
        """One line when the estimated peak memory is over the memory this process may use, else None."""
        peak, limit = self.estimate.peak_memory_bytes, self.memory_limit
        if limit is None or peak <= limit:
            return None
        return (f"peak memory ~{peak / 2**20:.0f} MiB is over the {limit / 2**20:.0f} MiB this process may use "
                f"(the machine's memory or its cgroup limit): fewer models or chunkers per sweep, or a larger "
                f"machine, before the night runs out of memory")

    @property
    def total_seconds(self) -> float:
        return self.estimate.total_seconds


def _new_texts(texts, prompt: str, known: set[str]) -> tuple[int, list[str]]:
    """(unique texts, the new ones) of ``texts``, each hashed as the model sees it (``prompt`` + text) as the embed
    stage hashes them (:func:`~ragbench.embedding.embed.prompt_hashes`); the new ones without the prompt, as the
    encoder takes them."""
    from ragbench.core.hashing import text_hash
    from ragbench.core.schemas import text_batches

    seen: set[str] = set()
    new: list[str] = []
    for batch in text_batches(texts, 4096):
        for t in batch:
            h = text_hash(prompt + t)
            if h not in seen:
                seen.add(h)
                if h not in known:
                    new.append(t)
    return len(seen), new


def _text_work(what: str | None, emb, texts, prompt: str, known: set[str],
               embedded_before: set[str] = frozenset()) -> tuple[EmbedWork, list[str]]:
    """The :class:`EmbedWork` of ``texts`` as ``emb`` sees them (``what``: the chunker, None for queries) and its new
    texts (without the prompt); those in ``embedded_before`` (an earlier stage of the sweep embeds them) count as cached."""
    unique, new = _new_texts(texts, prompt, known)
    new = [t for t in new if t not in embedded_before] if embedded_before else new
    tokens = encoded_tokens([prompt + t for t in new], emb)
    return EmbedWork(what, emb.label, unique, unique - len(new), len(new), tokens), new


def count_work(cfg: SweepConfig, ds: Dataset, cache_root: Path, plan: SweepPlan, home: Path,
               calibrate_models: bool = True, pool=None,
               recalibrate: bool = False) -> tuple[WorkCounts, dict[str, Calibration], dict[str, list[str]]]:
    """What the configs ``plan`` runs will compute (see the module docstring), the calibration of every model with
    new texts (the stored one; measured now when none is stored and ``calibrate_models``, or whatever is stored
    when ``recalibrate``; else left out) and per model its new document texts (without its document prompt).
    ``pool`` (a screened sweep's :class:`~ragbench.sweep.screen.Pool`): each pair's pooled texts count as the
    screen's, its full embedding as the texts the screen leaves new; the memory: :func:`models_memory`, the corpus'
    and each chunker's bytes."""
    from ragbench.embedding.embed import model_key
    from ragbench.sweep.stages import chunk_stage

    todo: list[RunConfig] = plan.todo
    chunk_cache, vectors = ChunkCache(cache_root), VectorCache(cache_root)
    chunkers = [i for i, ch in enumerate(cfg.chunkers) if any(c.chunker == ch for c in todo)]
    chunk_rows, embeds, screen, indexes, new_by_model, known = [], [], [], [], {}, {}

    def known_of(emb, role):
        key = (model_key(emb), role)
        if key not in known:
            known[key] = vectors.known(*key)
        return known[key]

    for i in chunkers:
        ch = cfg.chunkers[i]
        cached = chunk_cache.peek(ChunkCache.key(ds.fingerprint, ch)) is not None
        chunks = chunk_stage(ds, ch, chunk_cache)
        chunk_rows.append(ChunkWork(ch.label, ds.corpus.height, chunks.height, cached, chunks.estimated_size()))
        pairs: dict[str, list[RunConfig]] = {}
        for c in todo:
            if c.chunker == ch and c.embedder is not None:
                pairs.setdefault(c.embedder.spec_id, []).append(c)
        for group in pairs.values():
            emb = group[0].embedder
            known_docs, pooled = known_of(emb, "document"), []
            if pool is not None:  # the screen embeds the pool first: the full embed finds those texts cached
                row, pooled = _text_work(ch.label, emb, index_texts(pool.chunks[i]), emb.document_prompt, known_docs)
                screen.append(row)
            row, new = _text_work(ch.label, emb, index_texts(chunks), emb.document_prompt, known_docs, set(pooled))
            embeds.append(row)
            new_by_model.setdefault(emb.label, []).extend(pooled + new)
            indexes.append(IndexWork(ch.label, emb.label, chunks.height))
            if any(c.retriever.uses_sparse_collection for c in group):
                indexes.append(IndexWork(ch.label, emb.label, chunks.height, hybrid=True))
    models = {c.embedder.spec_id: c.embedder for c in todo if c.embedder is not None}
    embeds += [_text_work(None, emb, ds.queries["text"].to_list(), emb.query_prompt, known_of(emb, "query"))[0]
               for emb in models.values()]
    calibrations = _calibrations([m for m in models.values()
                                  if any(e.new for e in embeds + screen if e.model == m.label)],
                                 home, new_by_model, ds, calibrate_models or recalibrate, recalibrate)
    n_q, gen = ds.queries.height, cfg.generation
    llm = sum(n_q for c in todo if c.retriever.rewrite is not None) + (n_q * len(todo) if gen and gen.enabled else 0)
    rerank = sum(n_q * c.retriever.rerank.top_n for c in todo if c.retriever.rerank is not None)
    model_bytes, runtimes = models_memory(models.values(), calibrations, home)
    counts = WorkCounts(tuple(chunk_rows), tuple(embeds), tuple(indexes), len(todo), len(plan.reused),
                        len(plan.done), n_q, rerank, llm, {m: k.dim for m, k in calibrations.items()}, model_bytes,
                        tuple(screen), len(pool.doc_ids) if pool is not None else 0, cfg.search.depth,
                        ds.corpus.estimated_size(), runtimes, cfg.output.mlflow)
    return counts, calibrations, new_by_model


def models_memory(models, calibrations: dict[str, Calibration], home: Path) -> tuple[dict[str, int], tuple[str, ...]]:
    """Per model label the bytes the loaded model holds: its calibration's measured ``memory_bytes`` (the one just
    taken, else the stored one), else its weight files' bytes; and the runtimes they load (``torch``, ``onnx``).
    Every model of a config to run counts: one whose vectors are all cached is still loaded, to time the queries it
    serves."""
    out = {}
    for emb in models:
        calibration = calibrations.get(emb.label) or load_calibration(home, emb)
        out[emb.label] = calibration.memory_bytes if calibration and calibration.memory_bytes else weight_bytes(emb)
    return out, tuple(sorted({"onnx" if e.backend == "onnx" else "torch" for e in models}))


def _calibrations(models: list, home: Path, new_by_model: dict[str, list[str]], ds: Dataset,
                  measure: bool, again: bool = False) -> dict[str, Calibration]:
    """Per model label its calibration: the stored one, else (``measure``) one measured now on its new texts
    (``again``: measured now even when one is stored)."""
    out = {}
    for emb in models:
        if measure:
            out[emb.label] = calibrate(home, emb, new_by_model.get(emb.label) or ds.queries["text"].to_list(),
                                       again=again)
        elif (stored := load_calibration(home, emb)) is not None:
            out[emb.label] = stored
    return out


def rates_of(calibrations: dict[str, Calibration], home: Path | None = None) -> Rates:
    """The default rates with each calibrated model's seconds per encoded token, and a config's evaluation priced as
    ``home`` last measured it (:func:`~ragbench.sweep.config_rate.with_config_rate`)."""
    from ragbench.sweep.config_rate import with_config_rate

    return with_config_rate(Rates(seconds_per_token={m: c.seconds_per_token for m, c in calibrations.items()},
                                  load_seconds={m: c.load_seconds for m, c in calibrations.items()}), home)


def forecast(cfg: SweepConfig, ds: Dataset, cache_root: Path, plan: SweepPlan, home: Path, pool=None,
             recalibrate: bool = False) -> Forecast:
    """Count the work of ``plan`` (``pool``: a screened sweep's, see :func:`count_work`; ``recalibrate``: each model
    with texts to embed measured afresh) and price it (:func:`~ragbench.sweep.estimate.estimate`), what follows
    the last stage as this home measured it (:func:`~ragbench.sweep.wrap_up.wrap_up_of`) apart."""
    counts, cals, _ = count_work(cfg, ds, cache_root, plan, home, pool=pool, recalibrate=recalibrate)
    return Forecast(counts, estimate(counts, rates_of(cals, home)), cals, memory_limit_bytes(),
                    wrap_up_of(home, len(plan.stored)))


#: a screen pool at least this share of the corpus' documents gets a hint to lower ``search.depth``: a pair
#: screened out then spares at most the rest of its embedding
LARGE_POOL = 0.5
_UNITS = {"load": "model to load", "chunk": "documents to cut", "screen": "pooled texts to embed",
          "embed": "texts to embed", "index": "vectors to index", "evaluate": "configs to evaluate", "llm": "LLM calls"}
_KEPT = {"chunk": "cached", "screen": "cached", "embed": "cached", "evaluate": "reused or done"}


def plan_lines(f: Forecast) -> list[str]:
    """The plan as lines: one per stage row (``stage  what  to compute / cached  ~seconds``; an encoding of a model
    not yet calibrated on this machine reads ``~? (not calibrated)``), then the total, disk and peak memory, and
    on a screened sweep the total if the screen keeps only one pair, with a hint to lower ``search.depth`` when the
    pool is :data:`LARGE_POOL` of the corpus or more."""
    lines, e = [], f.estimate
    for r in e.rows:
        kept = _KEPT.get(r.stage, "")
        model = r.what.rsplit(" x ", 1)[-1]
        unpriced = (r.stage in ("load", "screen", "embed") and r.count and
                    (r.what if r.stage == "load" else model) in e.unpriced)
        lines.append(f"  {r.stage:<8} {r.what:<44} {r.count:>8} {_UNITS[r.stage]}"
                     + (f", {r.cached} {kept}" if kept else "")
                     + ("  ~? (not calibrated)" if unpriced else f"  ~{rough_duration(r.seconds)}"))
    lines.append(f"  total ~{rough_duration(e.total_seconds)}"
                 + (" if the screen keeps every pair" if e.pair_seconds else "")
                 + (f", not counting the encoding of {', '.join(e.unpriced)} (`ragbench plan` calibrates)"
                    if e.unpriced else "")
                 + f"; disk +{e.disk_bytes / 2**20:.1f} MiB; peak memory ~{e.peak_memory_bytes / 2**20:.0f} MiB "
                   f"({', '.join(f'{k} {v / 2**20:.0f}' for k, v in e.memory.items() if v >= 2**19)})")
    if f.wrap_up_seconds >= 0.5:
        lines.append(f"  then ~{rough_duration(f.wrap_up_seconds)} closing the sweep and its report (as this home "
                     f"last measured them, per config with results; not in the total)")
    if (warning := f.memory_warning()) is not None:
        lines.append(f"  memory: {warning}")
    if e.pair_seconds:
        c = f.counts
        share = f" ({c.pool_share:.0%} of the corpus)" if c.pool_share is not None else ""
        lines.append(f"  screen: {len(e.pair_seconds)} chunker x model pairs first embedded on a pool of "
                     f"{c.pool_documents} documents{share}; ~{rough_duration(e.floor_seconds)} if it keeps only the "
                     f"cheapest pair")
        if c.pool_share is not None and c.pool_share >= LARGE_POOL:
            lines.append(f"  screen: the pool is most of the corpus (judged documents plus each query's top "
                         f"{c.pool_depth} of each cheap retriever), so a pair it screens out spares little of its "
                         f"full embed; a search.depth below {c.pool_depth} makes it smaller")
    return lines


def plan_json(f: Forecast) -> dict:
    """The plan as a JSON-ready dict: ``rows`` (stage, what, count, cached, seconds), ``total_seconds`` (a screened
    sweep's if the screen keeps every pair; ``wrap_up_seconds`` follow it, not in it), ``disk_bytes``,
    ``peak_memory_bytes`` (and its parts, ``memory_bytes``: :func:`~ragbench.sweep.estimate.memory_parts`;
    ``memory_limit_bytes``: what this process may use), ``configs`` (run, reuse, skip),
    ``texts_to_embed`` (the screen's included), the calibrations, ``uncalibrated`` (models whose encoding is not
    priced), and on a screened sweep ``screen`` (``pool_documents``, ``pool_share`` of the corpus' documents,
    ``pairs``, ``floor_seconds``: the total if the screen keeps only the cheapest pair)."""
    e, c = f.estimate, f.counts
    return {"rows": [asdict(r) for r in e.rows], "total_seconds": e.total_seconds, "disk_bytes": e.disk_bytes,
            "peak_memory_bytes": e.peak_memory_bytes, "memory_bytes": dict(e.memory),
            "memory_limit_bytes": f.memory_limit, "wrap_up_seconds": f.wrap_up_seconds,
            "configs": {"run": c.run, "reuse": c.reuse, "skip": c.skip},
            "texts_to_embed": sum(x.new for x in c.screen + c.embeds),
            "calibrations": {m: asdict(k) for m, k in f.calibrations.items()}, "uncalibrated": list(e.unpriced),
            **({"screen": {"pool_documents": c.pool_documents, "pool_share": c.pool_share,
                           "pairs": dict(e.pair_seconds),
                           "floor_seconds": e.floor_seconds}} if e.pair_seconds else {})}


def decide_now(cfg: SweepConfig, ds: Dataset, home: Path, busy_wait_s: float = 5.0) -> SweepPlan:
    """What a sweep of ``cfg`` started now would decide (:func:`~ragbench.sweep.decide.decide`): resume the
    unfinished sweep of this spec and data, reuse what other sweeps stored under the same evaluation keys."""
    from ragbench.core.hashing import stable_hash
    from ragbench.results.store import ResultStore
    from ragbench.sweep.decide import StoreHolds, decide
    from ragbench.sweep.evaluate import evaluation_key
    from ragbench.sweep.plan import EvaluationSpec

    configs = cfg.expand()
    spec = EvaluationSpec.of(cfg)
    keys = {c.config_id: evaluation_key(c, ds.fingerprint, spec, ds.labels_fingerprint) for c in configs}
    path = Path(home) / "results.duckdb"
    if not path.exists():
        return decide(configs, keys, StoreHolds("(new)"))
    store = ResultStore(path, busy_wait_s, busy_ok=True)
    unfinished = store.find_unfinished_sweep(stable_hash(cfg.canonical()), ds.fingerprint)
    held = store.reusable_configs(keys, prefer=unfinished)
    return decide(configs, keys, StoreHolds(unfinished or "(new)", held))
