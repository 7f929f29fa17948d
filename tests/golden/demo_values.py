"""Golden values of the bundled demo sweep (configs/demo.yaml): read out of a home's results.duckdb, written to
tests/golden/demo_values.json with the component versions they were made with, and compared by
tests/integration/test_golden_values.py.

What is pinned, per config: every per-query value (``query_metrics``), every config-level mean (``config_metrics``)
and chunk statistic, and a digest of the rankings (query, rank, chunk id). Wall-clock and on-disk cost measures
(latency, embed seconds, bytes) are measured again on every run and left out; so are the ANN fidelity timings.

Regenerate after a deliberate change (with the component's version bumped)::

    python -m ragbench.cli sweep configs/demo.yaml --orchestrator local --home /tmp/demo-home
    PYTHONPATH=. python tests/golden/demo_values.py /tmp/demo-home/results.duckdb
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from pathlib import Path

import duckdb

GOLDEN = Path(__file__).with_name("demo_values.json")
DEMO = Path(__file__).parents[2] / "configs" / "demo.yaml"
#: measured again on every run (time, bytes on disk): never pinned
VOLATILE = re.compile(r"latency|_ms|seconds|_bytes$")
#: a measure key's rank measure: ``ndcg_at_10``, ``chunk_ndcg_at_10``, ``heldout_...``, ``unfiltered_...``
RANK_KEY = re.compile(r"(?:heldout_)?(?:unfiltered_)?(?:chunk_)?([a-z]+)_at_\d+")


def _number(v: float | None) -> float | None:
    """NaN (an unlabelled query) as null; 12 significant digits (more than any real change needs, shorter file)."""
    return None if v is None or math.isnan(v) else float(f"{v:.12g}")


def read_values(db: Path, sweep_id: str | None = None) -> dict[str, dict]:
    """``config name -> {config_id, per_query: {measure: {query_id: value}}, config: {measure: mean},
    chunk_stats: {stat: value}, rankings: digest}`` of one sweep (the newest when ``sweep_id`` is None)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        if sweep_id is None:
            sweep_id = con.execute("SELECT sweep_id FROM sweeps ORDER BY started_at DESC LIMIT 1").fetchone()[0]
        out: dict[str, dict] = {}
        ids = {}
        for config_id, name in con.execute("SELECT config_id, name FROM configs WHERE sweep_id = ? AND status = "
                                           "'finished' ORDER BY name", [sweep_id]).fetchall():
            ids[config_id] = name
            out[name] = {"config_id": config_id, "per_query": {}, "config": {}, "chunk_stats": {}}
        for c, q, m, v in con.execute("SELECT config_id, query_id, measure, value FROM query_metrics WHERE "
                                      "sweep_id = ? ORDER BY config_id, measure, query_id", [sweep_id]).fetchall():
            if not VOLATILE.search(m):
                out[ids[c]]["per_query"].setdefault(m, {})[q] = _number(v)
        for c, m, v in con.execute("SELECT config_id, measure, mean FROM config_metrics WHERE sweep_id = ? "
                                   "ORDER BY config_id, measure", [sweep_id]).fetchall():
            if not VOLATILE.search(m):
                out[ids[c]]["config"][m] = _number(v)
        for c, s, v in con.execute("SELECT config_id, stat, value FROM chunk_stats WHERE sweep_id = ? "
                                   "ORDER BY config_id, stat", [sweep_id]).fetchall():
            out[ids[c]]["chunk_stats"][s] = _number(v)
        for c, digest in con.execute(
                "SELECT config_id, sha256(string_agg(query_id || ' ' || rank || ' ' || chunk_id, '\n' "
                "ORDER BY query_id, rank)) FROM rankings WHERE sweep_id = ? GROUP BY config_id",
                [sweep_id]).fetchall():
            out[ids[c]]["rankings"] = digest
        return out
    finally:
        con.close()


def depends_on(name: str, what: str, measure: str | None, versions: dict[str, dict[str, int]]) -> dict[str, int]:
    """The components (``label -> version``) one pinned value of config ``name`` depends on: its chunker,
    embedder, retriever, reranker and rewrite (chunk statistics: its chunker and embedder only); for a rank
    measure's value that measure (``measure ndcg``), for any other measure or statistic the shared evaluation code
    (``evaluation``). ``what``: ``per_query``, ``config``, ``chunk_stats`` or ``rankings``; ``versions``: the
    file's (or the code's) ``configs`` (components per config), ``measures`` and ``evaluation``."""
    deps = dict(versions["configs"][name])
    if what == "rankings":
        return deps
    if what == "chunk_stats":
        deps = {c: v for c, v in deps.items() if c.startswith(("chunker ", "embedder"))}
    rank = RANK_KEY.fullmatch(measure or "")
    if rank and rank.group(1) in versions["measures"]:
        deps[f"measure {rank.group(1)}"] = versions["measures"][rank.group(1)]
    else:
        deps["evaluation"] = versions["evaluation"]
    return deps


def current_versions() -> dict:
    """The versions the code declares now, for every config of the demo sweep, its measures and the evaluation."""
    from ragbench.config import load_config
    from ragbench.evaluation.measures import RANK_MEASURES
    from ragbench.sweep.evaluate import EVALUATION_VERSION, component_versions, measure_versions

    cfg = load_config(DEMO)
    return {"evaluation": EVALUATION_VERSION, "measures": measure_versions(RANK_MEASURES),
            "configs": {c.name: component_versions(c) for c in cfg.expand()}}


def write(db: Path) -> None:
    """Write :data:`GOLDEN` from the demo sweep stored in ``db``, with the versions the code declares now."""
    values = read_values(db)
    versions = current_versions()
    assert set(values) == set(versions["configs"]), "the database does not hold the demo sweep's configs"
    body = {"about": "golden values of configs/demo.yaml; see tests/golden/demo_values.py",
            "versions": versions, "values": values}
    GOLDEN.write_text(json.dumps(body, indent=0, sort_keys=True) + "\n")
    print(f"{GOLDEN}: {len(values)} configs, "
          f"{sum(len(q) for v in values.values() for q in v['per_query'].values())} per-query values, "
          f"sha256 {hashlib.sha256(GOLDEN.read_bytes()).hexdigest()[:12]}")


if __name__ == "__main__":
    write(Path(sys.argv[1]))
