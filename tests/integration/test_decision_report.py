"""What would settle the choice, on a real demo sweep: the questions needed to tell the winner from each tied config
and, with `dataset.holdout: {fraction, repeats}`, how stable the pick is over repeated splits — computed by the
report from the stored per-query values (the repeats evaluate nothing), in every format."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import polars as pl
import pytest
from conftest import DEMO, write_config
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import load_config
from ragbench.reporting.render_csv import report_csv
from ragbench.reporting.render_json import report_json
from ragbench.reporting.report import build_report, leaderboard_markdown, render_html
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = f"""name: demo-repeats
dataset:
  path: {DEMO}
  queries: all
  holdout: {{holdout}}
chunkers:
  - kind: whole
  - kind: recursive
    size: 128
    overlap: 0
retrievers:
  - kind: bm25
metrics:
  cutoffs: [1, 5, 10]
  primary: ndcg@10
output:
  mlflow: false
"""


def test_questions_needed_and_repeated_splits_in_every_format(tmp_path, settings, home):
    result = run_sweep(load_config(write_config(tmp_path / "r.yaml", SWEEP.format(
        holdout="{fraction: 0.3, repeats: 20}"))), settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    store = ResultStore(home / "results.duckdb")
    rep = build_report(store, result.sweep_id, n_resamples=2000)
    other = next(c for c in rep.comparisons["ndcg_at_10"].tied_with_best if c != rep.best)  # the two BM25s tie

    # the paired differences, from the stored per-query values of both sides of the split
    def values(cid: str) -> pl.DataFrame:
        return store.query_metrics(result.sweep_id, cid).filter(pl.col("measure") == "ndcg_at_10")
    paired = values(rep.best).join(values(other), on="query_id", suffix="_o").drop_nans(["value", "value_o"])
    d = (paired["value"] - paired["value_o"]).to_numpy()
    (q,) = rep.questions_needed
    assert (q.config_id, q.mean_diff, q.sd_diff, q.n_now) == (other, pytest.approx(d.mean()),
                                                              pytest.approx(d.std(ddof=1)), d.size)
    assert q.alpha_per_test == 0.05 and q.n_needed > q.n_now  # one comparison: Holm's first step is alpha itself

    # repeat 0 is the sweep's own split: its winner is the report's best, with the held-out check's two scores
    h, w = rep.holdout_repeats, rep.winner_heldout
    assert h.repeats == 20 and h.winners[0] == rep.best == w.config_id
    assert (h.winner_tuning[0], h.winner_heldout[0]) == (pytest.approx(w.tuning), pytest.approx(w.heldout))
    assert (h.n_questions, h.n_heldout) == (w.n_tuning + w.n_heldout, w.n_heldout)
    assert sum(c.wins for c in h.configs) == 20 and {c.config_id for c in h.configs} == {rep.best, other}

    sentence, stable = q.sentence(), h.lines()[0]
    assert f"you need about {q.n_needed:,} tuning questions (about {q.n_needed_labelled:,} labelled in all" in sentence
    assert q.n_needed_labelled == math.ceil(q.n_needed * (w.n_tuning + w.n_heldout) / w.n_tuning - 1e-9)
    md = leaderboard_markdown(rep)
    assert sentence in md and stable in md and h.lines()[1] in md
    html = render_html(rep, {})
    assert "id='questions-needed'" in html and "id='holdout-repeats'" in html
    assert f"{q.n_needed:,}" in html.split("id='questions-needed'")[1].split("</table>")[0]
    line = json.loads(report_json(rep).splitlines()[0])
    assert line["questions_needed"][0]["n_needed"] == q.n_needed and line["questions_needed"][0]["config_id"] == other
    assert set(line["questions_needed"][0]) >= {"config", "label", "mean_diff", "sd_diff", "n_now", "n_needed",
                                                "alpha_per_test", "power"}
    assert line["holdout_repeats"]["repeats"] == 20 and len(line["holdout_repeats"]["per_repeat"]) == 20
    # the JSON headline names what the rows say: rank 1 with its mean and CI, the tied config, and the pool command
    top, tied_row = line, json.loads(report_json(rep).splitlines()[1])
    head = top["headline"]
    assert (head["winner_id"], head["mean"], head["ci_low"]) == (top["config_id"], top["ndcg_at_10"],
                                                                 top["ndcg_at_10_ci_low"])
    assert head["tied"] == [rep.label_of(tied_row["config_id"])] and tied_row["tied_with_best"]
    assert any(f"ragbench judge pool {rep.sweep_id}" in s and f"(about {q.n_needed:,} questions)" in s
               for s in head["next_steps"])
    rows = {r["config_id"]: r for r in csv.DictReader(io.StringIO(report_csv(rep)))}
    assert rows[other]["questions_needed"] == str(q.n_needed) and rows[rep.best]["questions_needed"] == ""
    assert sum(int(r["holdout_wins"]) for r in rows.values()) == 20
    out = CliRunner().invoke(app, ["report", "latest", "--no-mlflow", "--out", str(tmp_path / "r"), "--home",
                                   str(home)], terminal_width=400)
    assert out.exit_code == 0, out.output
    flat = " ".join(out.output.split())
    assert " ".join(sentence.split()) in flat and "How stable the pick is, over 20 seeded splits" in flat

    # the plain float form is the same evaluation: every config is reused, and the report draws no repeats
    again = run_sweep(load_config(write_config(tmp_path / "f.yaml", SWEEP.format(holdout="0.3"))), settings)
    assert all(o.reused_from == result.sweep_id for o in again.outcomes), [o.reused_from for o in again.outcomes]
    plain = build_report(store, again.sweep_id, n_resamples=2000)
    assert plain.holdout_repeats is None and plain.questions_needed[0].n_needed == q.n_needed
    assert "How stable the pick is" not in leaderboard_markdown(plain)
    assert np.isfinite(plain.winner_heldout.heldout)
