"""The judgment pool of a sweep (TREC pooling): what its configs retrieved that nobody has judged.

For every labelled query (a query with a document of relevance > 0), the pool holds each document that is in the
top ``depth`` documents of at least one finished config (documents ranked by their best chunk, as every document
measure ranks them: :func:`~ragbench.evaluation.judging.document_run`) and carries no judgment of that query in
the dataset's labels (its own, plus the added judgments that count under ``labels``). One :class:`PoolRow` each:

* ``votes``: how many configs ranked it in their top ``depth``; ``best_rank``: its best document rank among them;
* ``passage``: the text of its chunk that ranked best (the config with the best rank, the first such config in
  config-id order on a tie): what a person reads to judge it;
* ``answer_in_passage``: the query's answer strings found in the passage
  (:func:`ragbench.data.answer_strings.answers_found`): a strong hint of a label hole.

Rows are ordered by query id, then votes (most first), best rank, document id. Nothing is retrieved again: the
rankings are the stored ones, the chunks come from the chunk cache (chunked again only when it lacks them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ragbench.chunking import CHUNKERS, chunk_corpus
from ragbench.chunking.base import share_corpus_text
from ragbench.core.cache import ChunkCache
from ragbench.core.errors import RagbenchError
from ragbench.data import DatasetSpec, load_dataset
from ragbench.data.answer_strings import answer_strings, answers_found
from ragbench.data.dataset import Dataset
from ragbench.evaluation.judging import document_run
from ragbench.results.store import ResultStore


@dataclass(frozen=True)
class PoolRow:
    """One unjudged (query, document) of the pool, and, once filled, its judgment (``relevance`` None: not
    judged; 0 not relevant; 1-3 graded) with its ``source``, ``judge`` and ``judged_at``."""

    query_id: str
    question: str
    doc: str
    passage: str
    votes: int
    best_rank: int
    answer_in_passage: tuple[str, ...] = ()
    relevance: int | None = None
    source: str = ""
    judge: str = ""
    judged_at: str = ""


def sweep_dataset(store: ResultStore, sweep_id: str, home: Path) -> Dataset:
    """The dataset of ``sweep_id`` as it is now (its added judgments included), refused when its documents or
    questions changed since the sweep (the fingerprint differs: the stored rankings are of other data)."""
    sweep = store.sweep(sweep_id)
    spec = DatasetSpec.model_validate(json.loads(sweep["spec_json"])["dataset"])
    ds = load_dataset(spec, Path(home) / "cache")
    if ds.fingerprint != sweep["dataset_fingerprint"]:
        raise RagbenchError(f"the dataset at {spec.path} changed since sweep {sweep_id} (fingerprint "
                            f"{ds.fingerprint} != {sweep['dataset_fingerprint']}); rerun the sweep, then pool it")
    return ds


def _chunk_texts(ds: Dataset, chunker_spec: dict, home: Path) -> dict[str, str]:
    chunker = CHUNKERS.parse(chunker_spec)
    chunks, cached = ChunkCache(Path(home) / "cache").get_or_build(ChunkCache.key(ds.fingerprint, chunker),
                                                                    lambda: chunk_corpus(ds, chunker))
    if cached:
        chunks = share_corpus_text(chunks, ds.corpus)
    return dict(chunks.select("chunk_id", "text").iter_rows())


def build_pool(store: ResultStore, sweep_id: str, home: Path, depth: int = 10,
               ds: Dataset | None = None) -> list[PoolRow]:
    """The pool of ``sweep_id`` at ``depth`` (see the module docstring); ``ds`` defaults to
    :func:`sweep_dataset`. A sweep without a finished config is an error."""
    if depth < 1:
        raise RagbenchError(f"--depth must be at least 1, got {depth}")
    ds = ds if ds is not None else sweep_dataset(store, sweep_id, home)
    config_ids = sorted(store.finished_configs(sweep_id))
    if not config_ids:
        raise RagbenchError(f"sweep {sweep_id} has no finished config to pool")
    labelled = set(ds.qrels.filter(pl.col("relevance") > 0)["query_id"])
    judged = set(zip(ds.qrels["query_id"], ds.qrels["doc_id"]))
    # (query, doc) -> [votes, best rank, config of the best rank, its chunk]
    found: dict[tuple[str, str], list] = {}
    for config_id in config_ids:
        run = store.rankings(sweep_id, config_id)
        best_chunk = dict(((q, d), c) for q, d, c in run.sort(["query_id", "rank"], descending=[False, True])
                          .select("query_id", "doc_id", "chunk_id").iter_rows())  # the best rank is kept last
        docs = document_run(run).filter((pl.col("rank") <= depth)
                                        & pl.col("query_id").is_in(pl.Series(sorted(labelled), dtype=pl.String)
                                                                   .implode()))
        for q, rank, d in docs.select("query_id", "rank", "doc_id").iter_rows():
            if (q, d) in judged:
                continue
            entry = found.setdefault((q, d), [0, rank, config_id, best_chunk[(q, d)]])
            entry[0] += 1
            if rank < entry[1]:
                entry[1:] = [rank, config_id, best_chunk[(q, d)]]
    texts: dict[str, dict[str, str]] = {}
    specs = {c: json.loads(store.config(sweep_id, c)["spec_json"])["chunker"] for c in config_ids}
    questions = dict(ds.queries.select("query_id", "text").iter_rows())
    rows = []
    for (q, d), (votes, rank, config_id, chunk_id) in found.items():
        key = json.dumps(specs[config_id], sort_keys=True)
        if key not in texts:
            texts[key] = _chunk_texts(ds, specs[config_id], home)
        passage = texts[key].get(chunk_id, "")
        rows.append(PoolRow(q, questions.get(q, ""), d, passage, votes, rank,
                            tuple(answers_found(passage, answer_strings(ds, q)))))
    return sorted(rows, key=lambda r: (r.query_id, -r.votes, r.best_rank, r.doc))
