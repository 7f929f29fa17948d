"""``metrics.show`` of the sweep file chooses the report's leaderboard columns (as it chooses the terminal's):
a real folder sweep whose show names chunk and span measures and label coverage gets those columns in the report,
in show's order after the primary, and not the default recall@k, MRR and precision ones."""

from __future__ import annotations

from conftest import write_config
from folder_fixture import build_folder

from ragbench.config import load_config
from ragbench.reporting.model import build_report
from ragbench.reporting.render_markdown import leaderboard_markdown
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = """name: show-test
dataset:
  format: folder
  path: {path}
chunkers:
  - kind: markdown
    max_tokens: 48
embedders:
  - model: static-retrieval-m2v
retrievers:
  - kind: bm25
  - kind: dense
    exact: true
metrics:
  cutoffs: [1, 3, 5]
  primary: ndcg@5
{show}
output:
  mlflow: false
"""


def _report(tmp_path, settings, home, show: str):
    root = build_folder(tmp_path / "docs")
    cfg = load_config(write_config(tmp_path / "sweep.yaml", SWEEP.format(path=root, show=show)))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0
    return build_report(ResultStore(home / "results.duckdb"), result.sweep_id)


def test_metrics_show_chooses_the_reports_columns(tmp_path, settings, home):
    report = _report(tmp_path, settings, home, "  show: [judged@5, chunk_ndcg@5, span_recall@5]")
    assert report.measures == ("ndcg_at_5", "chunk_ndcg_at_5", "span_recall_at_5")
    header = leaderboard_markdown(report).split("\n")
    head = [c.strip() for c in next(line for line in header if line.startswith("| #")).strip("|").split("|")]
    assert head[head.index("ndcg_at_5 [95 % CI]"):] == ["ndcg_at_5 [95 % CI]", "p vs best", "W/T/L vs best",
                                                         "chunk_ndcg_at_5", "span_recall_at_5"], head


def test_without_show_the_default_columns_stay(tmp_path, settings, home):
    report = _report(tmp_path, settings, home, "")
    assert report.measures[0] == "ndcg_at_5" and "chunk_ndcg_at_5" not in report.measures
    assert "recall_at_5" in report.measures
