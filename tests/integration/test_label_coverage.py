"""Label coverage in reports: judged@k of the primary's cutoff beside the primary on every leaderboard (never compared,
never a primary), and the warning that the winner's score is a lower bound when its coverage is low or differs from
a tied config's."""

from __future__ import annotations

import json

import pytest
from conftest import write_config

from ragbench.core.errors import RagbenchError
from ragbench.reporting.label_coverage import LabelCoverage, coverage_key, is_coverage

SWEEP = """name: coverage-test
dataset:
  format: folder
  path: {path}
chunkers:
  - kind: markdown
    max_tokens: 64
  - kind: whole
retrievers:
  - kind: bm25
metrics:
  cutoffs: [1, 3, 5]
  primary: ndcg@5
output:
  mlflow: false
"""


def _coverage(values, tied=("w",)) -> LabelCoverage:
    return LabelCoverage("judged_at_10", "ndcg_at_10", "s1", values, "w", tied, {"w": "winner cfg", "t": "tied cfg"})


def test_the_warning_fires_on_low_coverage_or_a_gap_to_a_tied_config_only():
    assert coverage_key("ndcg@10") == "judged_at_10" and coverage_key("heldout/recall@5") == "judged_at_5"
    assert is_coverage("judged@3") and is_coverage("heldout_judged_at_3") and not is_coverage("ndcg_at_10")
    assert _coverage({"w": 0.6, "t": 0.45}, ("w", "t")).sentence is None  # gap 0.15: fine
    assert _coverage({"w": 0.6, "t": 0.3}).sentence is None  # a gap to a config not tied with the winner: fine
    low = _coverage({"w": 0.42, "t": 0.45}, ("w", "t")).sentence
    assert "only 42% of the winner's (winner cfg) top 10 documents carry a judgment (judged@10 0.42 < 0.5)" in low
    assert "ndcg_at_10 is a lower bound" in low and low.endswith("`ragbench judge pool s1`.")
    gap = _coverage({"w": 0.9, "t": 0.65}, ("w", "t"))
    assert gap.gaps == {"t": pytest.approx(0.25)} and "only" not in gap.sentence
    assert "differs by more than 0.2 from config(s) tied with it (tied cfg 0.65)" in gap.sentence
    assert _coverage({"w": 0.45, "t": 0.1}, ("w", "t")).sentence.count("; and ") == 1  # both reasons


def test_reports_show_judged_beside_the_primary_and_warn_when_the_winner_is_a_lower_bound(tmp_path, settings, home):
    from rich.console import Console

    from ragbench.config import load_config
    from ragbench.reporting.model import build_report
    from ragbench.reporting.render_html import render_html
    from ragbench.reporting.render_json import report_json
    from ragbench.reporting.render_markdown import leaderboard_markdown
    from ragbench.reporting.render_terminal import leaderboard_table, report_rich
    from ragbench.results.store import ResultStore
    from ragbench.sweep import run_sweep

    root = tmp_path / "docs"
    root.mkdir()
    for name, text in {"stash.md": "Stashing saves work with git stash push.",
                       "branch.md": "A branch is a pointer to a commit.",
                       "rebase.md": "Rebase replays commits onto a new base.",
                       "tags.md": "A tag names a commit, like a branch that does not move.",
                       "remote.md": "A remote is another copy of the repository; push sends commits there."}.items():
        # every page names every topic once: BM25 ranks all five for each question
        (root / name).write_text(f"# {name[:-3].title()}\n\n{text}\n\nSee also: save work, branch, rebase, tag.\n",
                                 encoding="utf-8")
    (root / "questions.csv").write_text("question,doc\nHow do I save work?,stash.md\nWhat is a branch?,branch.md\n"
                                        "What does rebase do?,rebase.md\nWhat is a tag?,tags.md\n", encoding="utf-8")
    cfg = load_config(write_config(tmp_path / "sweep.yaml", SWEEP.format(path=root)))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    store = ResultStore(home / "results.duckdb")
    report = build_report(store, result.sweep_id)

    # each question labels one document of five, and all five are retrieved: 1 of the top 5 is judged
    cov = report.label_coverage
    assert cov is not None and cov.measure == "judged_at_5" and cov.winner == report.comparisons["ndcg_at_5"].best
    for o in result.outcomes:
        stored = store.query_metrics(result.sweep_id, o.config_id).to_pandas()
        per_query = stored[stored["measure"] == "judged_at_5"]["value"]
        assert cov.values[o.config_id] == pytest.approx(per_query.mean())
        assert cov.values[o.config_id] == pytest.approx(0.2)
    assert not any(is_coverage(m) for m in report.measures) and "judged_at_5" not in report.comparisons
    assert cov.sentence in report.dataset_warnings and "judged@5" in cov.sentence

    console = Console(width=200, record=True)
    console.print(*report_rich(report, width=200))
    terminal = " ".join(console.export_text().split())
    assert "judged@5" in terminal and cov.sentence.split(":")[0] in terminal
    winner_value = f"{cov.values[cov.winner]:.2f}"
    assert winner_value in terminal
    markdown = leaderboard_markdown(report)
    assert "judged@5" in markdown and "lower bound" in markdown
    html = render_html(report, {})
    assert "judged@5</th>" in html and "lower bound" in html
    rows = [json.loads(line) for line in report_json(report).splitlines()]
    assert {r["config_id"]: r["judged"] for r in rows} == pytest.approx(cov.values)
    assert rows[0]["label_coverage"]["sentence"] == cov.sentence
    from ragbench.reporting.render_csv import report_csv

    header, *lines = report_csv(report).splitlines()
    assert "judged" in header.split(",") and len(lines) == 2
    console = Console(width=200, record=True)
    console.print(leaderboard_table(result))  # the sweep's own closing table too
    assert "judged@5" in console.export_text()

    with pytest.raises(RagbenchError, match="label coverage"):
        build_report(store, result.sweep_id, primary="judged@5")
    assert "judged_at_5" not in build_report(store, result.sweep_id, measures=("ndcg@5", "judged@5")).comparisons
