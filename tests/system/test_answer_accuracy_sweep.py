"""End-to-end answer accuracy inside a sweep, against the real local llama-server and the packaged SmolLM2 model
(built and fetched by `make llm`, which `make test` runs first)."""

from __future__ import annotations

from pathlib import Path

import duckdb
from conftest import ROOT, needs_llm, write_config

from ragbench.config import load_config
from ragbench.sweep import run_sweep

SQUAD = ROOT / "tests" / "fixtures" / "squad_small.json"



E2E = f"""name: e2e
dataset: {{format: squad, path: {SQUAD}, squad_documents: article, queries: all}}
chunkers: [{{kind: sentences, window: 2}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
generation:
  model: {{model}}
  sample: 5
  context: {{{{k: 3, token_budget: 800}}}}
  k_sweep: {{{{ks: [1, 3]}}}}
metrics: {{{{cutoffs: [1, 3, 10]}}}}
"""


def _llama_pids() -> set[int]:
    pids = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if b"llama-server" in (p / "cmdline").read_bytes():
                    pids.add(int(p.name))
            except OSError:
                pass
    return pids


@needs_llm
def test_sweep_answers_grades_and_diagnoses_with_a_real_llm(home, settings, tmp_path, monkeypatch):
    before = _llama_pids()
    cfg = load_config(write_config(tmp_path / "e2e.yaml", E2E.replace("{model}", "smollm2-135m")
                                   .replace("{{", "{").replace("}}", "}")))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    for o in result.outcomes:
        m = o.metrics
        for key in ("answer_em", "answer_f1", "answer_contains", "answer_accuracy", "answer_in_context@3"):
            assert 0 <= m[key] <= 1, key
        assert sum(m[k] for k in m if k.startswith("oracle_")) == 5  # one verdict per sampled query
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    rows = con.execute("SELECT count(*), count(DISTINCT config_id), count(verdict) FROM answers").fetchall()[0]
    assert rows == (10, 2, 10)
    verdicts = {v for (v,) in con.execute("SELECT DISTINCT verdict FROM answers").fetchall()}
    assert verdicts <= {"PASS", "RETRIEVAL_MISS_RANKING", "RETRIEVAL_MISS_REPRESENTATION", "CONTEXT_DILUTION",
                        "CONTEXT_BUDGET", "GENERATION_BUG"}
    ks = con.execute("SELECT k, recall FROM k_sweep ORDER BY k").fetchall()
    assert [k for k, _ in ks] == [1, 3] and ks[0][1] <= ks[1][1]  # recall grows with k
    con.close()
    assert _llama_pids() <= before  # the sweep stopped its server: no orphan

    # unchanged rerun: every config (answers and verdicts included) and the k sweep are reused; no LLM is started
    from ragbench.generation import stage

    def no_llm(self):
        raise AssertionError("a warm rerun started the LLM")
    monkeypatch.setattr(stage.Generator, "_start", no_llm)
    again = run_sweep(cfg, settings)
    assert all(o.reused_from == result.sweep_id for o in again.outcomes)
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    per_sweep = dict(con.execute("SELECT sweep_id, count(verdict) FROM answers GROUP BY 1").fetchall())
    assert per_sweep == {result.sweep_id: 10, again.sweep_id: 10}
    assert con.execute("SELECT k, recall FROM k_sweep WHERE sweep_id = ? ORDER BY k",
                       [again.sweep_id]).fetchall() == ks
    con.close()


@needs_llm
def test_a_server_that_cannot_start_fails_configs_clearly_and_leaves_nothing_running(home, settings, tmp_path):
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a model" * 100)
    before = _llama_pids()
    cfg = load_config(write_config(tmp_path / "bad.yaml", E2E.replace("{model}", str(garbage))
                                   .replace("{{", "{").replace("}}", "}")))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 2
    assert all("garbage.gguf" in o.error for o in result.outcomes)
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM configs WHERE status = 'failed'").fetchall()[0][0] == 2
    con.close()
    assert _llama_pids() <= before
