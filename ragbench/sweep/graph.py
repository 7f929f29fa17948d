"""The sweep as data: a list of :class:`Stage` (a function with named inputs and one named output), executed in
order by any :class:`~ragbench.sweep.runner.StageRunner` (:func:`execute`).

:func:`sweep_graph` declares the sweep's stages: load → chunk (per chunker) → embed (per chunker × embedder;
queries once per embedder) → index → evaluate (per config) → record. A stage's named inputs reach its function as
upstream futures (arguments) and its ``after`` names as ``wait_for``, so a runner that can (Prefect) draws the
edges and runs independent branches at once: chunkers do not wait for each other, and a BM25 config waits for its
chunks only. Stages are listed wave by wave (chunks, BM25 configs, query vectors, document vectors, indexes, dense
configs), always after their upstreams, so a bounded thread pool that takes them in order never waits on a stage
queued behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ragbench.config import RunConfig
from ragbench.sweep.runner import StageFuture, UpstreamFailed, submit

#: the name of the load stage's output (submitted before the graph: the dataset is needed to plan it)
DATASET = "dataset"


@dataclass(frozen=True)
class Stage:
    """One node of the graph: the runner calls ``fn(**params, **{param: <output named inputs[param]>})`` as a
    task called ``name``, after the stages whose outputs ``after`` names; its result is the output ``output``."""

    name: str
    fn: Callable[..., Any]
    output: str
    inputs: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Graph:
    """The stages in submission order; per config id the chain of outputs its outcome depends on (its chunks,
    vectors, collections, query vectors, evaluation, record: the first that failed says why); ``order``: every
    ``(chunker index, config)`` in chunker-then-config order; ``embeddings``: the outputs that computed vectors."""

    stages: tuple[Stage, ...]
    chains: Mapping[str, tuple[str, ...]]
    order: tuple[tuple[int, RunConfig], ...]
    embeddings: tuple[str, ...]


def execute(stages: Iterable[Stage], runner, done: Mapping[str, StageFuture],
            then: Callable[[Stage, dict[str, StageFuture]], None] | None = None) -> dict[str, StageFuture]:
    """Submit each stage to ``runner`` in order, its inputs and ``after`` resolved to the futures of the stages
    named (``done``: outputs submitted before); ``then(stage, futures)`` runs after each submission. Returns every
    output's future."""
    futures = dict(done)
    for stage in stages:
        kwargs = {**stage.params, **{param: futures[name] for param, name in stage.inputs.items()}}
        futures[stage.output] = submit(runner, stage.name, stage.fn, wait_for=[futures[n] for n in stage.after],
                                       **kwargs)
        if then is not None:
            then(stage, futures)
    return futures


def outcome(chain: list[StageFuture]):
    """The value at the end of a chain of stages, or the error of the first stage that failed (a stage that did
    not run because an upstream failed says only that)."""
    try:
        return chain[-1].result()
    except Exception as e:
        for future in chain:
            try:
                future.result()
            except UpstreamFailed:
                continue
            except Exception as cause:
                raise cause from None
        raise e


@dataclass(frozen=True)
class StageFns:
    """What the graph's stages call: ``chunk(chunker)``, ``embed_queries(emb)``, ``embed_documents(chunker_index,
    chunks, emb)``, ``index(chunker_index, emb, index_spec, chunks, sparse)``, ``evaluate(chunker_index, run_config,
    chunks, collection=, query_vectors=, hybrid_collection=)`` and ``record(position, run_config, evaluated)``."""

    chunk: Callable[..., Any]
    embed_queries: Callable[..., Any]
    embed_documents: Callable[..., Any]
    index: Callable[..., Any]
    evaluate: Callable[..., Any]
    record: Callable[..., Any]


def sweep_graph(configs: list[RunConfig], chunkers: tuple, fns: StageFns) -> Graph:
    """The stages that evaluate ``configs`` (the sweep's ``chunkers`` give each its chunker index): document
    embeddings, collections and dense configs are submitted in the order of ``configs``; ``order`` (the positions
    that break ties between equal scores) stays chunker by chunker."""
    order = tuple((i, c) for i, ch in enumerate(chunkers) for c in configs if c.chunker == ch)
    stages = [Stage(f"chunk {chunkers[i].name or chunkers[i].explain()}", fns.chunk, f"chunks/{i}",
                    params={"chunker": chunkers[i]}, after=(DATASET,)) for i in dict.fromkeys(i for i, _ in order)]
    chains: dict[str, tuple[str, ...]] = {}

    def evaluate(position: int, i: int, c: RunConfig, inputs: dict[str, str], upstream: tuple[str, ...]) -> None:
        evaluated, recorded = f"evaluated/{c.config_id}", f"recorded/{c.config_id}"
        stages.append(Stage(f"evaluate {c.labels}", fns.evaluate, evaluated, {"chunks": f"chunks/{i}", **inputs},
                            {"chunker_index": i, "run_config": c}))
        stages.append(Stage(f"record {c.labels}", fns.record, recorded, {"evaluated": evaluated},
                            {"position": position, "run_config": c}))
        chains[c.config_id] = (f"chunks/{i}", *upstream, evaluated, recorded)

    for position, (i, c) in enumerate(order):
        if c.embedder is None:
            evaluate(position, i, c, {}, ())
    embedders = {c.embedder.spec_id: c.embedder for _, c in order if c.embedder is not None}
    stages += [Stage(f"embed queries × {emb.label}", fns.embed_queries, f"queries/{key}", params={"emb": emb},
                     after=(DATASET,)) for key, emb in embedders.items()]
    # embeddings, collections and dense configs in the order of ``configs`` (a budget's puts the cheapest pair's
    # first), not chunker by chunker: a pool that takes stages as submitted then spends the night in that order
    chunker_of = {c.config_id: i for i, c in order}
    position_of = {c.config_id: position for position, (_, c) in enumerate(order)}
    dense = [(chunker_of[c.config_id], c) for c in configs if c.embedder is not None and c.config_id in chunker_of]
    first: dict[tuple[int, str], RunConfig] = {}  # per chunker × embedder, the config its collection follows
    sparse_first: dict[tuple[int, str], RunConfig] = {}
    for i, c in dense:
        first.setdefault((i, c.embedder.spec_id), c)
        if c.retriever.uses_sparse_collection:
            sparse_first.setdefault((i, c.embedder.spec_id), c)
    stages += [Stage(f"embed {c.labels.chunker} × {c.embedder.label}", fns.embed_documents, f"vectors/{i}/{e}",
                     {"chunks": f"chunks/{i}"}, {"chunker_index": i, "emb": c.embedder}) for (i, e), c in first.items()]
    for kind, firsts in (("collection", first), ("hybrid", sparse_first)):
        stages += [Stage(f"index {c.labels.chunker} × {c.embedder.label}{' + BM25' if kind == 'hybrid' else ''}",
                         fns.index, f"{kind}/{i}/{e}", {"chunks": f"chunks/{i}"},
                         {"chunker_index": i, "emb": c.embedder, "index_spec": c.index, "sparse": kind == "hybrid"},
                         after=(f"vectors/{i}/{e}",)) for (i, e), c in firsts.items()]
    for i, c in dense:
        e = c.embedder.spec_id
        inputs = {"collection": f"collection/{i}/{e}", "query_vectors": f"queries/{e}"}
        if c.retriever.uses_sparse_collection:
            inputs["hybrid_collection"] = f"hybrid/{i}/{e}"
        # the chain names the vectors first: a failed embedding is the cause its index would only repeat
        evaluate(position_of[c.config_id], i, c, inputs, (f"vectors/{i}/{e}", *inputs.values()))
    embeddings = (*(f"queries/{e}" for e in embedders), *(f"vectors/{i}/{e}" for i, e in first))
    return Graph(tuple(stages), chains, order, embeddings)
