"""Tests for the comparison statistics between configurations: ragbench.evaluation.intervals (bootstrap CIs),
ragbench.evaluation.paired_tests (paired tests, Holm) and ragbench.evaluation.comparison (compare_configs)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from ragbench.evaluation.comparison import Comparison, compare_configs
from ragbench.evaluation.intervals import ConfidenceInterval, bootstrap_ci
from ragbench.evaluation.paired_tests import (
    PairedTest,
    holm_correction,
    pair_seed,
    paired_randomization_test,
    paired_t_test,
    required_resamples,
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


def test_bootstrap_ci_of_equal_values_is_that_value():
    """Every resample of equal values has their mean: the interval is the point, never an ulp beside the mean."""
    for value, n in ((0.9, 37), (0.1, 300), (1 / 3, 1000)):
        ci = bootstrap_ci(np.full(n, value), n_resamples=2000, seed=0)
        assert (ci.mean, ci.low, ci.high) == (value, value, value), (value, n)


def test_bootstrap_ci_degenerate_sizes():
    empty = bootstrap_ci(np.array([np.nan, np.nan]))
    assert empty.n == 0 and math.isnan(empty.mean) and math.isnan(empty.low)
    one = bootstrap_ci(np.array([0.4, np.nan]))
    assert (one.n, one.mean, one.low, one.high) == (1, 0.4, 0.4, 0.4)
    narrow = bootstrap_ci(np.arange(10.0), confidence=0.5, seed=0)
    wide = bootstrap_ci(np.arange(10.0), confidence=0.99, seed=0)
    assert wide.low < narrow.low < narrow.high < wide.high



def test_statistics_kept_in_a_cache_equal_computed_ones_and_a_cache_that_cannot_be_written_changes_nothing(tmp_path):
    """Inside stats_kept_in, the first interval of some values is computed and kept, the next read back (equal
    bit for bit, NaN queries included); other parameters or values are other entries; an empty interval (no
    labelled query, NaN fields) survives the trip; a cache that cannot be written only stops keeping; randomization
    tests are kept by both arrays and their stream."""
    from ragbench.core.cache import StatsCache
    from ragbench.evaluation.kept import stats_kept_in

    x = np.concatenate([np.random.default_rng(4).beta(2, 3, size=60), [np.nan]])
    computed = bootstrap_ci(x, seed=5)
    cache = StatsCache(tmp_path)
    with stats_kept_in(cache):
        assert bootstrap_ci(x, seed=5) == computed and cache.verify() == (1, {})
        assert bootstrap_ci(x, seed=5) == computed and cache.verify() == (1, {})
        assert bootstrap_ci(x, seed=6) == bootstrap_ci(x, seed=6, n_resamples=10_000) != computed
        assert bootstrap_ci(x[1:], seed=5) != computed and cache.verify() == (3, {})
        empty = bootstrap_ci(np.array([np.nan, np.nan]))
        again = bootstrap_ci(np.array([np.nan, np.nan]))
    assert again.n == empty.n == 0 and math.isnan(again.low) and cache.verify() == (4, {})
    blocked = tmp_path / "a file"
    blocked.write_text("")
    with stats_kept_in(StatsCache(blocked)):
        assert bootstrap_ci(x, seed=5) == computed
    # a randomization test on a pair's own stream: kept by both arrays and the stream
    b = x + np.random.default_rng(5).normal(0, 0.05, size=x.size)
    tests = {name: paired_randomization_test(x, b, seed=pair_seed(0, *name)) for name in (("p", "q"), ("p", "r"))}
    with stats_kept_in(cache):
        for _ in range(2):
            assert {name: paired_randomization_test(x, b, seed=pair_seed(0, *name)) for name in tests} == tests
            assert paired_randomization_test(b, x, seed=pair_seed(0, "p", "q")).mean_diff == -tests["p", "q"].mean_diff
    assert tests["p", "q"].p_value != tests["p", "r"].p_value and cache.verify() == (7, {})
    # a one-sided test of the same pair is another entry, never the two-sided one read back
    one = paired_randomization_test(x, b, seed=pair_seed(0, "p", "q"), alternative="less")
    with stats_kept_in(cache):
        for _ in range(2):
            assert paired_randomization_test(x, b, seed=pair_seed(0, "p", "q"), alternative="less") == one
            assert paired_randomization_test(x, b, seed=pair_seed(0, "p", "q")) == tests["p", "q"]
    assert one.p_value != tests["p", "q"].p_value and cache.verify() == (8, {})

def _t_pvalue_closed_form(t: float, df: int) -> float:
    """Two-sided Student-t p-value in closed form (no scipy): df = 2 and df = 3."""
    if df == 2:
        return 1.0 - abs(t) / math.sqrt(2.0 + t * t)
    if df == 3:
        th = math.atan(abs(t) / math.sqrt(3.0))
        return 1.0 - (2.0 / math.pi) * (th + math.sin(th) * math.cos(th))
    raise ValueError(df)


def test_paired_t_test_against_closed_forms_and_drops_nan_pairs():
    # d = a - b = [1, 2, 3, 4]: mean 2.5, s = sqrt(5/3), t = 2.5 / (s / 2) = sqrt(15) = 3.8729833...
    a, b = np.array([1.5, 2.0, 3.25, 4.0]), np.array([0.5, 0.0, 0.25, 0.0])
    res = paired_t_test(a, b)
    assert isinstance(res, PairedTest) and res.test == "student" and res.n == 4
    assert res.mean_diff == 2.5
    assert res.statistic == pytest.approx(math.sqrt(15.0), rel=1e-14)
    assert res.p_value == pytest.approx(_t_pvalue_closed_form(math.sqrt(15.0), 3), rel=1e-12)
    assert res.p_value == pytest.approx(0.030466, abs=5e-7)  # a t table: t = 3.873, 3 df, two-sided
    assert res.p_floor == 0.0 and res.n_resamples is None

    # NaN in either system drops the query: [1, 2, 3, 4] with the 2 and the 4 knocked out -> d = [1, 3] plus 7
    a2 = np.array([1.5, np.nan, 3.25, 4.0, 7.0])
    b2 = np.array([0.5, 0.0, 0.25, np.nan, 0.0])
    res2 = paired_t_test(a2, b2)
    d = np.array([1.0, 3.0, 7.0])
    t = d.mean() / (d.std(ddof=1) / math.sqrt(3))
    assert res2.n == 3 and res2.mean_diff == pytest.approx(11 / 3, rel=1e-15)
    assert res2.statistic == pytest.approx(t, rel=1e-14)
    assert res2.p_value == pytest.approx(_t_pvalue_closed_form(t, 2), rel=1e-12)

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


def _brute_force_p(d) -> float:
    """Exact sign-flip p-value by listing all 2^n sign vectors (independent of the library's enumeration)."""
    d = [float(x) for x in d]
    obs = abs(sum(d))
    tol = 1e-9 * sum(abs(x) for x in d)
    hits = sum(1 for signs in itertools.product((1, -1), repeat=len(d))
               if abs(sum(s * x for s, x in zip(signs, d))) >= obs - tol)
    return hits / 2 ** len(d)


def test_randomization_monte_carlo_matches_exact_and_is_deterministic():
    rng = np.random.default_rng(4)
    a = rng.uniform(size=12)
    b = a - 0.08 + rng.normal(scale=0.2, size=12)
    exact = paired_randomization_test(a, b)  # 2**12 <= EXACT_LIMIT: enumerated
    assert exact.exact and exact.n_resamples == 4096 and exact.p_floor == 2 / 4096
    assert exact.p_value == _brute_force_p(a - b)
    mc = paired_randomization_test(a, b, n_resamples=4_000, seed=11, exact_limit=0)  # 4000 < 4096: Monte Carlo
    assert not mc.exact and mc.n_resamples == 4_000 and mc.p_floor == 1 / 4_001
    assert 0.02 < exact.p_value < 0.8  # informative, not a trivial 0/1 case
    # SE of a 4000-draw estimate is <= 0.008; 0.03 is > 3.5 SE.
    assert mc.p_value == pytest.approx(exact.p_value, abs=0.03)
    assert paired_randomization_test(a, b, n_resamples=4_000, seed=11, exact_limit=0) == mc
    # (c + 1) / (R + 1): never zero, even for an overwhelming difference.
    big = paired_randomization_test(np.ones(50), np.zeros(50), n_resamples=999)
    assert big.p_value == 1 / 1000 and big.p_floor == 1 / 1000 and not big.exact


def test_randomization_zero_differences_change_nothing():
    d = np.array([0.5, -0.1, 0.3, 0.2, 0.4, -0.2, 0.1])
    with_zeros = np.concatenate([d, np.zeros(30)])  # 37 queries, 7 of them differ
    res = paired_randomization_test(with_zeros, np.zeros(37))
    assert res.n == 37 and res.exact and res.n_resamples == 2 ** 7
    assert res.p_value == _brute_force_p(d) and res.p_floor == 2 / 2 ** 7
    assert res.mean_diff == pytest.approx(d.sum() / 37, rel=1e-15)


def test_one_sided_randomization_counts_one_tail_as_scipy_does():
    from scipy import stats

    rng = np.random.default_rng(8)
    grades = np.array([0.0, 0.25, 0.5, 1.0])
    for _ in range(4):  # graded values with ties and zero differences
        a, b = rng.choice(grades, 14), rng.choice(grades, 14)
        d = (a - b)[a != b]
        below = sum(1 for signs in itertools.product((1, -1), repeat=d.size)
                    if sum(s * x for s, x in zip(signs, d)) <= d.sum() + 1e-9 * np.abs(d).sum())
        less = paired_randomization_test(a, b, alternative="less")
        assert less.exact and less.p_value == below / 2 ** d.size and less.p_floor == 1 / 2 ** d.size
        for alternative in ("less", "greater"):
            reference = stats.permutation_test((a, b), lambda x, y: np.sum(x - y), permutation_type="samples",
                                               alternative=alternative, n_resamples=np.inf)
            assert paired_randomization_test(a, b, alternative=alternative).p_value == pytest.approx(
                reference.pvalue, rel=1e-12)
        assert paired_randomization_test(a, b, alternative="greater").p_value == \
            paired_randomization_test(b, a, alternative="less").p_value
    # a clear loss: one tail holds the whole two-sided p's evidence, so half of it (no mass at the centre)
    a = rng.uniform(size=16)
    b = a + 0.1 + rng.normal(scale=0.1, size=16)
    two, one = paired_randomization_test(a, b), paired_randomization_test(a, b, alternative="less")
    assert one.p_value == pytest.approx(two.p_value / 2, rel=1e-12) and one.alternative == "less"
    assert paired_randomization_test(a, b, alternative="greater").p_value > 0.99
    mc = paired_randomization_test(a, b, alternative="less", n_resamples=4_000, seed=5, exact_limit=0)
    assert not mc.exact and mc.p_value == pytest.approx(one.p_value, abs=0.03)
    with pytest.raises(ValueError, match="alternative"):
        paired_randomization_test(a, b, alternative="smaller")


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


def _t_pvalue_mpmath(d: np.ndarray) -> float:
    """Two-sided paired t p-value from mpmath's regularized incomplete beta (no scipy)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    n = len(d)
    t = mpmath.mpf(float(d.mean())) / (mpmath.mpf(float(d.std(ddof=1))) / mpmath.sqrt(n))
    nu = n - 1
    return float(mpmath.betainc(nu / mpmath.mpf(2), mpmath.mpf(1) / 2, 0, nu / (nu + t * t), regularized=True))


def test_student_matches_independent_values_and_ranx(ranx_problem):
    """Per-query nDCG from ragbench's own metrics (not ranx's); p-values against mpmath's t distribution and ranx."""
    from ragbench.evaluation.metrics import Measure, evaluate_per_query

    ranx, qrels, runs, ranx_per_query = ranx_problem
    qrel_rows = [(q, d, int(r)) for q, docs in qrels.to_dict().items() for d, r in docs.items()]
    qrels_df = pl.DataFrame(qrel_rows, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32},
                            orient="row")
    frames = []
    for name, run in runs.items():
        rows = [(q, d, float(sc)) for q, docs in run.to_dict().items() for d, sc in docs.items()]
        doc_run = pl.DataFrame(rows, schema={"query_id": pl.String, "doc_id": pl.String, "score": pl.Float64},
                               orient="row").with_columns(pl.lit(0, pl.Int32).alias("rank"))
        pq = evaluate_per_query(doc_run, qrels_df, sorted(run.keys()), [Measure("ndcg", 10, "linear")])
        frames.append(pq.with_columns(pl.lit(name).alias("config_id")))
    per_query = pl.concat(frames).select("config_id", "query_id", "measure", "value")
    # ragbench's per-query values equal ranx's own to 1e-12 (two implementations)
    theirs = {(c, q): v for c, q, _, v in ranx_per_query.iter_rows()}
    for c, q, _, v in per_query.iter_rows():
        assert v == pytest.approx(theirs[(c, q)], abs=1e-12, rel=0), (c, q)

    cmp = compare_configs(per_query, "ndcg@10", test="student", pairs="all")
    report = ranx.compare(
        qrels, runs=list(runs.values()), metrics=["ndcg@10"], stat_test="student",
        rounding_digits=10, threads=1,
    )
    ranx_p = _ranx_pvalues(report)
    wide = per_query.pivot(on="config_id", index="query_id", values="value")
    assert len(cmp.pairs) == 3 and cmp.n_comparisons == 3 and cmp.p_floor == 0.0 and cmp.n_resamples is None
    for pair in cmp.pairs:
        d = wide[pair.config_a].to_numpy() - wide[pair.config_b].to_numpy()
        assert pair.p_value == pytest.approx(_t_pvalue_mpmath(d), rel=1e-12, abs=1e-300)
        assert pair.p_value == pytest.approx(ranx_p[frozenset((pair.config_a, pair.config_b))], abs=1e-10, rel=0)
        assert pair.wins + pair.ties + pair.losses == pair.n == 60
    for c in cmp.configs:
        assert c.mean == pytest.approx(report.results[c.config_id]["ndcg@10"], abs=1e-10, rel=0)
    assert cmp.best == "strong" and cmp.tied_with_best == ("strong",)
    assert cmp.pair("base", "strong").significant


def test_randomization_matches_ranx_fisher(ranx_problem):
    ranx, qrels, runs, per_query = ranx_problem
    # Both are Monte Carlo estimates of the same exact sign-flip p-value; they differ by
    # (i) ranx's c/R vs our (c+1)/(R+1) (<= 1/(R+1) = 1e-5 here) and (ii) independent
    # sampling noise, SE <= sqrt(.25/1e5) ~ 0.0016 each, so the difference has SE <= 0.0023
    # and 0.01 is > 4 SE.  (ranx's numba RNG is not numpy's, so exact equality is impossible.)
    n = 100_000
    cmp = compare_configs(per_query, "ndcg@10", test="randomization", n_resamples=n, seed=0, pairs="all")
    assert cmp.n_resamples == n and cmp.n_exact == 0 and cmp.p_floor == 1 / (n + 1)  # 100000 > the 5999 needed
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
    d = a[keep] - b[keep]
    assert pair.p_value == pytest.approx(_t_pvalue_mpmath(d), rel=1e-12)
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
    assert (good - worse > 0).all()
    df = _long({"X": list(good), "Y": list(good), "Z": list(worse)})
    cmp = compare_configs(df, "ndcg@10", test=test, n_resamples=2_000)
    assert isinstance(cmp, Comparison)
    assert cmp.best == "X"  # equal means: first config_id wins the tie
    assert cmp.pairs_compared == "vs_best" and cmp.n_comparisons == 2
    assert [(p.config_a, p.config_b) for p in cmp.pairs] == [("X", "Y"), ("X", "Z")]  # Y vs Z is not needed
    assert cmp.tied_with_best == ("X", "Y")
    xy = cmp.pair("X", "Y")
    assert (xy.p_value, xy.p_adjusted, xy.significant) == (1.0, 1.0, False)
    assert (xy.wins, xy.ties, xy.losses) == (0, 40, 0)
    xz = cmp.pair("X", "Z")
    assert xz.significant and xz.mean_diff == pytest.approx(float(np.mean(good - worse)), rel=1e-15)
    assert (xz.wins, xz.ties, xz.losses) == (40, 0, 0)
    if test == "randomization":
        # m = 2 -> R = ceil(100 * 2 / 0.05) - 1 = 3999 > 2000; 40 positive differences: no random sign vector is as
        # extreme (chance 2^-39), so p = 1 / (R + 1) exactly; Holm: the smaller of two p-values times 2
        assert cmp.n_resamples == 3_999 and cmp.n_exact == 1  # X vs Y: all differences 0, trivially exact
        assert xz.p_value == 1 / 4_000 and xz.p_adjusted == 2 / 4_000 and not xz.exact
        assert cmp.p_floor == xz.p_floor == 1 / 4_000 and cmp.p_floor_adjusted == 2 / 4_000
    else:
        assert xz.p_adjusted == 2 * xz.p_value  # Holm, by hand: the smaller of m = 2 raw p-values times 2

    every = compare_configs(df, "ndcg@10", test=test, n_resamples=2_000, pairs="all")
    assert every.n_comparisons == 3 and every.tied_with_best == ("X", "Y")
    for other in ("X", "Y"):
        pz = every.pair(other, "Z")
        if test == "randomization":
            # m = 3 -> R = 5999; raw 1/6000 twice (smallest): Holm 3/6000, then max(3/6000, 2/6000) = 3/6000
            assert pz.p_value == 1 / 6_000 and pz.p_adjusted == 3 / 6_000
        assert pz.significant


def test_holm_turns_a_raw_significant_pair_into_tied_and_one_comparison_does_not():
    """Z's raw p-value is 0.0308 < 0.05, but against 3 comparisons Holm makes it 0.0923: not significant, tied with
    the best. With only A and Z compared, the same data are significant and Z is not tied."""
    base = np.linspace(0.4, 0.6, 12)
    d_z = np.array([0.3, 0.2, 0.25, 0.1, 0.4, -0.1, 0.15, 0.2, -0.05, 0.3, 0.1, -0.2])
    d_y1 = np.array([0.3, 0.2, 0.25, 0.1, 0.4, -0.1, 0.15, 0.2, -0.35, 0.3, 0.1, -0.2])
    d_y2 = np.array([0.1, -0.1, 0.05, -0.05, 0.2, -0.15, 0.02, 0.0, 0.0, 0.0, 0.01, 0.0])
    A = base + 0.3
    values = {"A": A, "Y1": A - d_y1, "Y2": A - d_y2, "Z": A - d_z}
    p_z, p_y1, p_y2 = _brute_force_p(d_z), _brute_force_p(d_y1), _brute_force_p(d_y2[d_y2 != 0])
    assert p_z == 0.03076171875 and p_z < 0.05 <= 3 * p_z < p_y1  # the case the test is about

    cmp = compare_configs(_long({k: list(v) for k, v in values.items()}), "ndcg@10")
    assert cmp.best == "A" and cmp.n_comparisons == 3 and cmp.exact and cmp.n_exact == 3
    z, y1, y2 = cmp.pair("A", "Z"), cmp.pair("A", "Y1"), cmp.pair("A", "Y2")
    assert (z.p_value, y1.p_value, y2.p_value) == (p_z, p_y1, p_y2)  # exact enumeration, no Monte Carlo
    assert z.p_adjusted == 3 * p_z  # Holm by hand: sorted p_z < p_y1 < p_y2, factors 3, 2, 1, running max
    assert y1.p_adjusted == max(3 * p_z, 2 * p_y1) and y2.p_adjusted == min(1.0, max(y1.p_adjusted, p_y2))
    assert not z.significant and "Z" in cmp.tied_with_best
    assert z.p_floor == y1.p_floor == 2 / 2 ** 12 and y2.p_floor == 2 / 2 ** 8  # exact: 2 / 2^n_nonzero
    assert cmp.n_resamples == 10_000 and cmp.p_floor == 1 / 10_001  # the Monte Carlo floor (unused here)

    alone = compare_configs(_long({"A": list(A), "Z": list(A - d_z)}), "ndcg@10")
    only = alone.pair("A", "Z")
    assert alone.n_comparisons == 1 and only.p_value == only.p_adjusted == p_z
    assert only.significant and alone.tied_with_best == ("A",)


def test_resamples_follow_comparisons_and_alpha_and_streams_are_per_pair():
    assert required_resamples(19, 0.05) == 37_999 and required_resamples(190, 0.05) == 379_999
    assert required_resamples(1, 0.05) == 1_999 and required_resamples(3, 0.01) == 29_999
    assert required_resamples(0, 0.05) == 0
    for m, alpha in [(1, 0.05), (19, 0.05), (190, 0.05), (7, 0.01), (45, 0.1)]:
        r = required_resamples(m, alpha)
        assert m / (r + 1) <= alpha / 100 < m / r  # the least R whose floor x m is at most alpha / 100

    rng = np.random.default_rng(8)
    base = rng.uniform(size=60)
    grid = {f"c{i}": list(base - 0.02 * i + rng.normal(scale=0.1, size=60)) for i in range(6)}
    small = compare_configs(_long(grid), "ndcg@10", pairs="all")  # 15 pairs: R = 29999
    assert small.n_comparisons == 15 and small.n_resamples == 29_999 and small.n_exact == 0
    assert small.p_floor == 1 / 30_000 and small.p_floor_adjusted == pytest.approx(15 / 30_000, rel=1e-15)
    assert all(p.n_resamples == 29_999 and not p.exact for p in small.pairs)
    vs_best = compare_configs(_long(grid), "ndcg@10")  # default: 5 comparisons against the best
    assert vs_best.n_comparisons == 5 and vs_best.n_resamples == 10_000  # 9999 needed, the 10000 minimum wins
    # independent streams: two pairs with identical differences get different Monte Carlo estimates ...
    diff = rng.normal(0.0, 0.1, size=60)
    twin = {"a": list(base + diff), "b": list(base), "c": list(base + diff + 1.0), "d": list(base + 1.0)}
    t = compare_configs(_long(twin), "ndcg@10", pairs="all", n_resamples=50_000)
    ab, cd = t.pair("a", "b").p_value, t.pair("c", "d").p_value
    assert 0.05 < ab < 0.95 and ab != cd and ab == pytest.approx(cd, abs=0.02)  # same p, two estimates of it
    # ... and a pair's stream depends on its two ids only, not on which other configs are in the grid
    more = {**grid, "extra": list(base + 0.5)}
    a = compare_configs(_long(grid), "ndcg@10", pairs="all", n_resamples=100_000)
    b = compare_configs(_long(more), "ndcg@10", pairs="all", n_resamples=100_000)
    assert a.n_resamples == b.n_resamples == 100_000
    assert a.pair("c0", "c3").p_value == b.pair("c0", "c3").p_value


def test_tables_and_pair_orientation():
    df = _long({"b": [0.2, 0.4, 0.6, 0.5], "a": [0.3, 0.4, 0.5, 0.9], "c": [0.1, 0.1, 0.2, 0.2]})
    df = pl.concat([df, _long({"a": [9.0]}, measure="recall@5")])  # other measure ignored
    cmp = compare_configs(df, "ndcg@10", n_resamples=500, pairs="all")
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
    with pytest.raises(ValueError, match="unknown pairs"):
        compare_configs(df, "ndcg@10", pairs="some")
    with pytest.raises(ValueError, match="no rows"):
        compare_configs(df, "map")
    with pytest.raises(ValueError, match="duplicate"):
        compare_configs(pl.concat([df, df.head(1)]), "ndcg@10")
