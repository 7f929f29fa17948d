"""Behaviour is pinned per component: every value the demo sweep stores (per query and per config, chunk statistics,
rankings; tests/golden/demo_values.json, first written from the code before components had versions) is what the
code computes now, unless a component it depends on (the config's chunker, embedder, retriever, reranker, rewrite,
the rank measure, or the shared evaluation code) declares a new version. A value that changes while those versions
did not fails here, naming the components to bump; stored results are reused by version, so such a change would
otherwise serve stale numbers.
"""

from __future__ import annotations

import copy
import json
import math

from golden.demo_values import GOLDEN, current_versions, depends_on, read_values

SECTIONS = ("per_query", "config", "chunk_stats")


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def changed_values(golden: dict, now: dict) -> list[tuple[str, str, str | None]]:
    """``(config, section, measure)`` of every pinned value that differs in ``now`` (or is gone)."""
    out = []
    for name, pinned in golden.items():
        got = now.get(name)
        if got is None:
            out.append((name, "config", None))
            continue
        if pinned.get("rankings") != got.get("rankings"):
            out.append((name, "rankings", None))
        for section in SECTIONS:
            for measure, value in pinned[section].items():
                new = got[section].get(measure)
                if section == "per_query":
                    differs = new is None or set(new) != set(value) or not all(_same(v, new[q])
                                                                               for q, v in value.items())
                else:
                    differs = measure not in got[section] or not _same(value, new)
                if differs:
                    out.append((name, section, measure))
    return out


def unversioned_changes(body: dict, now: dict, versions_now: dict) -> str | None:
    """Why the changed values of ``now`` are not covered by a version bump (None when every one is): the changed
    values whose components all kept their pinned version, and the components common to them."""
    bad = [(name, section, m) for name, section, m in changed_values(body["values"], now)
           if name not in versions_now["configs"]
           or depends_on(name, section, m, body["versions"]) == depends_on(name, section, m, versions_now)]
    if not bad:
        return None
    common = None
    for name, section, m in bad:
        deps = set(depends_on(name, section, m, body["versions"])) if name in body["versions"]["configs"] else set()
        common = deps if common is None else common & deps
    shown = "\n".join(f"  {name}: {section} {m or ''}" for name, section, m in bad[:12])
    return (f"{len(bad)} value(s) of the demo sweep changed while the versions of the components they depend on did "
            f"not:\n{shown}\ncomponents common to every changed value: {', '.join(sorted(common or ())) or 'none'}. "
            "Bump the version of the component you changed (Spec.version on its class, rank_measure(..., "
            "version=N), or EVALUATION_VERSION for shared evaluation code), then regenerate "
            f"{GOLDEN.name} with tests/golden/demo_values.py.")


def test_the_demo_sweep_stores_the_pinned_values(demo_sweep):
    body = json.loads(GOLDEN.read_text())
    now = read_values(demo_sweep.home / "results.duckdb", demo_sweep.sweep_id)
    problem = unversioned_changes(body, now, current_versions())
    assert problem is None, problem
    assert sum(len(q) for v in now.values() for q in v["per_query"].values()) >= 53720


def test_a_changed_value_names_the_component_and_a_version_bump_accepts_it():
    body = json.loads(GOLDEN.read_text())
    now = copy.deepcopy(body["values"])
    versions = copy.deepcopy(body["versions"])
    assert unversioned_changes(body, now, versions) is None
    # one measure's values move in every config: the measure is named, not the configs' components
    for values in now.values():
        q = next(iter(values["per_query"]["mrr_at_5"]))
        values["per_query"]["mrr_at_5"][q] = 0.123
    problem = unversioned_changes(body, now, versions)
    assert problem is not None and "20 value(s)" in problem
    assert "components common to every changed value: measure mrr." in problem
    versions["measures"]["mrr"] = 2
    assert unversioned_changes(body, now, versions) is None
    # a retriever's rankings move in its configs only: the retriever kind is what they share
    bm25 = [name for name in now if "bm25" in name]
    for name in bm25:
        now[name]["rankings"] = "moved"
    problem = unversioned_changes(body, now, versions)
    assert problem is not None and f"{len(bm25)} value(s)" in problem
    assert "common to every changed value: retriever bm25." in problem
    for name in bm25:
        versions["configs"][name]["retriever bm25"] = 2
    assert unversioned_changes(body, now, versions) is None
    # a value computed by shared evaluation code (no component of its own) asks for EVALUATION_VERSION
    name = bm25[0]
    now[name]["chunk_stats"]["spans_split"] = 0.5
    problem = unversioned_changes(body, now, versions)
    assert problem is not None and "evaluation" in problem.split("common to every changed value:")[1]

