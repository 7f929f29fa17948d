"""The HTML report of a second night in headless Chromium: the headline (winner with its CI, the tied set, the
margin, since the previous sweep, against production, the next command), the sections since the previous sweep
and against production, and the links (the MLflow runs under the UI's URL, the previous report, production's
report) are rendered and visible; the page parses without an unclosed element; the relative links lead to the
reports on disk. The store is a real DuckDB file with hand-made per-query values and a live promotion (no sweep)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import datetime, timezone
from html.parser import HTMLParser

import polars as pl
import pytest

from ragbench.core.settings import Settings
from ragbench.reporting.write import write_html_report
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore
from ragbench.results.store_promotions import Promotion

UI = "http://mlflow.example:5000"
CHECK_JS = """<script>
window.addEventListener('load', () => {
  const seen = id => { const e = document.getElementById(id); if (!e) return null;
    const r = e.getBoundingClientRect(); return {h: r.height, w: r.width, text: e.innerText}; };
  const ids = ['headline', 'headline-table', 'links', 'since-previous', 'since-changes', 'vs-production',
               'vs-production-table', 'leaderboard'];
  const out = document.createElement('pre');
  out.id = 'ragbench-check';
  out.textContent = JSON.stringify({
    sections: Object.fromEntries(ids.map(i => [i, seen(i)])),
    rows: [...document.querySelectorAll('#headline-table tr')].map(tr => [tr.cells[0].innerText,
                                                                           tr.cells[1].innerText]),
    links: [...document.querySelectorAll('#links a')].map(a => [a.innerText, a.getAttribute('href')])});
  document.body.appendChild(out);
});
</script>"""


def _write(store: ResultStore, sweep_id: str, configs: dict[str, list[float]], run_ids: dict[str, str]) -> None:
    store.begin_sweep(sweep_id, "nightly", "h", {"metrics": {"primary": "ndcg@10"}}, "hand-made", "fp0")
    for cid, values in configs.items():
        rows = [(f"q{i:02d}", "x", m, v) for i, v in enumerate(values) for m in ("ndcg@10", "hit@10")]
        pq = pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                        "value": pl.Float64}, orient="row")
        run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
        store.write_config(sweep_id, ConfigResult(cid, f"cfg {cid[0]}", {"chunker": {"kind": "whole"}}, "fp0",
                                                  measures=pq, rankings=run, n_queries=len(values), n_unlabelled=0,
                                                  ms_per_query=1.0), mlflow_run_id=run_ids.get(cid))
    store.finish_sweep(sweep_id, "finished")


class _Balanced(HTMLParser):
    VOID = {"meta", "br", "img", "wbr", "hr", "input", "link"}

    def __init__(self):
        super().__init__()
        self.open: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes <{self.open[-1] if self.open else None}>")
        else:
            self.open.pop()


def test_the_second_nights_report_shows_the_headline_sections_and_links_in_chromium(tmp_path):
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable") if shutil.which(n)), None)
    if chromium is None:
        pytest.skip("no Chromium binary on PATH: `make browser` installs Debian's package")
    home = tmp_path / "home"
    store = ResultStore(home / "results.duckdb")
    weak, mid, strong = "w" * 16, "m" * 16, "s" * 16
    _write(store, "night1", {weak: [0.0] * 10 + [1.0] * 10, mid: [1.0] * 12 + [0.0] * 8}, {})
    settings = Settings(home=home, mlflow_ui_url=UI + "/")
    write_html_report(store, "night1", home / "reports" / "night1", settings=settings, log_to_mlflow=False)
    store.record_promotion(Promotion(
        promoted_at=datetime.now(timezone.utc), sweep_id="night1", config_id=weak, name="cfg w",
        spec={"chunker": {"kind": "whole"}}, dataset_fingerprint="fp0", primary_measure="ndcg_at_10",
        primary_value=0.5, p_value=None, forced=False, reason=None, who="ana", mlflow_model_version="1",
        collection=None, active=True, evidence="e"))
    _write(store, "night2", {weak: [0.0] * 10 + [1.0] * 10, mid: [1.0] * 12 + [0.0] * 8,
                             strong: [1.0] * 19 + [0.0]}, {strong: "childrun0"})
    store.set_sweep_mlflow_run("night2", "parentrun0")  # the sweep's MLflow parent run, as the tracker records it
    path = write_html_report(store, "night2", home / "reports" / "night2", settings=settings, log_to_mlflow=False)
    html = path.read_text(encoding="utf-8")
    doc = _Balanced()
    doc.feed(html)
    doc.close()
    assert doc.errors == [] and doc.open == [], (doc.errors, doc.open)

    page = path.with_name("check.html")
    page.write_text(html.replace("</body>", CHECK_JS + "</body>"), encoding="utf-8")
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
                           "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=10000", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="ragbench-check">(.*?)</pre>', proc.stdout, re.S)
    assert found, f"the page did not report (rc {proc.returncode}): {proc.stderr[-2000:]}"
    check = json.loads(found.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))
    sections = check["sections"]
    for name, box in sections.items():
        assert box is not None and box["h"] > 0 and box["w"] > 0, (name, sections)  # rendered, not hidden
    assert "wins on ndcg_at_10" in sections["headline"]["text"]
    rows = dict(check["rows"])
    assert set(rows) == {"tied with the best", "margin", "since the previous sweep", "against production", "next"}
    assert "over the runner-up" in rows["margin"] and "New winner" in rows["since the previous sweep"]
    assert "vs production" in rows["against production"] and f"ragbench promote night2 {strong}" in rows["next"]
    links = dict(check["links"])
    assert links["MLflow: sweep night2"] == f"{UI}/#/runs/parentrun0"
    assert links["MLflow: the best config's run"] == f"{UI}/#/runs/childrun0"
    prev = links["previous report (night1)"]
    assert prev == links["production's report (night1)"] == "../night1/report.html"
    assert (path.parent / prev).resolve() == (home / "reports" / "night1" / "report.html").resolve()
    assert "Since sweep night1" in html and "Best " in html  # the sections' own text, under their headings
