"""Cost columns and the Pareto front: the dominance rule on hand-computed fronts (ties, duplicates, missing
values), then a real demo sweep whose configs carry plausible costs and whose report (terminal, markdown, HTML,
CSV) and MLflow parent run name the Pareto front and the cheapest config tied with the best."""

from __future__ import annotations

import math

import polars as pl
import pytest
from conftest import DEMO, write_config

from ragbench.reporting.pareto import cheapest_tied, pareto_front

NAN = float("nan")


def _points(rows):
    return pl.DataFrame(rows, schema={"id": pl.String, "q": pl.Float64, "ms": pl.Float64, "mem": pl.Float64},
                        orient="row")


def _front(rows) -> set[str]:
    df = _points(rows)
    return {i for i, on in zip(df["id"], pareto_front(df, ["q"], ["ms", "mem"])) if on}


def test_pareto_front_by_hand():
    rows = [("A", 0.8, 10, 100), ("B", 0.8, 10, 100),  # duplicates: neither dominates the other
            ("C", 0.7, 5, 100),                         # worse quality, faster: on the front
            ("D", 0.7, 20, 200),                        # A is better on all three: off
            ("E", 0.9, 50, 50),                         # best quality and least memory: on
            ("F", 0.95, NAN, 10)]                       # no latency: cannot be compared, dominates nothing
    assert _front(rows) == {"A", "B", "C", "E"}
    # equal on two objectives and better on the third dominates; equal on all does not
    assert _front([("G", 0.8, 10, 100), ("H", 0.8, 10, 101)]) == {"G"}
    assert _front([("G", 0.8, 10, 100), ("H", 0.8, 10, 100)]) == {"G", "H"}
    # a trade-off on every axis: everyone is on the front
    assert _front([("x", 0.9, 30, 30), ("y", 0.8, 20, 40), ("z", 0.7, 10, 50)]) == {"x", "y", "z"}
    # one objective: only the best (and its equals)
    df = _points([("a", 0.5, 0, 0), ("b", 0.7, 0, 0), ("c", 0.7, 0, 0)])
    assert pareto_front(df, ["q"]) == [False, True, True]
    with pytest.raises(ValueError):
        pareto_front(df)


def test_cheapest_tied_is_the_fastest_then_smallest_of_the_tied():
    table = pl.DataFrame({"config_id": ["best", "t1", "t2", "worse"], "primary": [0.8, 0.78, 0.77, 0.5],
                          "latency_p95_ms": [9.0, 3.0, 3.0, 1.0], "memory_bytes": [10.0, 50.0, 20.0, 1.0],
                          "tied_with_best": [True, True, True, False]})
    assert cheapest_tied(table) == "t2"  # t1 and t2 equally fast, t2 smaller; "worse" is not tied
    assert cheapest_tied(table.with_columns(latency_p95_ms=pl.lit(NAN))) is None


SWEEP = f"""name: cost
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: hybrid}}]
metrics: {{cutoffs: [1, 5, 10]}}
"""


def test_demo_sweep_has_costs_and_the_report_names_the_cheapest_tied(tmp_path, settings):
    from mlflow.tracking import MlflowClient

    from ragbench.config import load_config
    from ragbench.reporting.report import leaderboard_markdown, leaderboard_rich, render_html, report_text
    from ragbench.results.store import ResultStore
    from ragbench.results.tracking import default_tracking_uri
    from ragbench.sweep import run_sweep
    from ragbench.sweep.publish import publish_sweep

    result = run_sweep(load_config(write_config(tmp_path / "cost.yaml", SWEEP)), settings)
    assert result.n_failed == 0
    costs = {o.spec["retriever"]["kind"]: o.metrics for o in result.outcomes}
    for kind, m in costs.items():
        assert m["latency_p95_ms"] >= m["latency_p50_ms"] > 0, kind
        assert m["index_bytes"] > 0 and m["memory_bytes"] > 0, kind
    assert costs["bm25"]["vector_bytes"] == 0 and costs["bm25"]["embed_seconds"] == 0
    n_docs = 36  # whole documents of the demo corpus: one chunk (one vector) each
    assert costs["hybrid"]["vector_bytes"] == n_docs * 384 * 4  # all-MiniLM-L6-v2: 384 dimensions
    assert costs["hybrid"]["memory_bytes"] == costs["hybrid"]["vector_bytes"] + costs["bm25"]["memory_bytes"]
    assert costs["hybrid"]["index_bytes"] > costs["bm25"]["index_bytes"]  # the collection on top of bm25s
    assert costs["hybrid"]["embed_seconds"] > 0

    published = publish_sweep(result.sweep_id, settings, out_dir=tmp_path / "report")
    rep = published.report
    store = ResultStore(settings.home / "results.duckdb")
    tied = set(rep.tied_with_best) | {rep.best}
    stored = {cid: store.config_means(result.sweep_id, cid) for cid in tied}
    expected = min(tied, key=lambda c: (stored[c]["latency_p95_ms"], stored[c]["memory_bytes"]))
    # hybrid (MiniLM + BM25) is the best; BM25 alone is tied with it (not significantly worse on 32 queries) and
    # far faster (no query to embed with a transformer): the report names BM25, not the best
    assert expected != rep.best and rep.label_of(expected).endswith("BM25")
    label = rep.label_of(expected)
    line = f"Cheapest config tied with the best: {label}"
    assert line in leaderboard_markdown(rep)
    assert line in render_html(rep, {}) and "id='cost'" in render_html(rep, {})
    from rich.console import Console

    console = Console(width=400, record=True)
    console.print(leaderboard_rich(rep, width=400))
    assert line in console.export_text()
    csv = pl.read_csv(report_text(rep, "csv").encode())
    assert csv.filter(pl.col("cheapest_tied_with_best"))["config_id"].to_list() == [expected]
    assert not math.isnan(csv["latency_p95_ms"].min())

    client = MlflowClient(tracking_uri=default_tracking_uri(settings))
    tags = client.get_run(rep.mlflow_run_id).data.tags
    assert tags["ragbench.cheapest_tied_with_best"] == label
    assert label in tags["ragbench.pareto_front"]
    assert "report/pareto.json" in {a.path for a in client.list_artifacts(rep.mlflow_run_id, "report")}


def test_embed_seconds_is_the_embed_stages_own_rate_when_it_encoded_the_chunks(tmp_path, settings, monkeypatch):
    """A sweep that encodes the chunks itself (here 36 >= EMBED_SAMPLE) prices ``embed_seconds`` at the model time
    it measured (no second encode of a sample); a fresh sweep whose vectors all come from the cache estimates on a
    sample."""
    from ragbench.config import load_config
    from ragbench.sweep import run_sweep, work

    sampled = []
    estimate = work.embed_seconds_estimate
    monkeypatch.setattr(work, "embed_seconds_estimate",
                        lambda *a, **k: sampled.append(1) or estimate(*a, **k))
    cfg = load_config(write_config(tmp_path / "rate.yaml", f"""name: rate
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: dense, exact: true}}]
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
"""))
    cold = run_sweep(cfg, settings)
    (docs,) = [s for s in cold.embed_stats if s.requested == 36]  # the 36 whole documents (queries apart)
    assert docs.computed == 36 and docs.encode_seconds > 0 and not sampled
    assert cold.outcomes[0].metrics["embed_seconds"] == pytest.approx(docs.encode_seconds)
    again = run_sweep(cfg, settings, fresh=True)
    assert all(s.computed == 0 for s in again.embed_stats) and sampled == [1]
    assert again.outcomes[0].metrics["embed_seconds"] > 0
