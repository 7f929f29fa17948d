"""Report from a real DuckDB store filled with hand-made per-query values, so every number has a known answer.

The full pipeline (a real sweep, then `ragbench report` and its MLflow artifacts) is exercised end to end in
tests/integration/test_promotion.py; here the statistics and the HTML are checked against hand-computed expectations.
"""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.evaluation.comparison import compare_configs
from ragbench.evaluation.intervals import bootstrap_ci
from ragbench.reporting.report import build_report, resolve_config_id, resolve_sweep_id, write_html_report
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
N = 20  # labelled queries; q20 is unlabelled (NaN everywhere)

# ndcg@10 per query (written in the @ spelling: stored as the key ndcg_at_10): A is good, B close to A (tied), C much
# worse. Classes: q00-q09 "x", q10-q19 "y".
A = [1.0] * 10 + [0.5] * 10
B = [1.0] * 9 + [0.0] + [0.5] * 9 + [1.0]
C = [0.0] * 15 + [0.5] * 5
RECALL = {  # recall@k for k = 1, 5, 10 (same for every query of a config)
    "A": (0.4, 0.8, 1.0), "B": (0.3, 0.7, 0.9), "C": (0.1, 0.2, 0.3)}


def _per_query(ndcg: list[float], recall: tuple[float, float, float]) -> pl.DataFrame:
    rows = []
    for i in range(N + 1):
        qid, cls = f"q{i:02d}", ("x" if i < 10 else "y") if i < N else "unanswerable"
        rows.append((qid, cls, "ndcg@10", ndcg[i] if i < N else math.nan))
        for k, r in zip((1, 5, 10), recall):
            rows.append((qid, cls, f"recall@{k}", r if i < N else math.nan))
    return pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                      "value": pl.Float64}, orient="row")


@pytest.fixture
def store(tmp_path):
    s = ResultStore(tmp_path / "home" / "results.duckdb")
    s.begin_sweep("syn-1", "syn", "h", {"metrics": {"primary": "ndcg@10"}}, "synthetic", "fp0")
    for cid, name, ndcg in (("a" * 16, "config A", A), ("b" * 16, "config B", B), ("c" * 16, "config C", C)):
        pq = _per_query(ndcg, RECALL[name[-1]])
        run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
        s.write_config("syn-1", ConfigResult(cid, name, {"chunker": {"kind": "whole"}}, "fp0", measures=pq,
                                             rankings=run, n_queries=N + 1, n_unlabelled=1, ms_per_query=1.0))
    s.write_config_failure("syn-1", "d" * 16, "config D", {"chunker": {"kind": "whole"}}, "fp0", "boom: no model")
    s.finish_sweep("syn-1", "finished_with_failures")
    return s


def test_report_numbers_match_hand_computation(store):
    rep = build_report(store, "syn-1")
    assert rep.primary == "ndcg_at_10" and rep.measures == ("ndcg_at_10", "recall_at_10")
    board = rep.leaderboard()
    assert board["name"].to_list() == ["config A", "config B", "config C"]  # failed D is not ranked
    assert board["mean"].to_list() == pytest.approx([0.75, 0.725, 0.125])  # 15/20, (9+4.5+1)/20, 2.5/20
    # CIs are stats.bootstrap_ci over the per-query values (NaN of the unlabelled query dropped)
    ci = bootstrap_ci(np.array(A + [math.nan]))
    a = board.row(0, named=True)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((ci.low, ci.high)) and a["ci_low"] < 0.75 < a["ci_high"]
    # B differs from A on 2 queries only: tied; C loses on 15 and ties on 5 (q15-q19): significantly worse
    assert rep.comparisons["ndcg_at_10"].tied_with_best == ("a" * 16, "b" * 16)
    c = board.row(2, named=True)
    assert c["worse_than_best"] and (c["wins"], c["ties"], c["losses"]) == (0, 5, 15)
    b = board.row(1, named=True)
    assert not b["worse_than_best"] and (b["wins"], b["ties"], b["losses"]) == (1, 18, 1)
    assert rep.headline.startswith("config A wins on ndcg_at_10: 0.750 [")
    assert "tied with: config B; significantly better than 1 of 2" in rep.headline
    # recall@k curves: k -> recall, per config
    curve = rep.recall_curves.filter(pl.col("name") == "config B").sort("k")
    assert curve["k"].to_list() == [1, 5, 10] and curve["recall"].to_list() == pytest.approx([0.3, 0.7, 0.9])
    # per class: B is 0.9 on x (9 of 10 at 1.0) and 0.5 on y ((9*.5 + 1)/10 = .55)
    pc = {(r["name"], r["query_class"]): (r["n"], r["mean"]) for r in rep.per_class.iter_rows(named=True)}
    assert pc[("config B", "x")] == (10, pytest.approx(0.9)) and pc[("config B", "y")] == (10, pytest.approx(0.55))
    assert ("config B", "unanswerable") not in pc  # unlabelled queries are not scored
    assert rep.chunk_stats is None


class _Html(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.imgs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


def test_html_report_is_self_contained_with_plots_and_chunk_stats(store, tmp_path):
    with store.connect() as con:  # the optional table the lead may add
        con.execute("CREATE TABLE IF NOT EXISTS chunk_stats (sweep_id VARCHAR, config_id VARCHAR, stat VARCHAR, "
                    "value DOUBLE)")
        con.execute("INSERT INTO chunk_stats VALUES ('syn-1', ?, 'chunk_count', 42), ('syn-1', ?, 'chunk_count', 7)",
                    ["a" * 16, "c" * 16])
    out = tmp_path / "out"
    path = write_html_report(store, "syn-1", out)
    assert path == out / "report.html"
    doc = _Html()
    doc.feed(path.read_text(encoding="utf-8"))
    text = " ".join(doc.text)
    assert doc.tags[0] == "html" and "table" in doc.tags
    assert "Leaderboard" in text and "config A wins on ndcg_at_10" in text
    assert "FAILED: boom: no model" in text  # failed configs are listed, not hidden
    # pivoted: one row per chunker, one column per statistic; counts printed as integers
    assert re.search(r"Chunk statistics.*chunk count.*config A\s*42\s.*config C\s*7\s", text, re.S)
    assert "42.000" not in text
    # the legend explains the marks; the vs-best table comes before the all-pairs table, which is collapsed
    assert "★ best · ≈ not significantly different from the best · ▼ significantly worse" in text
    html = path.read_text(encoding="utf-8")
    assert html.index("id='vs-best'") < html.index("<details id='all-pairs'>") < html.index("id='pairs'")
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["leaderboard.png", "per_class.png", "recall_curves.png"]
    embedded = [s for s in doc.imgs if s.startswith("data:image/png;base64,")]
    assert len(embedded) == len(doc.imgs) == 3  # nothing linked from outside the file
    files = {(out / p).read_bytes() for p in pngs}
    for src in embedded:
        data = base64.b64decode(src.split(",", 1)[1])
        assert data.startswith(PNG_MAGIC) and data in files


def test_cli_report_and_compare(store, tmp_path):
    home = store.path.parent
    res = CliRunner().invoke(app, ["report", "latest", "--home", str(home), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    assert "config A wins on ndcg_at_10" in res.output and "▼" in res.output  # C marked significantly worse
    assert (tmp_path / "r" / "report.html").is_file()

    res = CliRunner().invoke(app, ["compare", "syn", "--home", str(home), "--test", "student", "--json", "--all"])
    assert res.exit_code == 0, res.output
    import json

    rows = {(r["config_a"], r["config_b"]): r for r in map(json.loads, res.stdout.splitlines())}
    expected = compare_configs(store.query("SELECT config_id, query_id, measure, value FROM query_metrics"),
                               "ndcg_at_10", test="student", pairs="all")  # --all: every pair
    for p in expected.pairs:
        assert rows[(p.config_a, p.config_b)]["p_adjusted"] == pytest.approx(p.p_adjusted)

    res = CliRunner().invoke(app, ["report", "nope", "--home", str(home)])
    assert res.exit_code == 2 and "sweep 'nope' not found" in res.output and "syn-1" in res.output


def test_resolving_sweeps_and_configs(store):
    assert resolve_sweep_id(store, "latest") == "syn-1" == resolve_sweep_id(store, "syn")
    assert resolve_config_id(store, "syn-1", "config B") == "b" * 16
    assert resolve_config_id(store, "syn-1", "cccc") == "c" * 16
    with pytest.raises(Exception, match="ambiguous"):
        resolve_config_id(store, "syn-1", "config")
    with pytest.raises(Exception, match="measure 'mrr_at_10' was not computed"):
        build_report(store, "syn-1", primary="mrr@10")
    assert build_report(store, "syn-1", primary="recall@5").primary == "recall_at_5"  # either spelling


def test_report_and_terminal_share_the_default_columns():
    """One definition of the leaderboard columns: recall@{max_k} is the deepest recall the sweep computed."""
    from ragbench.reporting import report, terminal
    from ragbench.reporting.columns import LEADERBOARD_MEASURES, leaderboard_measures

    assert report.LEADERBOARD_MEASURES is terminal.LEADERBOARD_MEASURES is LEADERBOARD_MEASURES
    assert leaderboard_measures({"recall_at_5", "recall_at_20", "reach_hit_at_10_of_50"}) == (
        "ndcg_at_10", "recall_at_10", "recall_at_20", "mrr_at_10", "precision_at_10")
    assert leaderboard_measures({"recall@1", "recall@10"}) == (  # the @ spelling is read too
        "ndcg_at_10", "recall_at_10", "mrr_at_10", "precision_at_10")
    assert "recall_at_100" in leaderboard_measures(set())  # nothing computed yet: the terminal's old default


def test_report_plots_are_cached_by_what_they_draw_and_a_damaged_one_is_drawn_again(store, tmp_path, monkeypatch):
    """A report whose data did not change copies its plots from the home's plot cache (nothing drawn); a damaged
    cached plot is quarantined and that plot alone drawn again; a change of the data draws anew."""
    from ragbench.core.cache import PlotCache
    from ragbench.reporting import plots as report_module

    first = tmp_path / "first"
    write_html_report(store, "syn-1", first)
    cache = PlotCache(store.path.parent / "cache")
    assert cache.verify() == (3, {})
    drawn: list[str] = []
    real = dict(report_module._DRAW)
    monkeypatch.setattr(report_module, "_DRAW", {name: (lambda d, p, name=name: drawn.append(name) or real[name](d, p))
                                                 for name in real})
    again = tmp_path / "again"
    write_html_report(store, "syn-1", again)
    assert drawn == []
    pngs = {p.name: p.read_bytes() for p in first.glob("*.png")}
    assert {p.name: p.read_bytes() for p in again.glob("*.png")} == pngs
    (entry,) = [p for p in cache.root.rglob("*.png") if p.read_bytes() == (first / "per_class.png").read_bytes()]
    entry.write_bytes(entry.read_bytes()[:-10])  # truncated on disk
    write_html_report(store, "syn-1", tmp_path / "third")
    assert drawn == ["per_class"] and (tmp_path / "third" / "per_class.png").read_bytes() == (
        first / "per_class.png").read_bytes()
    assert cache.verify() == (3, {})
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    store.write_config("syn-1", ConfigResult("e" * 16, "config E", {"chunker": {"kind": "whole"}}, "fp0",
                                             measures=_per_query([0.9] * N, RECALL["A"]), rankings=run,
                                             n_queries=N + 1, n_unlabelled=1, ms_per_query=1.0))
    drawn.clear()
    write_html_report(store, "syn-1", tmp_path / "fourth")
    assert sorted(drawn) == ["leaderboard", "per_class", "recall_curves"]


def test_a_report_opens_the_results_file_once(store, monkeypatch):
    """build_report's reads share one connection (each open of the DuckDB file costs ~8 ms and takes its lock)."""
    import duckdb

    from ragbench.results import store_connection as store_module

    opened: list[str] = []
    real = duckdb.connect
    monkeypatch.setattr(store_module.duckdb, "connect", lambda *a, **k: opened.append(a[0]) or real(*a, **k))
    rep = build_report(store, "syn-1")
    assert rep.best == "a" * 16 and len(opened) == 1
    opened.clear()
    store.sweep("syn-1"), store.leaderboard("syn-1")  # outside a report: a connection per read
    assert len(opened) >= 2


def test_report_statistics_are_kept_by_their_values_and_a_damaged_one_is_computed_again(store, monkeypatch):
    """A report whose configs did not change reads every bootstrap interval and randomization test from the
    home's cache, bit for bit what computing gives; a damaged entry is quarantined and that statistic alone computed
    again; a new config computes only what involves its new values."""
    from ragbench.core.cache import StatsCache
    from ragbench.evaluation import intervals, paired_tests

    computed: list[str] = []  # each statistic drawn: its resampling function called
    for module, name in ((intervals, "_bootstrap"), (paired_tests, "_randomization")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, real=real, name=name: computed.append(name) or real(*a))
    first = build_report(store, "syn-1")
    cache = StatsCache(store.path.parent / "cache")
    n_kept, damaged = cache.verify()
    # 3 configs x 2 measures: 6 intervals, and each measure's 2 pairs against the best
    assert sorted(computed) == ["_bootstrap"] * 6 + ["_randomization"] * 4 and n_kept == 10 and damaged == {}
    per_query = store.query("SELECT config_id, query_id, measure, value FROM query_metrics WHERE sweep_id = 'syn-1'")
    direct = compare_configs(per_query, first.primary)  # outside a report: nothing kept, computed here
    assert direct.configs == first.comparisons[first.primary].configs
    assert direct.pairs == first.comparisons[first.primary].pairs

    computed.clear()
    again = build_report(store, "syn-1")
    assert computed == []
    assert again.summary.equals(first.summary) and again.comparisons == first.comparisons
    entry = sorted(cache.root.rglob("*.json"))[0]
    entry.write_text(entry.read_text().replace("0", "1", 1))  # one digit changed on disk
    assert build_report(store, "syn-1").comparisons == first.comparisons
    assert len(computed) == 1 and cache.verify() == (n_kept, {})

    computed.clear()  # config E: new nDCG values, the recall values of config A (the same interval: kept)
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    store.write_config("syn-1", ConfigResult("e" * 16, "config E", {"chunker": {"kind": "whole"}}, "fp0",
                                             measures=_per_query([0.6] * 10 + [0.7] * 10, RECALL["A"]),
                                             rankings=run, n_queries=N + 1, n_unlabelled=1, ms_per_query=1.0))
    build_report(store, "syn-1")
    # its nDCG interval, and its test against the best on each measure (a new pair: its own stream)
    assert sorted(computed) == ["_bootstrap", "_randomization", "_randomization"]
