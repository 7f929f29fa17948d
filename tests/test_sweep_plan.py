"""The sweep's decision (run, reuse, skip, and why) on its own: configs and what a store holds in, a plan out.

No model is loaded, no store or index opened: the configs come from a sweep file, the evaluation keys and the
store's answer are written here.
"""

from __future__ import annotations

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.sweep.decide import (COPY_FAILED, DONE, FRESH, NOT_STORED, REUSED, SPOOLED, UNREADABLE, StoreHolds,
                                   decide)


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
    assert plan.explain()[1] == f"{configs[1].name}: reuse from s0 ({REUSED})"


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
