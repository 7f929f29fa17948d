"""The morning after a sweep, on the bundled demo (20 configs) swept once through the CLI: what the terminal, the
README's SQL and MLflow search, MLflow's runs and registry, and the HTML report in a real browser show.

The Prefect side (a real `prefect server`) is in tests/system/test_prefect_schedule.py.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import DEMO, ROOT, clean_env, write_config
from rich.console import Console
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.core.settings import Settings
from ragbench.results.tracking import default_tracking_uri

UNIFORM_PARAMS = {"chunker", "chunk_size", "chunk_unit", "chunk_overlap", "chunk_prefix", "embedder", "retriever",
                  "fusion", "rerank", "parents", "filter", "bm25_k1", "bm25_b", "dense_search", "hnsw_ef", "depth",
                  "hnsw_m", "label", "config_name", "config_id", "dataset_fingerprint"}


def _cli(*args: str, home: Path):
    return CliRunner().invoke(app, [*args, "--home", str(home)])


def _client(home: Path):
    from mlflow.tracking import MlflowClient

    uri = default_tracking_uri(Settings(home=home))
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def _readme_block(lang: str, containing: str) -> str:
    page = ROOT / "docs" / "getting-started.md"  # the manual's page with the SQL and the MLflow search
    blocks = re.findall(rf"```{lang}\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    found = [b for b in blocks if containing in b]
    assert found, f"no ```{lang} block with {containing!r} in {page.name}"
    return found[0]


# ---------------------------------------------------------------- terminal and JSON
def test_sweep_json_is_best_first_with_rank_and_primary(demo_sweep):
    rows = demo_sweep.rows
    assert [r["rank"] for r in rows] == list(range(1, 21))
    values = [r["primary"]["value"] for r in rows]
    assert all(r["primary"]["measure"] == "ndcg_at_10" for r in rows) and values == sorted(values, reverse=True)
    assert all(r["metrics"]["ndcg_at_10"] == r["primary"]["value"] for r in rows)
    assert {r["chunker"] for r in rows} == {"whole document", "markdown ≤256 tok, breadcrumb",
                                             "recursive 128 tok, overlap 0", "fixed 128 tok, overlap 32"}
    assert {r["retriever"] for r in rows} == {"BM25", "dense exact", "hybrid RRF"}
    assert {r["model"] for r in rows if r["retriever"] == "BM25"} == {"–"}
    assert not any("@" in k for r in rows for k in r["metrics"])  # one key scheme
    # the first line comes at once, before the imports and the sweep
    assert demo_sweep.stderr.splitlines()[0].startswith("starting sweep ")


def test_leaderboards_read_at_100_columns(demo_sweep):
    from ragbench.reporting.report import build_report, leaderboard_rich, vs_best_rich
    from ragbench.reporting.terminal import leaderboard_table
    from ragbench.results.outcomes import ConfigOutcome, SweepResult
    from ragbench.results.store import ResultStore

    rep = build_report(ResultStore(demo_sweep.home / "results.duckdb"), demo_sweep.sweep_id, n_resamples=2000)
    result = SweepResult(demo_sweep.sweep_id, "demo", "fp", demo_sweep.home,
                         [ConfigOutcome(r["config_id"], r["name"], r["spec"], r["status"], r["metrics"],
                                        r["n_queries"], r["n_unlabelled"]) for r in demo_sweep.rows],
                         [], 1.0, "ndcg@10")
    for table in (leaderboard_table(result, width=100), leaderboard_rich(rep, width=100), vs_best_rich(rep, 100)):
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(table)
        text = console.export_text()
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= 100
        body = [line for line in lines if re.match(r"^\s*\d+\s{2,}\S", line)]  # "  1  recursive …", not "128 tok"
        assert len(body) in (19, 20), "\n".join(lines)  # one line per config (vs-best: the 19 others)
        assert any(re.search(r"recursive 128 tok, overlap 0\s+all-MiniLM-L6-v2\s+(hybrid RRF|dense exact)", b)
                   for b in body)
    assert "ndcg_at_10" in text and "− best" in text  # the last one: each config against the best


def test_report_formats(demo_sweep):
    res = _cli("report", "latest", "--format", "csv", "--no-mlflow", home=demo_sweep.home)
    assert res.exit_code == 0, res.output
    table = list(csv.DictReader(io.StringIO(res.stdout.split("\nreport: ")[0])))
    assert len(table) == 20 and table[0]["rank"] == "1"
    assert {"chunker", "model", "retriever", "ndcg_at_10", "ndcg_at_10_ci_low", "p_vs_best"} <= set(table[0])
    assert table[0]["config_id"] == demo_sweep.rows[0]["config_id"]  # the same order as the sweep's JSON
    res = _cli("report", "latest", "--format", "markdown", "--no-mlflow", home=demo_sweep.home)
    assert "| # | chunker | model | retriever |" in res.stdout and "**Tied with the best**" in res.stdout
    res = _cli("report", "latest", "--format", "json", "--no-mlflow", home=demo_sweep.home)
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [r["rank"] for r in rows] == list(range(1, 21)) and rows[0]["primary"]["measure"] == "ndcg_at_10"


def test_compare_against_the_best_by_default_and_every_pair_with_all(demo_sweep):
    res = _cli("compare", "latest", "--json", home=demo_sweep.home)
    assert res.exit_code == 0, res.output
    vs = [json.loads(line) for line in res.stdout.splitlines()]
    best = demo_sweep.rows[0]["config_id"]
    assert len(vs) == 19 and all(r["best"] == best and r["config_id"] != best for r in vs)
    res = _cli("compare", "latest", "--all", "--json", "--measure", "ndcg@10", home=demo_sweep.home)
    assert res.exit_code == 0 and len(res.stdout.splitlines()) == 190
    res = _cli("compare", "latest", home=demo_sweep.home)
    assert res.exit_code == 0 and "every config against the best" in res.stdout


def test_explain_takes_a_rank_and_refuses_ambiguous_prefixes(demo_sweep):
    home, rows = demo_sweep.home, demo_sweep.rows
    res = _cli("explain", "latest", "1", "q07", "--show", "3", home=home)
    assert res.exit_code == 0, res.output
    assert rows[0]["label"] in res.output  # rank 1: the best config, not a config whose id starts with "1"
    res = _cli("explain", "latest", "#3", "q07", "--show", "3", home=home)
    assert res.exit_code == 0 and rows[2]["label"] in res.output
    res = _cli("explain", "latest", "21", "q07", home=home)
    assert res.exit_code == 2 and "rank 21 is not on the leaderboard" in res.output
    ids = [r["config_id"] for r in rows]
    letters = [c for c in "abcdef" if sum(i.startswith(c) for i in ids) >= 2]
    prefix = letters[0] if letters else "hybrid"  # an id prefix, else a name substring: both are ambiguous
    res = _cli("explain", "latest", prefix, "q07", home=home)
    assert res.exit_code == 2 and "ambiguous" in res.output and "Did you mean" in res.output


def test_a_closed_pipe_ends_quietly(tmp_path):
    cfg = write_config(tmp_path / "tiny.yaml", f"""name: pipe
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
output: {{mlflow: false}}
""")
    # `head -c 0` exits before the sweep prints anything, so the first write meets a closed pipe
    cmd = (f"set -o pipefail; {sys.executable} -m ragbench.cli sweep {cfg} --orchestrator local --json "
           f"--no-report --home {tmp_path / 'home'} | head -c 0")
    proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr[-3000:]


def test_version():
    import ragbench

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout.strip() == f"ragbench {ragbench.__version__}"


def test_the_embed_bar_advances_per_batch(tmp_path, monkeypatch):
    import contextlib

    from ragbench.core.cache import VectorCache
    from ragbench.embedding import embed as embed_mod
    from ragbench.embedding.spec import EmbedderSpec

    steps: list[int] = []

    @contextlib.contextmanager
    def recording(description, total):
        yield steps.append

    monkeypatch.setattr(embed_mod, "progress", recording)
    texts = [f"text number {i} about storage" for i in range(10)]
    vectors, stats = embed_mod.embed_texts(texts, EmbedderSpec(model="static-retrieval-m2v", batch_size=4),
                                           "document", VectorCache(tmp_path / "cache"))
    assert steps == [4, 4, 2] and stats.computed == 10 and vectors.shape[0] == 10


# ---------------------------------------------------------------- README as written
def test_readme_sql_and_mlflow_search_run_as_written(demo_sweep):
    sql = _readme_block("sql", "query_metrics")
    path = re.search(r"-- duckdb (\S+)", sql).group(1)
    con = duckdb.connect(str(demo_sweep.root / path), read_only=True)
    try:
        rows = con.execute(sql).fetchall()
        expected = con.execute("SELECT c.config_id, json_extract_string(c.spec_json, '$.retriever.kind'), m.mean "
                               "FROM configs c JOIN config_metrics m USING (sweep_id, config_id) "
                               "WHERE m.measure = 'ndcg_at_10'").fetchall()
    finally:
        con.close()
    assert len(rows) == 20 * 3 and 0 < rows[0][2] <= 1  # 20 configs x 3 labelled query classes

    code = _readme_block("python", "search_runs")
    proc = subprocess.run([sys.executable, "-c", code], cwd=demo_sweep.root, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [line for line in proc.stdout.splitlines()[1:] if line.strip()]
    want = [v for _, kind, v in expected if kind == "hybrid" and v > 0.75]
    assert want and len(printed) == len(want), proc.stdout
    assert [float(line.split()[-1]) for line in printed] == pytest.approx(sorted(want, reverse=True))


# ---------------------------------------------------------------- MLflow
def test_mlflow_runs_read_like_a_leaderboard(demo_sweep):
    client = _client(demo_sweep.home)
    exp = client.get_experiment_by_name("ragbench/demo")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"  # the runs page, not GenAI traces
    assert "ndcg_at_10" in exp.tags["mlflow.note.content"]
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get("ragbench.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("ragbench.kind") == "config"]
    assert len(parents) == 1 and len(children) == 20
    parent = parents[0]
    assert parent.info.run_name == demo_sweep.sweep_id
    best = demo_sweep.rows[0]
    assert parent.data.tags["ragbench.best_config_id"] == best["config_id"]
    assert parent.data.metrics["ndcg_at_10"] == pytest.approx(best["primary"]["value"])
    assert best["chunker"] in parent.data.tags["ragbench.best_label"]
    assert parent.data.tags["ragbench.tied_with_best"].count(" | ") >= 1  # labels of the tied configs
    assert "| # | chunker | model | retriever |" in parent.data.tags["mlflow.note.content"]
    assert "report/report.html" in {a.path for a in client.list_artifacts(parent.info.run_id, "report")}

    keys = {frozenset(c.data.params) for c in children}
    assert keys == {frozenset(UNIFORM_PARAMS)}  # the same params on every child, whatever its kind
    for c in children:
        p = c.data.params
        assert "null" not in p.values() and "None" not in p.values()
        assert c.info.run_name == p["label"]
        assert (p["embedder"] == "none") == (p["retriever"] == "bm25")
        assert p["chunk_overlap"] != "none" and p["fusion"] == ("rrf" if p["retriever"] == "hybrid" else "none")
        assert not any("@" in k or "/" in k for k in c.data.metrics)
    one = next(c for c in children if c.data.tags["ragbench.config_id"] == best["config_id"])
    artifacts = {a.path for a in client.list_artifacts(one.info.run_id)}
    assert {"per_query.json", "per_query.parquet", "rankings.parquet", "config.json"} <= artifacts
    assert "plots/config.png" in {a.path for a in client.list_artifacts(one.info.run_id, "plots")}
    table = json.loads(Path(client.download_artifacts(one.info.run_id, "per_query.json")).read_text())
    assert "ndcg_at_10" in table["columns"] and len(table["data"]) == 34  # previewable: a row per query


def test_promotion_gives_the_registry_version_its_context(demo_sweep, monkeypatch):
    home, rows = demo_sweep.home, demo_sweep.rows
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI"):  # mlflow.set_tracking_uri in earlier tests sets them
        monkeypatch.delenv(var, raising=False)
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "promote", "latest", "1", "--who", "tester",
                           "--home", str(home)], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for noise in ("CloudPickle", "Downloading artifacts", "Successfully registered", "it/s]"):
        assert noise not in proc.stderr + proc.stdout, noise

    client = _client(home)
    v1 = client.get_model_version("ragbench-retriever", "1")
    best = rows[0]
    child = next(r for r in client.search_runs([client.get_experiment_by_name("ragbench/demo").experiment_id],
                                               f"tags.`ragbench.config_id` = '{best['config_id']}'"))
    assert {k: v1.tags[k] for k in ("sweep_id", "config_id", "dataset_fingerprint", "metric", "forced", "reason",
                                    "who", "source_run_id")} == {
        "sweep_id": demo_sweep.sweep_id, "config_id": best["config_id"],
        "dataset_fingerprint": best["dataset_fingerprint"], "metric": "ndcg_at_10", "forced": "false",
        "reason": "none", "who": "tester", "source_run_id": child.info.run_id}
    assert float(v1.tags["metric_value"]) == pytest.approx(best["primary"]["value"], abs=1e-5)
    assert "p_value" in v1.tags and v1.tags["previous_version"] == "none"
    assert f"runs/{child.info.run_id}" in v1.description and best["chunker"] in v1.description

    worst = rows[-1]  # forced past the gate: the version says so, with the evidence against production
    res = _cli("promote", "latest", "20", "--force", "--reason", "smaller index", "--who", "tester", home=home)
    assert res.exit_code == 0, res.output
    v2 = client.get_model_version("ragbench-retriever", "2")
    assert v2.tags["config_id"] == worst["config_id"] and v2.tags["forced"] == "true"
    assert v2.tags["reason"] == "smaller index" and v2.tags["previous_version"] == "1"
    assert float(v2.tags["p_value"]) < 0.05 and "production" in v2.tags["p_value_vs"]
    assert "FORCED" in v2.description
    res = _cli("rollback", home=home)  # leave the home's production as the first promotion
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------- the HTML report in a browser
CHECK_JS = """<script>
window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const doc = document.documentElement;
  const tables = [...document.querySelectorAll('table')].map(t => ({
    id: t.id || t.className, right: t.getBoundingClientRect().right}));
  const images = [...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0, alt: i.alt}));
  const urls = [];
  for (const el of document.querySelectorAll('*')) for (const a of ['src', 'href', 'srcset', 'action', 'poster']) {
    const v = el.getAttribute(a);
    if (v && !v.startsWith('data:') && !v.startsWith('#')) urls.push(v);
  }
  for (const s of document.styleSheets) for (const r of s.cssRules) {
    for (const u of (r.cssText.match(/url\\([^)]*\\)/g) || [])) if (!u.includes('data:')) urls.push(u);
  }
  const loaded = performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith('data:'));
  const out = document.createElement('pre');
  out.id = 'ragbench-check';
  out.textContent = JSON.stringify({viewport: doc.clientWidth, scrollWidth: doc.scrollWidth, tables, images, urls,
                                    loaded});
  document.body.appendChild(out);
});
</script>"""


def find_chromium() -> str | None:
    """A Chromium binary on PATH, or None: a test installs nothing (`make browser` does, and `make test` runs it)."""
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    return next((shutil.which(n) for n in names if shutil.which(n)), None)


def test_html_report_fits_1400_px_in_chromium(demo_sweep, tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium binary (chromium, chromium-browser, google-chrome) on PATH: `make browser` "
                    "installs Debian's package")
    html = demo_sweep.home / "reports" / demo_sweep.sweep_id / "report.html"  # written by the sweep itself
    page = tmp_path / "check.html"
    page.write_text(html.read_text(encoding="utf-8").replace("</body>", CHECK_JS + "</body>"), encoding="utf-8")
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                           "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=10000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="ragbench-check">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the page did not report (rc {proc.returncode}): {proc.stderr[-2000:]}"
    check = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    assert 1300 <= check["viewport"] <= 1400
    assert check["scrollWidth"] <= check["viewport"], check  # no horizontal scrolling at 1,400 px
    assert len(check["tables"]) >= 6 and all(t["right"] <= check["viewport"] for t in check["tables"]), check
    assert len(check["images"]) >= 3 and all(i["ok"] for i in check["images"]), check["images"]
    assert check["urls"] == [] and check["loaded"] == [], check  # nothing from outside the file
    text = html.read_text(encoding="utf-8")
    assert text.index("id='vs-best'") < text.index("<details id='all-pairs'>")
    assert "213.000" not in text and re.search(r"<td class='num'>213</td>", text)  # chunk counts as integers
