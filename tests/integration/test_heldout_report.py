"""The held-out set where decisions are made: the report shows the winner's tuning and held-out scores with the drop
(the winner's curse), every config's held-out score beside its tuning one, and `promote` gates on the held-out
queries when the sweep has them."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone

import polars as pl
import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.promotion.promotion_gate import check_promotion_gate
from ragbench.reporting.report import build_report, leaderboard_markdown, render_html
from ragbench.reporting.terminal import leaderboard_text
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = f"""name: demo-holdout
dataset:
  path: {DEMO}
  queries: all
  holdout: 0.3
chunkers:
  - kind: whole
embedders:
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 5, 10]
  primary: ndcg@10
output:
  mlflow: false
"""


def test_report_shows_the_winners_tuning_and_held_out_scores_and_the_drop(tmp_path, settings, home):
    result = run_sweep(load_config(write_config(tmp_path / "demo.yaml", SWEEP)), settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    store = ResultStore(home / "results.duckdb")
    board = store.leaderboard(result.sweep_id).sort(["ndcg_at_10", "config_id"], descending=[True, False])
    winner = board.row(0, named=True)
    metrics = store.query_metrics(result.sweep_id, winner["config_id"])
    tuning = metrics.filter(pl.col("measure") == "ndcg_at_10")["value"].drop_nans()
    held = metrics.filter(pl.col("measure") == "heldout_ndcg_at_10")["value"].drop_nans()
    assert held.len() > 0 and tuning.len() > held.len()

    rep = build_report(store, result.sweep_id, n_resamples=500)
    w = rep.winner_heldout
    assert w is not None and w.config_id == winner["config_id"] == rep.best
    assert (w.tuning, w.heldout) == (pytest.approx(tuning.mean()), pytest.approx(held.mean()))
    assert w.drop == pytest.approx(tuning.mean() - held.mean())
    assert (w.n_tuning, w.n_heldout, w.n_configs) == (tuning.len(), held.len(), 2)
    numbers = (f"tuning {tuning.mean():.3f} ({tuning.len()} q) · held-out {held.mean():.3f} ({held.len()} q) · "
               f"drop (tuning − held-out) {tuning.mean() - held.mean():+.3f}")
    drop = tuning.mean() - held.mean()  # the sentence states it with its sign: a rise is no winner's curse
    curse = (f"Winner's curse: the best of 2 configs on {tuning.len()} tuning questions is optimistic" if drop > 0
             else f"The held-out score is {-drop:.3f} above the tuning score: no winner's curse shows")
    # every config's held-out score is a column right after the primary it was ranked on
    assert rep.measures[:2] == ("ndcg_at_10", "heldout_ndcg_at_10")
    md = leaderboard_markdown(rep)
    assert numbers in md and curse in md and "| heldout_ndcg_at_10 |" in md
    html = render_html(rep, {})
    assert "id='winner-heldout'" in html and numbers in html and "drop (tuning − held-out)" in html
    assert f"{held.mean():.4f}" in html.split("id='winner-heldout'")[1].split("</table>")[0]

    # the CLI report (terminal table) and the leaderboard printed after a sweep say the same
    out = CliRunner().invoke(app, ["report", "latest", "--no-mlflow", "--out", str(tmp_path / "r"), "--home",
                                   str(home)], terminal_width=400)
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert " ".join(numbers.split()) in flat and curse in flat
    sweep_md = leaderboard_text(result, "markdown")
    assert numbers.replace(f" ({held.len()} q)", "") in sweep_md and curse in sweep_md  # n held out: not in outcomes
    assert "heldout_ndcg_at_10" in sweep_md.splitlines()[0]


def test_a_sweep_without_a_held_out_set_shows_no_held_out_check(tmp_path, settings, home):
    result = run_sweep(load_config(write_config(tmp_path / "demo.yaml", SWEEP.replace("  holdout: 0.3\n", "")
                                                .replace("  - kind: dense\n    exact: true\n", ""))), settings)
    rep = build_report(ResultStore(home / "results.duckdb"), result.sweep_id, n_resamples=500)
    assert rep.winner_heldout is None and "heldout_ndcg_at_10" not in rep.measures
    assert "Winner's curse" not in leaderboard_markdown(rep) + leaderboard_text(result, "markdown")


# ---------------------------------------------------------------- the promotion gate on the held-out set
HELD = [f"h{i:02d}" for i in range(12)]
TUNE = [f"t{i:02d}" for i in range(28)]


def _write(store: ResultStore, sweep_id: str, cid: str, tuning: list[float], heldout: list[float]) -> None:
    rows = [(q, None, "ndcg_at_10", v) for q, v in zip(TUNE, tuning)]
    rows += [(q, None, "heldout_ndcg_at_10", v) for q, v in zip(HELD, heldout)]
    pq = pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                    "value": pl.Float64}, orient="row")
    run = pl.DataFrame({"query_id": ["t00"], "rank": [1], "chunk_id": ["c"], "doc_id": ["d"], "score": [1.0]})
    store.write_config(sweep_id, ConfigResult(cid, f"cfg-{cid}", {"chunker": {"kind": "whole"}}, "fpA", measures=pq,
                                              rankings=run, n_queries=len(TUNE), n_unlabelled=0, ms_per_query=1.0))


def _production(store: ResultStore, sweep_id: str, cid: str) -> None:
    with store.connect() as con:
        con.execute("INSERT INTO promotions (promoted_at, sweep_id, config_id, name, spec_json, dataset_fingerprint, "
                    "primary_measure, active) VALUES (?, ?, ?, ?, '{}', 'fpA', 'ndcg_at_10', true)",
                    [datetime.now(timezone.utc), sweep_id, cid, f"cfg-{cid}"])


SPLIT = {"dataset": {"path": "x", "holdout": 0.3, "seed": 0}, "metrics": {"primary": "ndcg@10"}}


def test_promote_gates_on_the_held_out_queries_when_the_sweep_has_them(tmp_path):
    store = ResultStore(tmp_path / "results.duckdb")
    store.begin_sweep("s1", "s", "h", SPLIT, "d", "fpA")
    # the candidate beats production on every tuning query, and on none of the held-out ones: the tuning lead was
    # luck; on the questions the choice never saw they are equal, so the gate must refuse
    _write(store, "s1", "prod", [0.3] * 28, [0.5] * 6 + [0.7] * 6)
    _write(store, "s1", "lucky", [0.9] * 28, [0.5] * 6 + [0.7] * 6)
    # and the reverse: no better on tuning, better on every held-out query
    _write(store, "s1", "sound", [0.3] * 28, [0.9] * 12)
    store.finish_sweep("s1", "finished")  # promote refuses a config of an unfinished sweep
    _production(store, "s1", "prod")

    lucky = check_promotion_gate(store, "s1", "lucky")
    assert not lucky.allowed and lucky.n == 12 and lucky.mean_diff == 0
    assert lucky.primary == "heldout_ndcg_at_10" and lucky.candidate_mean == pytest.approx(0.6)
    assert "gated on the held-out set: 12 queries" in lucky.evidence
    sound = check_promotion_gate(store, "s1", "sound")
    assert sound.allowed and sound.n == 12 and sound.mean_diff == pytest.approx(0.3)
    assert sound.p_value == 2 / 2**12 and "gated on the held-out set: 12 queries" in sound.evidence
    # the command says so too, refusing before anything is registered
    out = CliRunner().invoke(app, ["promote", "s1", "cfg-lucky", "--home", str(tmp_path)], terminal_width=400)
    assert out.exit_code == 1 and "gated on the held-out set: 12 queries" in " ".join(out.output.split())


def test_held_out_gate_pairs_production_from_a_sweep_that_had_no_split(tmp_path):
    """Production measured in an earlier sweep on the same data without a split: its values for the candidate's
    held-out queries are paired by query id (a per-query value does not depend on the split)."""
    store = ResultStore(tmp_path / "results.duckdb")
    store.begin_sweep("old", "s", "h1", {"dataset": {"path": "x"}}, "d", "fpA")
    rows = [(q, None, "ndcg_at_10", 0.8 if q in TUNE else 0.2) for q in TUNE + HELD]
    pq = pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                    "value": pl.Float64}, orient="row")
    run = pl.DataFrame({"query_id": ["t00"], "rank": [1], "chunk_id": ["c"], "doc_id": ["d"], "score": [1.0]})
    store.write_config("old", ConfigResult("prod", "cfg-prod", {}, "fpA", measures=pq, rankings=run, n_queries=40,
                                           n_unlabelled=0, ms_per_query=1.0))
    _production(store, "old", "prod")
    store.begin_sweep("new", "s", "h2", SPLIT, "d", "fpA")
    _write(store, "new", "cand", [0.5] * 28, [0.6] * 12)  # worse on tuning (0.5 < 0.8), better held out (0.6 > 0.2)
    gate = check_promotion_gate(store, "new", "cand")
    assert gate.allowed and gate.n == 12 and gate.mean_diff == pytest.approx(0.4)
    assert "from sweep old" in gate.evidence and re.search(r"held-out set: 12 queries", gate.evidence)
    assert not math.isnan(gate.baseline_mean) and gate.baseline_mean == pytest.approx(0.2)
