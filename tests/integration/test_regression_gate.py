"""`ragbench gate` on the demo set through the real CLI: BM25 on recursive chunks is promoted, then the same config
passes the gate (exit 0) and a crippled one (BM25 fetching a single chunk) fails it (exit 1), naming the probes that
regressed; bad input exits 2. Plus the probe builders on their own."""

from __future__ import annotations

import polars as pl
import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.data import load_dataset
from ragbench.data.spec import DatasetSpec
from ragbench.promotion.regression_gate import ORACLE_PREFIX, probe_set

SWEEP = f"""name: gate
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: recursive, size: 128, overlap: 0}}]
retrievers: [{{RETRIEVER}}]
metrics: {{cutoffs: [1, 5, 10]}}
output: {{mlflow: false}}
"""


def _yaml(tmp_path, name: str, retriever: str):
    return write_config(tmp_path / f"{name}.yaml", SWEEP.replace("{RETRIEVER}", retriever))


def _cli(*args, home):
    return CliRunner().invoke(app, [*args, "--home", str(home)])


@pytest.fixture(scope="module")
def promoted(tmp_path_factory):
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("gate")
    home = tmp / "home"
    good = _yaml(tmp, "good", "{kind: bm25}")
    assert run_sweep(load_config(good), Settings(home=home)).n_failed == 0
    res = _cli("promote", "latest", "1", home=home)
    assert res.exit_code == 0, res.output
    return tmp, home, good


def test_gate_passes_an_equal_candidate_and_fails_a_crippled_one(promoted):
    tmp, home, good = promoted
    res = _cli("gate", str(good), "--against", "production", home=home)
    assert res.exit_code == 0, res.output
    assert "gate passed" in res.output and "0 probe(s) passed by production now fail" in res.output

    crippled = _yaml(tmp, "crippled", "{kind: bm25, depth: 1}")  # one chunk per query: most relevant docs lost
    res = _cli("gate", str(crippled), home=home)
    assert res.exit_code == 1, res.output
    assert ": significantly worse" in res.output
    regressed = res.output.split("gate failed: regressed ")[1].split()
    regressed = [q.rstrip(",") for q in regressed]
    # q01's relevant document is at rank 2+ under BM25 on these chunks: lost at depth 1 (hit@10 pass -> fail)
    assert "q01" in regressed and "q01" in res.output.split("gate failed")[0]
    assert "pass → fail" in res.output
    # a probe lost is a regression on its own, whatever the paired test says (no p-value reaches 1e-9 here)
    res = _cli("gate", str(crippled), "--alpha", "1e-9", home=home)
    assert res.exit_code == 1, res.output
    assert ": significantly worse" not in res.output and "not significantly worse" in res.output and "pass → fail" in res.output and "pass → pass" not in res.output
    assert "q01" in res.output.split("gate failed: regressed ")[1]


def test_gate_refuses_bad_input_with_exit_2(promoted, tmp_path):
    tmp, home, good = promoted
    res = _cli("gate", str(good), "--against", "yesterday", home=home)
    assert res.exit_code == 2 and "only 'production'" in res.output
    grid = _yaml(tmp, "grid", "{kind: bm25}, {kind: bm25, depth: 1}")
    res = _cli("gate", str(grid), home=home)
    assert res.exit_code == 2 and "--config" in res.output
    res = _cli("gate", str(grid), "--config", "2", home=home)
    assert res.exit_code == 1, res.output  # the second config of the grid is the crippled one
    other = write_config(tmp / "other.yaml", SWEEP.replace("{RETRIEVER}", "{kind: bm25}")
                         .replace("queries: all", "queries: all, max_docs: 20"))
    res = _cli("gate", str(other), home=home)
    assert res.exit_code == 2 and "not the one production was promoted on" in res.output
    bad_probes = tmp_path / "probes.csv"
    bad_probes.write_text("question,quote\nWhat is NMB-4013?,this sentence is in no document at all\n")
    res = _cli("gate", str(good), "--probes", str(bad_probes), home=home)
    assert res.exit_code == 2 and "probes.csv" in res.output and "Traceback" not in res.output
    res = _cli("gate", str(good), home=tmp_path / "empty-home")
    assert res.exit_code == 2 and "production" in res.output


def test_probe_set_samples_labelled_queries_and_adds_oracle_probes():
    ds = load_dataset(DatasetSpec(path=str(DEMO), queries="all"))
    probes = probe_set(ds, n=10, seed=3)
    labelled = probes.queries.filter(~pl.col("query_id").str.starts_with(ORACLE_PREFIX))
    oracle = probes.queries.filter(pl.col("query_id").str.starts_with(ORACLE_PREFIX))
    assert labelled.height == 10 and probes_equal(probe_set(ds, n=10, seed=3), probes)
    assert labelled["query_id"].to_list() != probe_set(ds, n=10, seed=4).queries["query_id"].to_list()[:10]
    assert oracle.height == 10  # every demo query has an evidence span
    texts = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))
    for qid, text in oracle.select("query_id", "text").iter_rows():
        docs = probes.qrels.filter(pl.col("query_id") == qid)["doc_id"].to_list()
        assert len(docs) == 1 and " ".join(text.split()) in " ".join(texts[docs[0]].split())


def probes_equal(a, b) -> bool:
    return a.queries.equals(b.queries) and a.qrels.equals(b.qrels)
