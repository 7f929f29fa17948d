"""Tests for ragbench.evaluation.stats (comparison statistics between configurations)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from ragbench.evaluation.stats import (
    Comparison,
    ConfidenceInterval,
    PairedTest,
    bootstrap_ci,
    compare_configs,
    holm_correction,
    paired_randomization_test,
    paired_t_test,
)

# ranx/numba emit a harmless NumbaTypeSafetyWarning ("unsafe cast from uint64 to int64").
pytestmark = pytest.mark.filterwarnings("ignore:.*unsafe cast.*")


def _long(values: dict[str, list[float]], measure: str = "ndcg@10") -> pl.DataFrame:
    """{config: [v_q0, v_q1, ...]} -> long per_query frame."""
    rows = [
        (cfg, f"q{i}", measure, float(v))
        for cfg, vs in values.items()
        for i, v in enumerate(vs)
    ]
    return pl.DataFrame(
        rows,
        schema={"config_id": pl.String, "query_id": pl.String, "measure": pl.String, "value": pl.Float64},
        orient="row",
    )


# --------------------------------------------------------------------------
# Holm
# --------------------------------------------------------------------------
def test_holm_hand_worked_example():
    # m = 4, sorted: d=.005*4=.02, a=.01*3=.03, c=.03*2=.06, b=.04*1=.04 -> running max .06.
    # (The often-quoted [0.02, 0.06, 0.06, 0.02] is wrong for 'a': its rank is 2, so 3 * 0.01.)
    adj = holm_correction({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert list(adj) == ["a", "b", "c", "d"]  # keys keep input order
    assert adj == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06, "d": 0.02})


def test_holm_caps_at_one_monotone_and_nan():
    raw = {1: 0.5, 2: 0.2, 3: 0.9, 4: math.nan, 5: 0.2}
    adj = holm_correction(raw)
    assert math.isnan(adj[4])  # NaN passes through and is not counted in m
    # m = 4: 0.2*4 = 0.8, 0.2*3 = 0.6 -> 0.8 (monotone), 0.5*2 = 1.0, 0.9*1 -> 1.0
    assert adj[2] == pytest.approx(0.8) and adj[5] == pytest.approx(0.8)
    assert adj[1] == 1.0 and adj[3] == 1.0
    finite = [(raw[k], adj[k]) for k in raw if not math.isnan(raw[k])]
    finite.sort()
    assert all(a1 <= a2 for (_, a1), (_, a2) in zip(finite, finite[1:]))
    assert all(adj[k] >= raw[k] for k in raw if not math.isnan(raw[k]))
    assert holm_correction({"only": 0.03}) == {"only": 0.03}
    assert holm_correction({}) == {}


# --------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------
def test_bootstrap_ci_contains_mean_and_is_deterministic():
    x = np.random.default_rng(1).beta(2, 3, size=80)
    ci = bootstrap_ci(x, seed=7)
    assert isinstance(ci, ConfidenceInterval)
    assert ci.n == 80 and ci.mean == pytest.approx(x.mean())
    assert ci.low < ci.mean < ci.high
    assert bootstrap_ci(x, seed=7) == ci
    assert bootstrap_ci(x, seed=8) != ci
    # Width close to the normal-theory interval 2 * 1.96 * s / sqrt(n).
    expected = 2 * 1.959964 * x.std(ddof=1) / math.sqrt(x.size)
    assert (ci.high - ci.low) == pytest.approx(expected, rel=0.1)


def test_bootstrap_ci_narrows_with_more_queries_and_drops_nan():
    rng = np.random.default_rng(2)
    small = bootstrap_ci(rng.uniform(size=20), seed=0)
    large = bootstrap_ci(rng.uniform(size=500), seed=0)
    assert (large.high - large.low) < 0.5 * (small.high - small.low)

    x = rng.uniform(size=30)
    with_nan = np.concatenate([x[:10], [np.nan, np.nan], x[10:]])
    assert bootstrap_ci(with_nan, seed=3) == bootstrap_ci(x, seed=3)


def test_bootstrap_ci_degenerate_sizes():
    empty = bootstrap_ci(np.array([np.nan, np.nan]))
    assert empty.n == 0 and math.isnan(empty.mean) and math.isnan(empty.low)
    one = bootstrap_ci(np.array([0.4, np.nan]))
    assert (one.n, one.mean, one.low, one.high) == (1, 0.4, 0.4, 0.4)
    narrow = bootstrap_ci(np.arange(10.0), confidence=0.5, seed=0)
    wide = bootstrap_ci(np.arange(10.0), confidence=0.99, seed=0)
    assert wide.low < narrow.low < narrow.high < wide.high


# --------------------------------------------------------------------------
# Paired tests
# --------------------------------------------------------------------------
def test_paired_t_test_matches_scipy_and_drops_nan_pairs():
    rng = np.random.default_rng(3)
    a = rng.uniform(size=40)
    b = a - 0.05 + rng.normal(scale=0.1, size=40)
    res = paired_t_test(a, b)
    ref = sps.ttest_rel(a, b)
    assert isinstance(res, PairedTest) and res.test == "student" and res.n == 40
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-10)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert res.mean_diff == pytest.approx(np.mean(a - b))

    a2, b2 = a.copy(), b.copy()
    a2[0], b2[5] = np.nan, np.nan
    keep = np.ones(40, bool)
    keep[[0, 5]] = False
    res2 = paired_t_test(a2, b2)
    assert res2.n == 38
    assert res2.p_value == pytest.approx(sps.ttest_rel(a[keep], b[keep]).pvalue, rel=1e-10)

    assert paired_t_test(a, a).p_value == 1.0  # no differences at all: no evidence
    assert math.isnan(paired_t_test([0.1], [0.2]).p_value)
    with pytest.raises(ValueError):
        paired_t_test(a, b[:-1])


def test_randomization_exact_enumeration_hand_worked():
    # d = [1, 2, 3]: |sum of ±d| over the 8 sign vectors = 6,4,2,0,0,2,4,6; observed 6 -> 2/8.
    res = paired_randomization_test([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], n_resamples=100)
    assert res.n_resamples == 8 and res.p_value == pytest.approx(0.25)
    assert res.mean_diff == pytest.approx(2.0)
    # d = [1, -1]: observed 0, every resample is as extreme -> 1.
    assert paired_randomization_test([1.0, 0.0], [0.0, 1.0]).p_value == 1.0


def test_randomization_monte_carlo_matches_exact_and_is_deterministic():
    rng = np.random.default_rng(4)
    a = rng.uniform(size=12)
    b = a - 0.08 + rng.normal(scale=0.2, size=12)
    exact = paired_randomization_test(a, b, n_resamples=5_000)  # 2**12 = 4096 <= 5000
    assert exact.n_resamples == 4096
    mc = paired_randomization_test(a, b, n_resamples=4_000, seed=11)  # < 4096 -> Monte Carlo
    assert mc.n_resamples == 4_000
    assert 0.02 < exact.p_value < 0.8  # informative, not a trivial 0/1 case
    # SE of a 4000-draw estimate is <= 0.008; 0.03 is > 3.5 SE.
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.03)
    assert paired_randomization_test(a, b, n_resamples=4_000, seed=11) == mc
    # (c + 1) / (R + 1): never zero, even for an overwhelming difference.
    big = paired_randomization_test(np.ones(50), np.zeros(50), n_resamples=999)
    assert big.p_value == pytest.approx(1 / 1000)


# --------------------------------------------------------------------------
# Agreement with ranx on a synthetic retrieval problem
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ranx_problem():
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(12345)
    n_queries, n_docs = 60, 40
    qrels = {}
    for i in range(n_queries):
        relevant = rng.choice(n_docs, size=6, replace=False)
        qrels[f"q{i:02d}"] = {f"d{j}": int(rng.integers(1, 3)) for j in relevant}
    # Score = noise + quality * relevance: higher quality ranks relevant docs higher.
    # base vs strong: clearly different; base vs close: a small, borderline gap.
    runs = {}
    for name, quality in [("base", 0.5), ("strong", 2.0), ("close", 0.65)]:
        run = {}
        for qid, rels in qrels.items():
            noise = rng.normal(size=n_docs)
            run[qid] = {f"d{j}": float(noise[j] + quality * rels.get(f"d{j}", 0)) for j in range(n_docs)}
        runs[name] = ranx.Run(run, name=name)
    qrels = ranx.Qrels(qrels)

    rows = []
    for name, run in runs.items():
        scores = ranx.evaluate(qrels, run, "ndcg@10", return_mean=False, threads=1)
        rows += [(name, q, "ndcg@10", float(s)) for q, s in zip(run.get_query_ids(), scores)]
    per_query = pl.DataFrame(
        rows, schema=["config_id", "query_id", "measure", "value"], orient="row"
    )
    return ranx, qrels, runs, per_query


def _ranx_pvalues(report) -> dict[frozenset, float]:
    d = report.to_dict()
    out = {}
    for a in d["model_names"]:
        for b, by_metric in d[a]["comparisons"].items():
            out[frozenset((a, b))] = by_metric["ndcg@10"]
    return out


def test_student_matches_scipy_and_ranx(ranx_problem):
    ranx, qrels, runs, per_query = ranx_problem
    cmp = compare_configs(per_query, "ndcg@10", test="student", n_resamples=2_000)
    report = ranx.compare(
        qrels, runs=list(runs.values()), metrics=["ndcg@10"], stat_test="student",
        rounding_digits=10, threads=1,
    )
    ranx_p = _ranx_pvalues(report)
    wide = per_query.pivot(on="config_id", index="query_id", values="value")
    assert len(cmp.pairs) == 3
    for pair in cmp.pairs:
        a, b = wide[pair.config_a].to_numpy(), wide[pair.config_b].to_numpy()
        assert pair.p_value == pytest.approx(sps.ttest_rel(a, b).pvalue, rel=1e-9)
        assert pair.p_value == pytest.approx(ranx_p[frozenset((pair.config_a, pair.config_b))], abs=0.01)
        assert pair.wins + pair.ties + pair.losses == pair.n == 60
    # Means agree with ranx's report too.
    for c in cmp.configs:
        assert c.mean == pytest.approx(report.results[c.config_id]["ndcg@10"], abs=1e-9)
    assert cmp.best == "strong" and cmp.tied_with_best == ("strong",)
    assert cmp.pair("base", "strong").significant


def test_randomization_matches_ranx_fisher(ranx_problem):
    ranx, qrels, runs, per_query = ranx_problem
    # Both are Monte Carlo estimates of the same exact sign-flip p-value; they differ by
    # (i) ranx's c/R vs our (c+1)/(R+1) (<= 1/(R+1) = 1e-5 here) and (ii) independent
    # sampling noise, SE <= sqrt(.25/1e5) ~ 0.0016 each, so the difference has SE <= 0.0023
    # and 0.01 is > 4 SE.  (ranx's numba RNG is not numpy's, so exact equality is impossible.)
    n = 100_000
    cmp = compare_configs(per_query, "ndcg@10", test="randomization", n_resamples=n, seed=0)
    report = ranx.compare(
        qrels, runs=list(runs.values()), metrics=["ndcg@10"], stat_test="fisher",
        n_permutations=n, rounding_digits=10, threads=1,
    )
    ranx_p = _ranx_pvalues(report)
    borderline = cmp.pair("base", "close").p_value
    assert 0.01 < borderline < 0.9, "fixture should include a non-trivial p-value"
    for pair in cmp.pairs:
        assert pair.p_value == pytest.approx(ranx_p[frozenset((pair.config_a, pair.config_b))], abs=0.01)
    # Tighter, binomial-SE based check for the borderline pair: 5 SE of the difference.
    tol = 5 * math.sqrt(2 * borderline * (1 - borderline) / n) + 1 / (n + 1)
    assert borderline == pytest.approx(ranx_p[frozenset(("base", "close"))], abs=tol)
    # Clear winner: only (c+1)/(R+1) separates it from ranx's 0.
    assert cmp.pair("base", "strong").p_value == pytest.approx(1 / (n + 1))


# --------------------------------------------------------------------------
# compare_configs
# --------------------------------------------------------------------------
def test_nan_queries_excluded_from_pairs_and_counted():
    rng = np.random.default_rng(5)
    a = rng.uniform(size=20)
    b = a - 0.1 + rng.normal(scale=0.05, size=20)
    a_nan, b_nan = a.copy(), b.copy()
    a_nan[3] = np.nan  # unlabelled only in config A
    b_nan[7] = np.nan
    b_nan[8] = np.nan
    df = _long({"A": list(a_nan), "B": list(b_nan)})
    cmp = compare_configs(df, "ndcg@10", test="student", n_resamples=1_000)

    A, B = cmp.config("A"), cmp.config("B")
    assert (A.n, A.n_unlabelled) == (19, 1)
    assert (B.n, B.n_unlabelled) == (18, 2)
    assert A.mean == pytest.approx(np.nanmean(a_nan))  # mean over its own labelled queries
    keep = np.ones(20, bool)
    keep[[3, 7, 8]] = False
    pair = cmp.pair("A", "B")
    assert pair.n == 17
    assert pair.mean_diff == pytest.approx(np.mean(a[keep] - b[keep]))
    assert pair.p_value == pytest.approx(sps.ttest_rel(a[keep], b[keep]).pvalue)
    assert pair.wins + pair.ties + pair.losses == 17

    # A query missing entirely for one config is also dropped from the pair.
    df_missing = df.filter(~((pl.col("config_id") == "B") & (pl.col("query_id") == "q0")))
    cmp2 = compare_configs(df_missing, "ndcg@10", test="student", n_resamples=1_000)
    assert cmp2.pair("A", "B").n == 16 and cmp2.config("B").n_unlabelled == 2


@pytest.mark.parametrize("test", ["randomization", "student"])
def test_tied_with_best_two_identical_one_worse(test):
    rng = np.random.default_rng(6)
    good = rng.uniform(0.5, 1.0, size=40)
    worse = good - 0.3 + rng.normal(scale=0.05, size=40)
    df = _long({"X": list(good), "Y": list(good), "Z": list(worse)})
    cmp = compare_configs(df, "ndcg@10", test=test, n_resamples=2_000)
    assert isinstance(cmp, Comparison)
    assert cmp.best == "X"  # equal means: first config_id wins the tie
    assert cmp.tied_with_best == ("X", "Y")
    xy = cmp.pair("X", "Y")
    assert (xy.p_value, xy.p_adjusted, xy.significant) == (1.0, 1.0, False)
    assert (xy.wins, xy.ties, xy.losses) == (0, 40, 0)
    for other in ("X", "Y"):
        pz = cmp.pair(other, "Z")
        assert pz.significant and pz.p_adjusted < 0.05
        assert pz.mean_diff == pytest.approx(0.3, abs=0.05)
        assert pz.wins == 40 and pz.losses == 0
    # Holm-adjusted values are the Holm correction of the raw ones.
    raw = {(p.config_a, p.config_b): p.p_value for p in cmp.pairs}
    assert {(p.config_a, p.config_b): p.p_adjusted for p in cmp.pairs} == holm_correction(raw)


def test_tables_and_pair_orientation():
    df = _long({"b": [0.2, 0.4, 0.6, 0.5], "a": [0.3, 0.4, 0.5, 0.9], "c": [0.1, 0.1, 0.2, 0.2]})
    df = pl.concat([df, _long({"a": [9.0]}, measure="recall@5")])  # other measure ignored
    cmp = compare_configs(df, "ndcg@10", n_resamples=500)
    pairs = cmp.to_polars()
    assert pairs.columns == [
        "measure", "config_a", "config_b", "n", "mean_diff", "p_value", "p_adjusted",
        "significant", "wins", "ties", "losses",
    ]
    assert pairs.select("config_a", "config_b").rows() == [("a", "b"), ("a", "c"), ("b", "c")]
    ab = cmp.pair("a", "b")
    assert (ab.wins, ab.ties, ab.losses) == (2, 1, 1)
    assert ab.mean_diff == pytest.approx(0.1)  # diffs .1, 0, -.1, .4
    ba = cmp.pair("b", "a")
    assert (ba.wins, ba.ties, ba.losses, ba.mean_diff) == (1, 1, 2, pytest.approx(-0.1))

    configs = cmp.configs_to_polars()
    assert configs.get_column("config_id").to_list() == ["a", "b", "c"]
    assert configs.filter(pl.col("is_best")).get_column("config_id").to_list() == ["a"]
    assert configs.get_column("mean").to_list() == pytest.approx([0.525, 0.425, 0.15])
    assert (configs["ci_low"] <= configs["mean"]).all() and (configs["mean"] <= configs["ci_high"]).all()
    assert configs.get_column("n").to_list() == [4, 4, 4]


def test_compare_configs_rejects_bad_input():
    df = _long({"a": [0.1, 0.2], "b": [0.2, 0.3]})
    with pytest.raises(ValueError, match="unknown test"):
        compare_configs(df, "ndcg@10", test="wilcoxon")
    with pytest.raises(ValueError, match="no rows"):
        compare_configs(df, "map")
    with pytest.raises(ValueError, match="duplicate"):
        compare_configs(pl.concat([df, df.head(1)]), "ndcg@10")
