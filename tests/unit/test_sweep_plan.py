"""The sweep's decision (run, reuse, skip, and why) on its own: configs and what a store holds in, a plan out;
and its graph of stages, declared as data and executed by the plain-Python runner.

No model is loaded, no store or index opened: the configs come from a sweep file, the evaluation keys and the
store's answer are written here, and the stage functions say what they were called with.
"""

from __future__ import annotations

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.sweep.decide import (COPY_FAILED, DONE, FRESH, NOT_STORED, REUSED, SPOOLED, UNREADABLE, StoreHolds,
                                   decide)
from ragbench.sweep.graph import DATASET, StageFns, execute, outcome, sweep_graph
from ragbench.sweep.runner import Finished, LocalRunner, UpstreamFailed


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    path = write_config(tmp_path_factory.mktemp("plan") / "plan.yaml", f"""name: plan
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
retrievers: [{{kind: bm25}}, {{kind: bm25, k1: 0.9}}]
output: {{mlflow: false}}
""")
    configs = load_config(path).expand()
    assert len(configs) == 4
    return configs


def _keys(configs):
    return {c.config_id: f"key-{i}" for i, c in enumerate(configs)}


def test_a_new_sweep_runs_every_config_that_no_store_holds(configs):
    plan = decide(configs, _keys(configs), StoreHolds("s2"))
    assert plan.todo == configs and not plan.reused and not plan.done and not plan.stored
    assert {d.reason for d in plan.decisions} == {NOT_STORED}
    assert plan.eval_keys == _keys(configs)


def test_resume_skips_what_this_sweep_finished_and_reuses_what_others_did(configs):
    a, b, c, d = (x.config_id for x in configs)
    holds = StoreHolds("s2", {a: ("s2", "s2"), b: ("s1", "s0"), d: ("s2", "s1")})
    plan = decide(configs, _keys(configs), holds)
    assert [x.action for x in plan.decisions] == ["skip", "reuse", "run", "skip"]
    assert plan.todo == [configs[2]]
    assert plan.done == {a, d}
    assert plan.reused == {b: "s0"}                           # named after the sweep that evaluated it
    assert plan.stored == {a: ("s2", "s2"), b: ("s1", "s0"), d: ("s2", "s1")}  # rows copied from "s1", not "s0"
    assert [x.reason for x in plan.decisions] == [DONE, REUSED, NOT_STORED, DONE]
    assert plan.explain()[1] == f"{configs[1].labels.text}: reuse from s0 ({REUSED})"


def test_fresh_and_an_unreadable_store_run_everything_and_say_why(configs):
    held = {c.config_id: ("s1", "s1") for c in configs}
    fresh = decide(configs, _keys(configs), StoreHolds("s2", held, fresh=True))
    assert fresh.todo == configs and {d.reason for d in fresh.decisions} == {FRESH}
    blind = decide(configs, _keys(configs), StoreHolds("s2", held, readable=False))
    assert blind.todo == configs and {d.reason for d in blind.decisions} == {UNREADABLE}


def test_a_spooled_start_reuses_nothing_but_still_skips_its_own_results(configs):
    a, b = configs[0].config_id, configs[1].config_id
    plan = decide(configs, _keys(configs), StoreHolds("s2", {a: ("s2", "s2"), b: ("s1", "s1")}, spooled=True))
    assert plan.done == {a} and not plan.reused and plan.blocked(SPOOLED) == 1
    assert plan.todo == configs[1:]


def test_a_failed_copy_turns_reuse_into_runs_and_keeps_the_skips(configs):
    a, b, c = (x.config_id for x in configs[:3])
    plan = decide(configs, _keys(configs), StoreHolds("s2", {a: ("s2", "s2"), b: ("s1", "s1"), c: ("s0", "s0")}))
    again = plan.without_reuse(COPY_FAILED)
    assert plan.reused == {b: "s1", c: "s0"}                  # the original is unchanged (a frozen value)
    assert not again.reused and again.done == {a} and again.blocked(COPY_FAILED) == 2
    assert again.todo == configs[1:] and again.stored == {a: ("s2", "s2")}


# ------------------------------------------------------------ the graph, declared as data
@pytest.fixture(scope="module")
def dense_configs(tmp_path_factory):
    path = write_config(tmp_path_factory.mktemp("graph") / "graph.yaml", f"""name: graph
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}, {{kind: hybrid, engine: qdrant}}]
output: {{mlflow: false}}
""")
    cfg = load_config(path)
    return cfg, cfg.expand()


def _calls(log: list):
    """Stage functions that say what they were called with (no model: the graph's wiring is what is tested)."""
    def fn(kind):
        def call(**kw):
            log.append((kind, kw))
            if kind == "chunk":
                return f"chunks:{kw['chunker'].kind}"
            if kind == "embed_documents" and kw["chunks"] == "chunks:fixed":
                raise RuntimeError("no vectors for fixed chunks")
            return f"{kind}({','.join(f'{k}={v}' for k, v in sorted(kw.items()) if isinstance(v, str))})"
        return call

    return StageFns(*(fn(k) for k in ("chunk", "embed_queries", "embed_documents", "index", "evaluate", "record")))


def test_the_graph_is_data_named_inputs_in_waves_and_chains_per_config(dense_configs):
    cfg, configs = dense_configs
    graph = sweep_graph(configs, cfg.chunkers, _calls([]))
    kinds = [s.output.split("/")[0] for s in graph.stages]
    # waves: chunks, BM25 configs, query vectors, document vectors, indexes, hybrid indexes, dense configs
    assert kinds == (["chunks"] * 2 + ["evaluated", "recorded"] * 2 + ["queries"] + ["vectors"] * 2
                     + ["collection"] * 2 + ["hybrid"] * 2 + ["evaluated", "recorded"] * 4)
    outputs = [s.output for s in graph.stages]
    for position, stage in enumerate(graph.stages):  # every input is the output of a stage listed before it
        assert all(outputs.index(name) < position for name in (*stage.inputs.values(), *stage.after)
                   if name != DATASET), stage.name
    bm25 = next(s for s in graph.stages if s.name.startswith("evaluate") and "bm25" in s.name.lower())
    assert dict(bm25.inputs) == {"chunks": "chunks/0"}                   # a BM25 config waits for its chunks only
    hybrid = next(c for c in configs if c.retriever.uses_sparse_collection and c.chunker == cfg.chunkers[1])
    e = hybrid.embedder.spec_id
    assert graph.chains[hybrid.config_id] == ("chunks/1", f"vectors/1/{e}", f"collection/1/{e}", f"queries/{e}",
                                              f"hybrid/1/{e}", f"evaluated/{hybrid.config_id}",
                                              f"recorded/{hybrid.config_id}")
    index = next(s for s in graph.stages if s.output == f"hybrid/1/{e}")
    assert index.after == (f"vectors/1/{e}",) and index.params["sparse"] is True
    assert graph.embeddings == (f"queries/{e}", f"vectors/0/{e}", f"vectors/1/{e}")
    assert [c for _, c in graph.order] == [c for ch in cfg.chunkers for c in configs if c.chunker == ch]


def test_embeddings_and_dense_configs_are_submitted_in_the_order_given_positions_stay_by_chunker(dense_configs):
    """A budget orders the work cheapest pair first (:func:`ragbench.sweep.budget.budget_order`); the graph must
    submit it so, or a pool taking stages in turn spends the night chunker by chunker."""
    cfg, configs = dense_configs
    reordered = [c for c in configs if c.embedder is None] + [c for c in reversed(configs) if c.embedder is not None]
    graph = sweep_graph(reordered, cfg.chunkers, _calls([]))
    vectors = [s.output for s in graph.stages if s.output.startswith("vectors/")]
    e = next(c for c in configs if c.embedder is not None).embedder.spec_id
    assert vectors == [f"vectors/1/{e}", f"vectors/0/{e}"]  # the fixed chunker's pair first, as given
    dense = [s.params["run_config"] for s in graph.stages
             if s.output.startswith("evaluated/") and s.params["run_config"].embedder is not None]
    assert dense == [c for c in reversed(configs) if c.embedder is not None]
    assert [i for i, _ in graph.order] == sorted(i for i, _ in graph.order)  # tie-break positions: by chunker


def test_executed_by_the_local_runner_a_failed_branch_stops_there_and_names_its_cause(dense_configs):
    cfg, configs = dense_configs
    log: list = []
    graph = sweep_graph(configs, cfg.chunkers, _calls(log))
    futures = execute(graph.stages, LocalRunner(), {DATASET: Finished("ds")})
    ran = [kind for kind, _ in log]
    assert ran.count("chunk") == 2 and ran.count("embed_documents") == 2
    assert ran.count("index") == 2 and ran.count("evaluate") == 4           # the fixed chunker's dense branch: none
    for i, c in graph.order:
        chain = [futures[name] for name in graph.chains[c.config_id]]
        if c.embedder is not None and i == 1:
            with pytest.raises(RuntimeError, match="no vectors for fixed chunks"):  # the cause, not "upstream"
                outcome(chain)
            assert isinstance(futures[graph.chains[c.config_id][-1]].error, UpstreamFailed)
        else:
            assert outcome(chain).startswith("record(")
    evaluated = [kw for kind, kw in log if kind == "evaluate" and kw["run_config"].embedder is not None]
    assert evaluated and all(kw["chunks"].startswith("chunks:") and kw["collection"].startswith("index(") for kw in evaluated)


def test_run_sweep_takes_its_options_as_one_frozen_value_or_as_keywords(configs, tmp_path):
    import dataclasses

    from ragbench.core.settings import Settings
    from ragbench.sweep import SweepOptions, run_sweep

    options = SweepOptions(fresh=True, home=tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.fresh = False  # type: ignore[misc]
    with pytest.raises(TypeError, match="fast_fail"):  # a misspelt option fails before any work
        run_sweep(load_config(write_config(tmp_path / "o.yaml", f"""name: o
dataset: {{path: {DEMO}}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
""")), Settings(home=tmp_path / "home"), options, fast_fail=True)
    assert not (tmp_path / "home").exists()
