"""One report model, many renderers: every markdown table ragbench writes keeps its cells (config labels hold ``|``),
the HTML page is balanced and escaped, each chunker's statistics are listed once, the templates ship with the
package, and the report's room keeps its size limits.

The store is a real DuckDB file filled with hand-made per-query values and cost measures (no sweep, no model).
"""

from __future__ import annotations

import ast
import fnmatch
import math
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from ragbench.reporting.model import build_report
from ragbench.reporting.render_html import render_html
from ragbench.reporting.render_markdown import artifact_markdown, leaderboard_markdown, sweep_description
from ragbench.reporting.terminal import leaderboard_rows, leaderboard_text
from ragbench.results.outcomes import ConfigOutcome, ConfigResult, SweepResult, config_level
from ragbench.results.store import ResultStore

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())  # any tier folder
REPORTING = ROOT / "ragbench" / "reporting"
N = 12
# names whose chunker part holds a "|" of its own: the label "split|chunker | BM25" has three pipes
CONFIGS = (("a" * 16, "split|chunker | BM25", [1.0] * 6 + [0.5] * 6, 2.0),
           ("b" * 16, "whole | BM25", [1.0] * 5 + [0.0] + [0.5] * 6, 3.0),
           ("c" * 16, "third|one | BM25", [0.0] * 10 + [0.5] * 2, 9.0))
SPEC = {"chunker": {"kind": "whole"}, "retriever": {"kind": "bm25"}}
ERROR = "<b>boom</b> & no model"


def _measures(ndcg: list[float], p95: float) -> pl.DataFrame:
    rows = [(f"q{i:02d}", "x" if i < 6 else "y", "ndcg_at_10", v) for i, v in enumerate(ndcg)]
    rows += [(f"q{i:02d}", "x" if i < 6 else "y", "recall_at_10", min(1.0, v + 0.2)) for i, v in enumerate(ndcg)]
    per_query = pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                           "value": pl.Float64}, orient="row")
    costs = config_level({"latency_p50_ms": p95 / 2, "latency_p95_ms": p95, "index_bytes": 4096.0,
                          "vector_bytes": 0.0, "memory_bytes": 2048.0 * p95, "embed_seconds": 0.0})
    return pl.concat([per_query, costs])


@pytest.fixture
def store(tmp_path):
    s = ResultStore(tmp_path / "home" / "results.duckdb")
    s.begin_sweep("r-1", "r", "h", {"metrics": {"primary": "ndcg@10"}}, "synthetic", "fp0")
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    for cid, name, ndcg, p95 in CONFIGS:
        s.write_config("r-1", ConfigResult(cid, name, SPEC, "fp0", measures=_measures(ndcg, p95), rankings=run,
                                           n_queries=N, n_unlabelled=0, ms_per_query=1.0))
    s.write_config_failure("r-1", "d" * 16, "broken | BM25", SPEC, "fp0", ERROR)
    s.finish_sweep("r-1", "finished_with_failures")
    return s


def _stats(store: ResultStore, rows: list[tuple[str, str, float]]) -> None:
    with store.connect() as con:
        con.execute("CREATE TABLE IF NOT EXISTS chunk_stats (sweep_id VARCHAR, config_id VARCHAR, stat VARCHAR, "
                    "value DOUBLE)")
        con.execute("DELETE FROM chunk_stats")
        for cid, stat, value in rows:
            con.execute("INSERT INTO chunk_stats VALUES ('r-1', ?, ?, ?)", [cid, stat, value])


def _sweep_result(store: ResultStore) -> SweepResult:
    """The sweep's outcomes as the sweep itself holds them when it ends (what its closing table renders)."""
    outcomes = [ConfigOutcome(cid, name, SPEC, "finished", store.config_means("r-1", cid), N, 0)
                for cid, name, _, _ in CONFIGS]
    outcomes.append(ConfigOutcome("d" * 16, "broken | BM25", SPEC, "failed", {}, 0, 0, ERROR))
    return SweepResult("r-1", "r", "fp0", store.path.parent, outcomes, [], 1.0, "ndcg@10")


def _cells(line: str) -> list[str]:
    """The cells of a GitHub-flavoured markdown table row: split on the pipes that are not escaped."""
    inner = line.strip()
    assert inner.startswith("|") and inner.endswith("|") and not inner.endswith("\\|"), line
    return re.split(r"(?<!\\)\|", inner[1:-1])


def _tables(markdown: str) -> list[list[str]]:
    """Every table of a markdown text: its consecutive lines that start with a pipe."""
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_every_markdown_table_keeps_its_cells_when_labels_hold_pipes(store):
    rep = build_report(store, "r-1", n_resamples=500)
    assert "split|chunker | BM25" in rep.label_of("a" * 16)
    texts = {"report": leaderboard_markdown(rep), "mlflow description": sweep_description(rep, "/x/report.html"),
             "prefect artifact": artifact_markdown(rep, ["* HTML report: `/x/report.html`"]),
             "sweep's closing table": leaderboard_text(_sweep_result(store), "markdown")}
    for what, text in texts.items():
        tables = _tables(text)
        assert tables, what
        # the report has the leaderboard and the cost table; the closing table has the leaderboard
        assert len(tables) == (1 if what == "sweep's closing table" else 2), (what, text)
        for table in tables:
            width = len(_cells(table[0]))
            assert re.fullmatch(r"\|(:?-{3,}:?\|)+", table[1].strip()) and len(_cells(table[1])) == width, table[1]
            for line in table[2:]:
                assert len(_cells(line)) == width, (what, line)
        assert any("split\\|chunker" in line for t in tables for line in t), what  # escaped, not dropped


def test_a_second_nights_tables_keep_their_cells_and_every_surface_has_one_headline(store):
    """Night 2 (one config added) adds the since-previous table to every markdown text; the headline (one
    function) reads the same in markdown, the terminal and the HTML report."""
    from rich.console import Console

    from ragbench.reporting.headline import build_headline
    from ragbench.reporting.render_terminal import report_rich

    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    store.begin_sweep("r-2", "r", "h", {"metrics": {"primary": "ndcg@10"}}, "synthetic", "fp0")
    for cid, name, ndcg, p95 in (*CONFIGS, ("e" * 16, "new|one | BM25", [1.0] * 7 + [0.5] * 5, 4.0)):
        store.write_config("r-2", ConfigResult(cid, name, SPEC, "fp0", measures=_measures(ndcg, p95), rankings=run,
                                               n_queries=N, n_unlabelled=0, ms_per_query=1.0))
    store.finish_sweep("r-2", "finished")
    rep = build_report(store, "r-2", n_resamples=500)
    assert rep.since_previous is not None and rep.since_previous.previous_id == "r-1"
    head = build_headline(rep)
    texts = {"report": leaderboard_markdown(rep), "mlflow description": sweep_description(rep, "/x/report.html"),
             "prefect artifact": artifact_markdown(rep, ["* HTML report: `/x/report.html`"])}
    for what, text in texts.items():
        tables = _tables(text)
        assert len(tables) == 3, (what, text)  # leaderboard, cost, the shared configs' changes since night 1
        for table in tables:
            width = len(_cells(table[0]))
            assert all(len(_cells(line)) == width for line in table[1:]), (what, table)
        assert any("new\\|one" in line for line in tables[0]), what
        assert head.verdict in text and all(f"**{k}:** {v}" in text for k, v in head.items()[1:]), what
    console = Console(width=400, record=True)
    for part in report_rich(rep, width=400):
        console.print(part)
    shown = " ".join(console.export_text().split())
    assert all(" ".join(v.split()) in shown for _, v in head.items()), shown
    assert "New winner: new|one | BM25" in head.since and "ragbench promote r-2 " + "e" * 16 in head.items()[-1][1]
    html = render_html(rep, {})
    from html import escape

    assert all(escape(v, quote=False) in html for _, v in head.items())


class _Balanced(HTMLParser):
    """Every element closed in the order opened (void elements excepted)."""

    VOID = {"meta", "br", "img", "wbr", "hr", "input", "link"}

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag in self.VOID:
            return
        self.open.append(tag)
        if tag == "table":
            self._table = dict(attrs).get("id") or dict(attrs).get("class") or "table"
            self.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.open[-1] if self.open else None}>")
            return
        self.open.pop()
        if tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._table and self.tables[self._table] and self.open and self.open[-1] in ("td", "th"):
            self.tables[self._table][-1].append(data)


def _parse(html: str) -> _Balanced:
    doc = _Balanced()
    doc.feed(html)
    doc.close()
    return doc


def test_the_html_page_is_balanced_escaped_and_closes_every_table(store):
    _stats(store, [("a" * 16, "chunk_count", 42), ("b" * 16, "chunk_count", 42), ("c" * 16, "chunk_count", 7)])
    html = render_html(build_report(store, "r-1", n_resamples=500), {})
    doc = _parse(html)
    assert doc.errors == [] and doc.open == [], (doc.errors, doc.open)
    assert {"leaderboard", "vs-best", "cost", "pairs", "chunk-stats-1"} <= set(doc.tables)
    assert len(doc.tables["cost"]) == 1 + len(CONFIGS)  # header and one row per ranked config
    # autoescaped: a failed config's error is text, not markup
    assert "FAILED: &lt;b&gt;boom&lt;/b&gt; &amp; no model" in html and "<b>boom" not in html
    assert "<style>" in html and "font-family:system-ui" in html  # the stylesheet inlined, nothing linked
    assert "<link" not in html and "src=\"http" not in html


def test_one_time_per_query_and_the_pairs_named_for_what_was_tested(store):
    """The leaderboard's time column is the cost table's p50 (not the batch time, 1.0 ms for every config here);
    the pairs section says it holds each config against the best, not every pair."""
    rep = build_report(store, "r-1", n_resamples=500)
    doc = _parse(render_html(rep, {}))
    board, cost = doc.tables["leaderboard"], doc.tables["cost"]
    head = [c.strip() for c in board[0]]
    assert "p50 ms/query" in head and "ms/query" not in head
    p50 = {row[0].split(" (")[0].strip(): row[2].strip() for row in cost[1:]}  # label -> p50 ms cell
    expected = {name: f"{p95 / 2:.1f}" for _, name, _, p95 in CONFIGS}
    assert sorted(p50.values()) == sorted(expected.values())
    html = render_html(rep, {})
    board_ms = re.findall(r"<td class='num'>([^<]*)</td><td class='num'>\d+<br><span class='muted'>\+\d+ unlabelled",
                          html)  # the time cell just before the queries cell of each ranked row
    assert sorted(board_ms) == sorted(expected.values()), board_ms
    assert "Each config against the best" in html and "The 2 pairs with the best on ndcg_at_10" in html
    assert "every one of the 3 pairs" in html and "Every pair" not in html


def test_chunk_statistics_list_each_chunker_once(store):
    """Configs of one chunker whose known statistics agree are one row, even when one has no embedding window
    (missing: BM25), one has it and another's is NaN (unknown); configs whose counts differ stay apart."""
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    for cid, name in (("e" * 16, "whole | BM25 again"), ("f" * 16, "whole | BM25 once more")):  # one chunker
        store.write_config("r-1", ConfigResult(cid, name, SPEC, "fp0", measures=_measures([0.1] * N, 1.0),
                                               rankings=run, n_queries=N, n_unlabelled=0, ms_per_query=1.0))
    a, b, c = "b" * 16, "e" * 16, "f" * 16
    _stats(store, [(a, "chunk_count", 42), (a, "chunk_tokens_mean", 10.5), (a, "embed_window_tokens", 254),
                   (b, "chunk_count", 42), (b, "chunk_tokens_mean", 10.5), (b, "embed_window_tokens", math.nan),
                   (c, "chunk_count", 42), (c, "chunk_tokens_mean", 10.5)])
    rep = build_report(store, "r-1", n_resamples=500)
    rows = _parse(render_html(rep, {})).tables["chunk-stats-1"][1:]
    assert len(rows) == 1, rows
    assert rows[0] == ["whole document", "42", "10.5", "254"]
    _stats(store, [(a, "chunk_count", 42), (b, "chunk_count", 42), (c, "chunk_count", 7)])
    rows = _parse(render_html(build_report(store, "r-1", n_resamples=500), {})).tables["chunk-stats-1"][1:]
    assert sorted(r[1] for r in rows) == ["42", "7"] and all(r[0].startswith("whole document") for r in rows)


def test_the_closing_table_and_the_report_rank_the_same_configs(store):
    """Both leaderboards are the one model: the same configs, in the same order, the failed one last."""
    rep = build_report(store, "r-1", n_resamples=500)
    report_rows = rep.board.dicts()
    sweep_rows = leaderboard_rows(_sweep_result(store))
    assert [r["config_id"] for r in report_rows] == [r["config_id"] for r in sweep_rows] == [
        "a" * 16, "b" * 16, "c" * 16, "d" * 16]
    assert [r["rank"] for r in report_rows] == [r["rank"] for r in sweep_rows] == [1, 2, 3, None]
    for r, s in zip(report_rows[:3], sweep_rows):
        assert (r["chunker"], r["model"], r["retriever"]) == (s["chunker"], s["model"], s["retriever"])
        assert r["ndcg_at_10"] == pytest.approx(s["ndcg_at_10"])


def test_the_templates_ship_with_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = data["ragbench.reporting"]
    files = [p.relative_to(REPORTING).as_posix() for p in (REPORTING / "templates").iterdir()]
    assert {"report.html.j2", "report.css"} <= {Path(f).name for f in files}
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files), (files, patterns)


def test_importing_the_report_imports_neither_matplotlib_nor_jinja2():
    """A warm rerun whose plots come from the cache must not pay for matplotlib; jinja2 loads when HTML is
    rendered."""
    code = ("import sys, ragbench.reporting.report, ragbench.reporting.terminal, ragbench.sweep.publish; "
            "print(sorted(m for m in ('matplotlib', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_reporting_room_keeps_its_size_limits():
    """No file in reporting/ over 500 lines, no function over 60 lines, none with more than 8 parameters."""
    problems = []
    for path in sorted(REPORTING.rglob("*.py")):
        src = path.read_text(encoding="utf-8")
        if len(src.splitlines()) > 500:
            problems.append(f"{path.name}: {len(src.splitlines())} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if node.end_lineno - node.lineno + 1 > 60 or n > 8:
                    problems.append(f"{path.name}:{node.lineno} {node.name}: "
                                    f"{node.end_lineno - node.lineno + 1} lines, {n} parameters")
    assert problems == []
