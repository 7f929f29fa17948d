"""Fine-tuned embedders: a base model trained on the dataset's training split, stored in the home by content hash.

``embedders: - {model: all-MiniLM-L6-v2, finetune: {split: train, epochs: 1}}`` trains the base model with
sentence-transformers' ``MultipleNegativesRankingLoss`` (in-batch negatives, seeded) on (query, relevant document)
pairs of the training split, saves it under ``<home>/models/<content hash>/`` and evaluates it like any model: the
sweep swaps the spec's model for ``finetuned:<hash>`` (resolved by :func:`ragbench.core.models.resolve_model`).

Pairs: every (training query, document judged relevant to it) of the training split's qrels, as
``(query_prompt + query text, document_prompt + "title text")`` — the whole document as the title-prefixed text the
corpus is indexed with, not its evidence spans: the model learns the retrieval unit the sweep mostly chunks from,
and the pair set does not depend on which chunker is in the sweep.

Leaks (:func:`find_leaks`), relative to the split the sweep evaluates (as loaded: after ``max_queries``):

- a training query whose id or text (whitespace-collapsed, case-folded) is an evaluated query;
- a training-positive document judged (any grade) in the evaluated split.

``finetune.leaks: refuse`` (the default) refuses to train when any pair leaks, naming the counts and examples;
``leaks: drop`` trains on the pairs that touch neither and logs what it left out. SciFact needs ``drop``: its train
and test claims have different ids, but two are the same text (train 871 = test 870, 1291 = 1292, each citing the
same abstract), and 295 of the 919 training pairs cite an abstract judged in test.

The content hash covers the training pairs, the base model's id and weights revision, the fine-tune settings and
:data:`FINETUNE_VERSION`, so equal inputs reuse the stored model and never train twice.
"""

from __future__ import annotations

import copy
import json
import os
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ragbench.core.errors import RagbenchError
from ragbench.core.hashing import stable_hash
from ragbench.core.locks import file_lock
from ragbench.core.models import FINETUNED_PREFIX, load_sentence_transformer, resolve_model
from ragbench.core.progress import log
from ragbench.data import Dataset, DatasetSpec, load_dataset
from ragbench.embedding.spec import EmbedderSpec, FinetuneSpec

#: bump when the training procedure changes what a stored model would be
FINETUNE_VERSION = 1
#: the metadata file saved beside the weights
META_FILE = "ragbench-finetune.json"


class FinetuneLeakError(RagbenchError):
    """The training split shares queries or judged documents with the evaluated split."""


@dataclass(frozen=True)
class Leaks:
    """What of a training split touches the evaluated split: training queries that are evaluated queries (same id,
    or same text once whitespace is collapsed and case folded), training-positive documents judged (any grade) in
    the evaluated split, and how many of the ``total`` training pairs involve either."""

    queries: list[str]
    documents: list[str]
    pairs: int
    total: int

    def __bool__(self) -> bool:
        return self.pairs > 0

    def describe(self, train_split: str, evaluated_split: str) -> str:
        parts = []
        if self.queries:
            parts.append(f"{len(self.queries)} training queries (split {train_split!r}) are also queries of the "
                         f"evaluated split {evaluated_split!r} (same id or text): {_examples(self.queries)}")
        if self.documents:
            parts.append(f"{len(self.documents)} training documents are judged in the evaluated split "
                         f"{evaluated_split!r}: {_examples(self.documents)}")
        return f"{' and '.join(parts)}; {self.pairs} of {self.total} training pairs leak"


def _examples(ids: list[str]) -> str:
    return ", ".join(ids[:5]) + (" ..." if len(ids) > 5 else "")


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _positive_pairs(train: Dataset) -> list[tuple[str, str]]:
    known = set(train.queries["query_id"].to_list())
    return sorted((q, d) for q, d, r in train.qrels.select("query_id", "doc_id", "relevance").iter_rows()
                  if r > 0 and q in known)


def find_leaks(train: Dataset, evaluated: Dataset) -> Leaks:
    """The :class:`Leaks` of ``train``'s positive (query, document) pairs into ``evaluated``."""
    eval_ids = set(evaluated.queries["query_id"].to_list())
    eval_texts = {_norm(t) for t in evaluated.queries["text"].to_list()}
    judged = set(evaluated.qrels["doc_id"].to_list())
    texts = dict(train.queries.select("query_id", "text").iter_rows())
    rows = _positive_pairs(train)
    bad_q = sorted({q for q, _ in rows if q in eval_ids or _norm(texts[q]) in eval_texts})
    bad_d = sorted({d for _, d in rows if d in judged})
    leaking = sum(q in bad_q or d in judged for q, d in rows)
    return Leaks(bad_q, bad_d, leaking, len(rows))


def training_pairs(train: Dataset, leaks: Leaks, spec: EmbedderSpec) -> list[tuple[str, str]]:
    """The (query text, document text) pairs of ``train``'s positive qrels (sorted by query then document id) that
    do not leak; the first ``max_pairs`` of a seeded sample when set."""
    ft = spec.finetune
    assert ft is not None
    queries = dict(train.queries.select("query_id", "text").iter_rows())
    docs = {d: f"{t} {x}" if t else x for d, t, x in train.corpus.select("doc_id", "title", "text").iter_rows()}
    bad_q, bad_d = set(leaks.queries), set(leaks.documents)
    kept = [(q, d) for q, d in _positive_pairs(train) if q not in bad_q and d not in bad_d]
    if ft.max_pairs is not None and len(kept) > ft.max_pairs:
        kept = sorted(random.Random(ft.seed).sample(kept, ft.max_pairs))
    return [(spec.query_prompt + queries[q], spec.document_prompt + docs[d]) for q, d in kept]


def finetune_key(spec: EmbedderSpec, pairs: list[tuple[str, str]]) -> str:
    """The content hash naming a fine-tuned model: training pairs + base model id and revision + settings."""
    assert spec.finetune is not None
    return stable_hash({"pairs": stable_hash(pairs), "base": resolve_model(spec.model).key,
                        "max_seq_length": spec.max_seq_length, "settings": spec.finetune.canonical(),
                        "version": FINETUNE_VERSION}, 16)


def train_model(base: str, pairs: list[tuple[str, str]], ft: FinetuneSpec, out: Path,
                max_seq_length: int | None = None) -> dict:
    """Fine-tune ``base`` on ``pairs`` with ``MultipleNegativesRankingLoss`` (each query's document is its positive,
    the batch's other documents its negatives; scale 20, cosine), AdamW at ``ft.learning_rate`` with 10 % linear
    warm-up, ``ft.epochs`` passes over batches of ``ft.batch_size`` shuffled by ``ft.seed`` (a batch never holds
    the same document twice, which would be a false negative); save the model in ``out``. On the CPU."""
    import torch
    from sentence_transformers.losses import MultipleNegativesRankingLoss
    from transformers import get_linear_schedule_with_warmup

    torch.manual_seed(ft.seed)
    model = copy.deepcopy(load_sentence_transformer(base, max_seq_length, "cpu"))  # never train the shared copy
    loss = MultipleNegativesRankingLoss(model)
    rng = random.Random(ft.seed)
    epochs = [_batches(pairs, ft.batch_size, rng) for _ in range(ft.epochs)]
    steps = sum(len(e) for e in epochs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=ft.learning_rate)
    schedule = get_linear_schedule_with_warmup(optimizer, max(1, steps // 10), max(1, steps))
    encode = getattr(model, "preprocess", None) or model.tokenize  # tokenize: sentence-transformers < 6
    model.train()
    t0, losses = time.perf_counter(), []
    for batches in epochs:
        for batch in batches:
            features = [encode([q for q, _ in batch]), encode([d for _, d in batch])]
            value = loss(features, None)
            value.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(float(value.detach()))
    model.eval()
    model.save(str(out))
    return {"steps": steps, "seconds": round(time.perf_counter() - t0, 1),
            "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None}


def _batches(pairs: list[tuple[str, str]], size: int, rng: random.Random) -> list[list[tuple[str, str]]]:
    """Shuffled batches of up to ``size`` pairs with distinct documents (a repeated document waits for a later
    batch); batches of one pair (no negatives) are left out."""
    order = pairs[:]
    rng.shuffle(order)
    batches: list[list[tuple[str, str]]] = []
    open_batch: list[tuple[str, str]] = []
    seen: set[str] = set()
    waiting: list[tuple[str, str]] = []
    for pair in order:
        if pair[1] in seen:
            waiting.append(pair)
            continue
        open_batch.append(pair)
        seen.add(pair[1])
        if len(open_batch) == size:
            batches.append(open_batch)
            open_batch, seen = [], set()
            rest, waiting = waiting, []
            for w in rest:
                if w[1] in seen:
                    waiting.append(w)
                else:
                    open_batch.append(w)
                    seen.add(w[1])
    if open_batch:
        batches.append(open_batch)
    return [b for b in batches if len(b) > 1]


def finetuned_model(spec: EmbedderSpec, dataset: DatasetSpec, evaluated: Dataset, home: Path) -> str:
    """The model name (``finetuned:<hash>``) of ``spec`` fine-tuned on ``dataset``'s ``finetune.split``: trained
    and stored under ``<home>/models/<hash>/`` the first time (in a temporary folder, renamed into place when
    complete), reused after. Refuses a split that leaks into the evaluated one (see the module docstring)."""
    ft = spec.finetune
    assert ft is not None
    if ft.split == dataset.split:
        raise FinetuneLeakError(f"refusing to fine-tune: finetune.split {ft.split!r} is the split the sweep "
                                f"evaluates; train on another split (e.g. train)")
    train = load_dataset(dataset.model_copy(update={"split": ft.split, "spans": False, "max_queries": None,
                                                    "max_docs": None, "holdout": None, "queries": "in_qrels"}))
    leaks = find_leaks(train, evaluated)
    if leaks and ft.leaks == "refuse":
        raise FinetuneLeakError(f"refusing to fine-tune {spec.label} on {dataset.path}: "
                                f"{leaks.describe(ft.split, dataset.split)} (set finetune.leaks: drop to train on the "
                                f"other {leaks.total - leaks.pairs})")
    if leaks:
        log.warning("fine-tune %s: leaving out what leaks: %s", spec.label, leaks.describe(ft.split, dataset.split))
    pairs = training_pairs(train, leaks, spec)
    if len(pairs) < 2:
        raise RagbenchError(f"cannot fine-tune {spec.label}: split {ft.split!r} of {dataset.path} leaves "
                            f"{len(pairs)} training pair(s) after the leak check")
    key = finetune_key(spec, pairs)
    root = Path(home) / "models"
    final = root / key
    with file_lock(Path(home) / "locks" / f"finetune-{key}.lock", f"fine-tuning {spec.label}", wait_seconds=3600):
        if (final / META_FILE).is_file():
            log.info("fine-tune %s: reusing %s", spec.label, final)
        else:
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
            try:
                log.info("fine-tune %s: training on %d pairs of split %r (%d epoch(s), batch %d, seed %d)",
                         spec.label, len(pairs), ft.split, ft.epochs, ft.batch_size, ft.seed)
                stats = train_model(spec.model, pairs, ft, tmp, spec.max_seq_length)
                meta = {"base": resolve_model(spec.model).key, "dataset": str(dataset.path), "split": ft.split,
                        "evaluated_split": dataset.split, "pairs": len(pairs), "left_out_pairs": leaks.pairs,
                        "settings": ft.canonical(), "version": FINETUNE_VERSION, **stats}
                (tmp / META_FILE).write_text(json.dumps(meta, indent=1))
                if final.exists():  # a half-written folder from a killed run (no meta file): replace it
                    shutil.rmtree(final)
                os.replace(tmp, final)
                log.info("fine-tune %s: %d steps in %.0f s, saved %s", spec.label, stats["steps"], stats["seconds"],
                         final)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    return FINETUNED_PREFIX + key


def resolve_finetuned(embedders: list[EmbedderSpec], dataset: DatasetSpec, evaluated: Dataset,
                      home: Path) -> list[EmbedderSpec]:
    """``embedders`` with each fine-tune spec's model replaced by its fine-tuned model (trained if needed); its name
    defaults to ``<base label>-ft`` so reports tell it from the base model."""
    out = []
    for spec in embedders:
        if spec.finetune is None or spec.model.startswith(FINETUNED_PREFIX):
            out.append(spec)
            continue
        name = finetuned_model(spec, dataset, evaluated, home)
        out.append(spec.model_copy(update={"model": name, "name": spec.name or f"{spec.label}-ft"}))
    return out
