"""Three BM25 configs on a SciFact slice with *graded* labels: the stored per-query values equal trec_eval's on the
stored rankings (whose BM25 scores tie), and the paired tests and their Holm correction check out.

The slice is written as a BEIR folder with relevant documents graded 1 or 2, two judged non-relevant (0) documents
per query, and five queries judged only 0 (unlabelled). The sweep computes nDCG@10 with linear gain (trec_eval's
``ndcg_cut``). trec_eval (``pytrec_eval``) gets the raw document scores -- each document's best chunk score from the
stored ranking -- and applies its own tie rule; ranx gets ragbench's order as strictly decreasing scores (ranx breaks
ties its own way), so its ``ndcg`` checks the formula and its tests the p-values. Holm is checked by hand, with three
comparisons (every pair) and two (each config against the best).
"""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
from conftest import SCIFACT, requires_scifact, write_config

from ragbench.core.hashing import stable_hash
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.comparison import compare_configs
from ragbench.evaluation.paired_tests import required_resamples
from ragbench.reporting.report import per_query_values
from ragbench.results.store import ResultStore

K1 = (1.2, 0.5, 0.0)  # k1 = 0: term presence only, so documents tie often


def _graded_slice(root):
    """SciFact test, 200 queries and 2000 docs, written back as BEIR with graded labels; returns the qrels."""
    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset

    ds = load_dataset(DatasetSpec(path=SCIFACT, split="test", max_queries=200, max_docs=2000, seed=1, spans=False))
    (root / "qrels").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w") as f:
        for d, t, x in ds.corpus.select("doc_id", "title", "text").iter_rows():
            f.write(json.dumps({"_id": d, "title": t, "text": x}) + "\n")
    with open(root / "queries.jsonl", "w") as f:
        for q, t in ds.queries.select("query_id", "text").iter_rows():
            f.write(json.dumps({"_id": q, "text": t}) + "\n")
    docs = sorted(ds.corpus["doc_id"].to_list())
    qids = sorted(ds.queries["query_id"].to_list())
    zero_only = set(qids[:5])
    rows = []
    for q, d, _ in ds.qrels.iter_rows():
        rows.append((q, d, 0 if q in zero_only else 1 + int(stable_hash([q, d]), 16) % 2))
    for q in qids:  # two judged non-relevant documents each
        judged = {d for qq, d, _ in rows if qq == q}
        extra = [d for d in docs[int(stable_hash([q]), 16) % 1000:] if d not in judged][:2]
        rows += [(q, d, 0) for d in extra]
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in rows))
    return rows, zero_only


def _holm_by_hand(p: dict) -> dict:
    order = sorted(p, key=lambda k: p[k])
    out, running, m = {}, 0.0, len(p)
    for i, k in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[k]))
        out[k] = running
    return out


@requires_scifact()
def test_bm25_comparison_with_graded_labels_and_ties_matches_trec_eval_and_ranx(home, settings, tmp_path):
    pytrec_eval = pytest.importorskip("pytrec_eval")
    mpmath = pytest.importorskip("mpmath")
    from ranx import Qrels, Run, compare, evaluate

    from ragbench.config import load_config
    from ragbench.sweep import run_sweep

    qrel_rows, zero_only = _graded_slice(tmp_path / "sf")
    assert {r for _, _, r in qrel_rows} == {0, 1, 2}
    retrievers = ", ".join(f"{{kind: bm25, k1: {k}}}" for k in K1)
    cfg = load_config(write_config(tmp_path / "sf.yaml", f"""name: sf-graded
dataset: {{path: {tmp_path / 'sf'}, split: test, spans: false}}
chunkers: [{{kind: whole}}]
retrievers: [{retrievers}]
metrics: {{measures: [ndcg], cutoffs: [10], gain: linear}}
output: {{mlflow: false}}
"""))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 3
    store = ResultStore(home / "results.duckdb")
    ids = {o.spec["retriever"]["k1"]: o.config_id for o in result.outcomes}
    pq = per_query_values(store, result.sweep_id, ["ndcg@10"])  # either spelling
    assert pq["query_id"].n_unique() == 200
    nan_q = set(pq.filter(pl.col("value").is_nan())["query_id"].unique().to_list())
    assert nan_q == zero_only  # judged only 0: unlabelled, never scored

    trec_qrels: dict[str, dict[str, int]] = {}
    for q, d, r in qrel_rows:
        trec_qrels.setdefault(q, {})[d] = r
    ranx_qrels = Qrels({q: {d: r for d, r in v.items() if r > 0} for q, v in trec_qrels.items() if q not in zero_only})
    ranx_runs, tie_queries = [], set()
    for k1 in K1:
        chunk_run = store.query("SELECT query_id, rank, chunk_id, doc_id, score FROM rankings WHERE sweep_id = ? AND "
                                "config_id = ?", [result.sweep_id, ids[k1]])
        docs = document_run(chunk_run)
        tied = docs.with_columns(pl.col("score").cast(pl.Float32)).filter(
            pl.struct("query_id", "score").is_duplicated() & (pl.col("rank") <= 11))
        tie_queries |= set(tied["query_id"].to_list())
        # trec_eval: the raw scores, its own tie rule
        trec_run = {q: {d: float(s) for _, d, s in g.select("query_id", "doc_id", "score").iter_rows()}
                    for (q,), g in docs.group_by("query_id")}
        theirs = pytrec_eval.RelevanceEvaluator(trec_qrels, {"ndcg_cut.10"}).evaluate(trec_run)
        ours = dict(pq.filter(pl.col("config_id") == ids[k1]).select("query_id", "value").iter_rows())
        compared = 0
        for q, v in ours.items():
            if q in zero_only:
                continue
            assert v == pytest.approx(theirs[q]["ndcg_cut_10"] if q in theirs else 0.0, abs=1e-12, rel=0), (k1, q)
            compared += 1
        assert compared == 195
        # ranx: our order as strictly decreasing scores -> the formula
        run = Run({q: {d: -float(r) for _, r, d in g.select("query_id", "rank", "doc_id").iter_rows()}
                   for (q,), g in docs.group_by("query_id")}, name=f"k1={k1}")
        evaluate(ranx_qrels, run, "ndcg@10", make_comparable=True)
        for q, v in run.scores["ndcg@10"].items():
            assert ours[q] == pytest.approx(v, abs=1e-12, rel=0), (k1, q)
        ranx_runs.append(run)
    assert len(tie_queries) >= 100  # BM25 ties within the top 10 (+1) that trec_eval's rule had to order

    wide = pq.pivot(on="config_id", index="query_id", values="value")
    names = {ids[k1]: f"k1={k1}" for k1 in K1}
    n = 20_000
    for test, ranx_test in (("student", "student"), ("randomization", "fisher")):
        report = compare(ranx_qrels, ranx_runs, ["ndcg@10"], stat_test=ranx_test, n_permutations=n,
                         make_comparable=True, rounding_digits=12)
        for mode, m in (("all", 3), ("vs_best", 2)):
            comp = compare_configs(pq, "ndcg@10", test=test, n_resamples=n, pairs=mode)
            assert comp.n_comparisons == len(comp.pairs) == m
            assert comp.best == max(ids.values(), key=lambda c: np.nanmean(wide[c].to_numpy()))
            raw = {(p.config_a, p.config_b): p.p_value for p in comp.pairs}
            holm = _holm_by_hand(raw)
            for p in comp.pairs:
                assert p.n == 195
                a, b = wide[p.config_a].to_numpy(), wide[p.config_b].to_numpy()
                keep = ~(np.isnan(a) | np.isnan(b))
                assert p.mean_diff == pytest.approx(float(np.mean(a[keep] - b[keep])), abs=1e-15)
                assert p.p_adjusted == holm[(p.config_a, p.config_b)]
                assert p.significant == (holm[(p.config_a, p.config_b)] < 0.05)
                ranx_p = report.comparisons[frozenset([names[p.config_a], names[p.config_b]])]["ndcg@10"]["p_value"]
                if test == "student":
                    d = a[keep] - b[keep]
                    mpmath.mp.dps = 40
                    t = mpmath.mpf(float(d.mean())) / (mpmath.mpf(float(d.std(ddof=1))) / mpmath.sqrt(len(d)))
                    nu = len(d) - 1
                    exact_t = float(mpmath.betainc(nu / mpmath.mpf(2), 0.5, 0, nu / (nu + t * t), regularized=True))
                    assert p.p_value == pytest.approx(exact_t, rel=1e-10)
                    assert p.p_value == pytest.approx(ranx_p, abs=1e-12, rel=0)
                else:
                    assert comp.n_resamples == max(n, required_resamples(m, 0.05)) == n and not p.exact
                    # two Monte Carlo estimates of one p-value (different streams): 5 binomial SE + the +1 terms
                    tol = 5 * math.sqrt(2 * max(p.p_value, 1e-4) * (1 - p.p_value) / n) + 1 / (n + 1)
                    assert abs(p.p_value - ranx_p) <= tol, (p.p_value, ranx_p)
            tied = {comp.best} | {c for c in ids.values() if c != comp.best
                                  and holm[tuple(sorted((c, comp.best)))] >= 0.05}
            assert set(comp.tied_with_best) == tied
            # Holm is not a no-op here: some adjusted p-value differs from its raw one
            assert any(p.p_adjusted != p.p_value for p in comp.pairs if p.p_value < 1.0)
