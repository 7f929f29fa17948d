"""The morning after: two sweeps of one name on one home with a promotion in between, the second adding a chunker.

The JSON report's ``since_previous`` and ``vs_production`` are checked against what DuckDB holds (the tables queried
here and the differences, win/tie/loss counts, winners and flipped questions recomputed from them; the paired t-test
p-values recomputed with scipy), ``ragbench diff`` against the report, and the HTML report is parsed with
html.parser with both sections present.
"""

from __future__ import annotations

import json
import math
from html.parser import HTMLParser

import duckdb
import numpy as np
import pytest
from conftest import DEMO, write_config
from scipy import stats
from typer.testing import CliRunner

from ragbench.cli.main import app
from ragbench.config import load_config
from ragbench.promotion.production import PromotionRequest, promote
from ragbench.results.store import ResultStore
from ragbench.sweep import run_sweep

SWEEP = """name: nightly
dataset: {{path: {demo}, queries: all}}
chunkers: [{chunkers}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: dense, exact: true}}]
metrics: {{measures: [ndcg, hit], cutoffs: [10], primary: ndcg@10}}
output: {{mlflow: false}}
"""
NIGHT_1 = "{kind: whole}, {kind: recursive, size: 128, overlap: 0}"
NIGHT_2 = NIGHT_1 + ", {kind: fixed, size: 128, overlap: 32}"
PRIMARY = "ndcg_at_10"


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
    """Night 1 (two chunkers), its best promoted, night 2 (a third chunker); the home and both sweep ids."""
    from ragbench.core.settings import Settings

    root = tmp_path_factory.mktemp("nights")
    home = root / "home"
    settings = Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    ids = []
    for i, chunkers in enumerate((NIGHT_1, NIGHT_2), 1):
        cfg = load_config(write_config(root / f"night{i}.yaml", SWEEP.format(demo=DEMO, chunkers=chunkers)))
        ids.append(run_sweep(cfg, settings).sweep_id)
        if i == 1:
            promote(ResultStore(home / "results.duckdb"), PromotionRequest(ids[0], "1", who="tester"),
                    settings=settings)
    return home, ids[0], ids[1]


def _db(home):
    return duckdb.connect(str(home / "results.duckdb"), read_only=True)


def _values(con, sweep_id: str, config_id: str, measure: str = PRIMARY) -> dict[str, float]:
    return dict(con.execute("SELECT query_id, value FROM query_metrics WHERE sweep_id = ? AND config_id = ? AND "
                            "measure = ?", [sweep_id, config_id, measure]).fetchall())


def _paired(a: dict[str, float], b: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    qs = sorted(q for q in set(a) & set(b) if not (math.isnan(a[q]) or math.isnan(b[q])))
    return np.array([a[q] for q in qs]), np.array([b[q] for q in qs])


def _best(con, sweep_id: str) -> str:
    rows = con.execute("SELECT config_id, avg(value) FILTER (WHERE NOT isnan(value)) AS m FROM query_metrics WHERE "
                       "sweep_id = ? AND measure = ? GROUP BY config_id ORDER BY m DESC, config_id LIMIT 1",
                       [sweep_id, PRIMARY]).fetchall()
    return rows[0][0]


def _report(home, *extra: str) -> tuple[dict, str]:
    out = home.parent / "report"
    res = CliRunner().invoke(app, ["report", "latest", "--format", "json", "--no-mlflow", "--out", str(out),
                                   "--home", str(home), *extra], terminal_width=200)
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert rows and all(r["since_previous"] == rows[0]["since_previous"] for r in rows)  # the same on every line
    return rows[0], (out / "report.html").read_text(encoding="utf-8")


def test_since_previous_matches_duckdb(nights):
    home, s1, s2 = nights
    row, _ = _report(home, "--test", "student")
    since = row["since_previous"]
    assert row["since_previous_reason"] is None
    assert since["previous_sweep_id"] == s1 and since["sweep_id"] == s2 and since["chosen"] == "predecessor"
    with _db(home) as con:
        cfgs = {s: {c for (c,) in con.execute("SELECT config_id FROM configs WHERE sweep_id = ? AND status = "
                                               "'finished'", [s]).fetchall()} for s in (s1, s2)}
        assert [c["config_id"] for c in since["added"]] == sorted(cfgs[s2] - cfgs[s1])
        assert len(since["added"]) == 1 and "fixed" in since["added"][0]["name"]
        assert since["removed"] == []
        changes = {c["config_id"]: c for c in since["changes"]}
        assert set(changes) == cfgs[s1] & cfgs[s2]
        for cid, c in changes.items():
            now, then = _paired(_values(con, s2, cid), _values(con, s1, cid))
            d = now - then
            assert c["n"] == len(d) and c["mean_diff"] == pytest.approx(d.mean(), abs=1e-12)
            assert (c["wins"], c["ties"], c["losses"]) == (int((d > 1e-12).sum()), int((abs(d) <= 1e-12).sum()),
                                                           int((d < -1e-12).sum()))
        win_then, win_now = _best(con, s1), _best(con, s2)
        assert since["winner"]["then"]["config_id"] == win_then and since["winner"]["now"]["config_id"] == win_now
        assert since["winner"]["same"] is (win_then == win_now)
        assert since["winner"]["now"]["mean"] == pytest.approx(
            np.nanmean(list(_values(con, s2, win_now).values())), abs=1e-12)
        assert since["flip_measure"] == "hit_at_10"
        hit_then, hit_now = _values(con, s1, win_then, "hit_at_10"), _values(con, s2, win_now, "hit_at_10")
    labelled = [q for q in sorted(set(hit_then) & set(hit_now)) if not (math.isnan(hit_then[q]) or
                                                                        math.isnan(hit_now[q]))]
    lost = [q for q in labelled if hit_then[q] > 0 and not hit_now[q] > 0]
    gained = [q for q in labelled if hit_now[q] > 0 and not hit_then[q] > 0]
    assert lost or gained  # a new winner with another hit@10: something flipped
    assert [f["query_id"] for f in since["flips"] if f["direction"] == "lost"] == lost
    assert [f["query_id"] for f in since["flips"] if f["direction"] == "gained"] == gained
    texts = {q["_id"]: q["text"] for q in map(json.loads, (DEMO / "queries.jsonl").read_text().splitlines())}
    assert all(f["text"] == texts[f["query_id"]] for f in since["flips"])


def test_vs_production_matches_duckdb(nights):
    home, s1, s2 = nights
    row, _ = _report(home, "--test", "student")
    vs = row["vs_production"]
    assert row["vs_production_reason"] is None
    with _db(home) as con:
        (prod_cfg, prod_sweep), = con.execute("SELECT config_id, sweep_id FROM promotions WHERE active").fetchall()
        best = _best(con, s2)
        # production was evaluated in this sweep too (night 2 reused it): its values come from here
        best_v, prod_v = _paired(_values(con, s2, best), _values(con, s2, prod_cfg))
    assert prod_sweep == s1 and vs["promoted_from"] == s1 and vs["values_from"] == s2
    assert vs["best"]["config_id"] == best and vs["production"]["config_id"] == prod_cfg
    d = best_v - prod_v
    assert vs["n"] == len(d) and vs["mean_diff"] == pytest.approx(d.mean(), abs=1e-12)
    assert (vs["mean_a"], vs["mean_b"]) == (pytest.approx(best_v.mean()), pytest.approx(prod_v.mean()))
    assert (vs["wins"], vs["ties"], vs["losses"]) == (int((d > 1e-12).sum()), int((abs(d) <= 1e-12).sum()),
                                                      int((d < -1e-12).sum()))
    assert vs["p_value"] == pytest.approx(stats.ttest_rel(best_v, prod_v).pvalue, rel=1e-9)
    # the gate's word: a command only when it allows, and then to promote exactly this best
    assert vs["gate"]
    assert (vs["command"] == f"ragbench promote {s2} {best}") if vs["gate_allows"] else vs["command"] is None
    if vs["mean_diff"] <= 0:
        assert not vs["gate_allows"]


def test_diff_command_and_html_report_show_both_sections(nights):
    home, s1, s2 = nights
    row, html = _report(home)  # the default test: randomization
    res = CliRunner().invoke(app, ["diff", "--json", "--home", str(home)])
    assert res.exit_code == 0, res.output
    diff = json.loads(res.stdout)["since_previous"]
    assert diff == row["since_previous"]  # the same section, the same test and resamples
    assert all(0 < c["p_value"] <= 1 for c in diff["changes"] if c["p_value"] is not None)
    res = CliRunner().invoke(app, ["diff", s2, s1, "--json", "--home", str(home)])  # backwards: now = night 1
    back = json.loads(res.stdout)["since_previous"]
    assert back["sweep_id"] == s1 and back["chosen"] == "--since"
    assert [c["config_id"] for c in back["removed"]] == [c["config_id"] for c in diff["added"]]
    first = CliRunner().invoke(app, ["diff", s1, "--json", "--home", str(home)])
    assert json.loads(first.stdout)["since_previous"] is None and "no previous" in first.stdout

    class Sections(HTMLParser):
        def __init__(self):
            super().__init__()
            self.ids, self.open = set(), []

        def handle_starttag(self, tag, attrs):
            self.ids.update(v for k, v in attrs if k == "id")
            if tag in ("table", "tr", "td", "th", "p", "h2"):
                self.open.append(tag)

        def handle_endtag(self, tag):
            if tag in ("table", "tr", "td", "th", "p", "h2"):
                assert self.open and self.open.pop() == tag, f"</{tag}> closes {self.open[-1:]}"

    parser = Sections()
    parser.feed(html)
    parser.close()
    assert not parser.open
    assert {"since-previous", "since-changes", "vs-production", "vs-production-table"} <= parser.ids
    assert f"Since sweep {s1}" in html and "Against production" in html
    text = CliRunner().invoke(app, ["report", "latest", "--no-mlflow", "--out", str(home.parent / "r2"), "--home",
                                    str(home)], terminal_width=200).stdout
    assert "Since the previous sweep" in text and "Against production" in text


# ---------------------------------------------------------------- the other paths, on a hand-made store (no sweep)
def _write(store: ResultStore, sweep_id: str, fp: str, configs: dict[str, list[float]]) -> None:
    import polars as pl

    from ragbench.results.outcomes import ConfigResult

    store.begin_sweep(sweep_id, "hand", "h", {"metrics": {"primary": "ndcg@10"}}, "hand-made", fp)
    for cid, values in configs.items():
        rows = [(f"q{i:02d}", "x", m, v) for i, v in enumerate(values) for m in ("ndcg@10", "hit@10")]
        pq = pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                        "value": pl.Float64}, orient="row")
        run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
        store.write_config(sweep_id, ConfigResult(cid, f"cfg {cid[0]}", {"chunker": {"kind": "whole"}}, fp,
                                                  measures=pq, rankings=run, n_queries=len(values), n_unlabelled=0,
                                                  ms_per_query=1.0))
    store.finish_sweep(sweep_id, "finished")


def _live(store: ResultStore, config_id: str, sweep_id: str, fp: str) -> None:
    from datetime import datetime, timezone

    from ragbench.results.store_promotions import Promotion

    store.record_promotion(Promotion(
        promoted_at=datetime.now(timezone.utc), sweep_id=sweep_id, config_id=config_id, name=f"cfg {config_id[0]}",
        spec={"chunker": {"kind": "whole"}}, dataset_fingerprint=fp, primary_measure="ndcg_at_10", primary_value=0.1,
        p_value=None, forced=False, reason=None, who="ana", mlflow_model_version="1", collection=None, active=True,
        evidence="e"))


def test_no_predecessor_nothing_live_other_fingerprint_and_a_promotable_best(tmp_path):
    from ragbench.reporting.model import build_report
    from ragbench.reporting.render_json import report_json

    store = ResultStore(tmp_path / "results.duckdb")
    strong, weak = "s" * 16, "w" * 16
    _write(store, "night1", "fp0", {weak: [0.0] * 20})

    def section(sweep_id):
        return json.loads(report_json(build_report(store, sweep_id, n_resamples=2_000)).splitlines()[0])

    first = section("night1")
    assert first["since_previous"] is None and "no previous finished sweep named 'hand'" in \
        first["since_previous_reason"]
    assert first["vs_production"] is None and "nothing is in production" in first["vs_production_reason"]
    _live(store, weak, "night1", "fpX")
    assert "no promotion is live on dataset fp0" in section("night1")["vs_production_reason"]
    _live(store, weak, "night1", "fp0")
    _write(store, "night2", "fp0", {weak: [0.0] * 20, strong: [1.0] * 18 + [0.0] * 2})
    row = section("night2")
    vs = row["vs_production"]
    assert vs["best"]["config_id"] == strong and vs["production"]["config_id"] == weak
    assert (vs["mean_diff"], vs["n"], vs["wins"], vs["ties"], vs["losses"]) == (pytest.approx(0.9), 20, 18, 2, 0)
    assert vs["gate_allows"] and vs["command"] == f"ragbench promote night2 {strong}"
    assert vs["p_value"] == pytest.approx(2 / 2 ** 18)  # exact sign flips: 18 nonzero differences, all positive
    since = row["since_previous"]
    assert since["previous_sweep_id"] == "night1" and [c["config_id"] for c in since["added"]] == [strong]
    assert since["winner"]["same"] is False and since["winner"]["change"] == pytest.approx(0.9)
    assert [f["query_id"] for f in since["flips"] if f["direction"] == "gained"] == [f"q{i:02d}" for i in range(18)]
    assert all(f["text"] is None for f in since["flips"])  # no dataset at hand: listed by id
