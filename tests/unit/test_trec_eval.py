"""One tie rule, trec_eval's: every rank measure equals trec_eval 9 (``pytrec_eval-terrier``) to 1e-12 on runs full
of ties, with graded labels and judged non-relevant documents; span, chunk-level and reachability judging follow
the same order.

trec_eval sorts each query's results by score descending, the score held in a C ``float`` (so float64 scores that
round to the same float32 tie), and breaks ties by document id descending (``comp_sim_docno``); it ignores the
rank column and refuses a run naming a document twice. The chunk runs below have several chunks per document,
scores from a small set (many exact ties) plus float32 collisions, and producer ranks that order ties at random.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from ragbench.core.schemas import CHUNK_SCHEMA, RUN_SCHEMA, SPANS_SCHEMA, canonical_order
from ragbench.evaluation.diagnostics import near_misses, reachability
from ragbench.evaluation.judging import document_run
from ragbench.evaluation.metrics import Measure, evaluate_per_query
from ragbench.evaluation.spans import budget_metrics, chunk_level_run_metrics, span_metrics

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 2, 3, 5, 10, 20)
DEEP = 1000  # mrr@1000 is trec_eval's recip_rank (no cutoff) on runs shorter than 1000
TOL = 1e-12


def _tied_problem(seed: int, n_queries: int = 60, n_docs: int = 40):
    """Chunk runs with heavy ties and graded qrels (0..3, many judged 0), as polars tables and pytrec_eval dicts."""
    rng = np.random.default_rng(seed)
    levels = np.array([1.0, 0.75, 0.5, 0.5 + 1e-12, 0.25, 0.25 - 1e-13, 0.1])  # +-1e-1x: equal as float32
    qrels_rows, run_rows = [], []
    for qi in range(n_queries):
        q = f"q{qi:02d}"
        judged = rng.choice(n_docs, size=int(rng.integers(2, 10)), replace=False)
        labels = rng.integers(0, 4, size=len(judged))
        if labels.max() == 0:
            labels[0] = int(rng.integers(1, 4))  # every query here is labelled; unlabelled ones are tested apart
        qrels_rows += [(q, f"d{j:02d}", int(r)) for j, r in zip(judged, labels)]
        n_chunks = int(rng.integers(5, 45))
        docs = rng.integers(0, n_docs, size=n_chunks)
        scores = np.sort(rng.choice(levels, size=n_chunks))[::-1]
        chunk_ids = [f"d{d:02d}#{i:02d}" for i, d in enumerate(docs)]
        order = np.lexsort((rng.random(n_chunks), -scores.astype(np.float64)))  # producer: ties in random order
        run_rows += [(q, r, chunk_ids[i], f"d{docs[i]:02d}", float(scores[i])) for r, i in enumerate(order, 1)]
    qrels = pl.DataFrame(qrels_rows, schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32},
                         orient="row")
    chunk_run = pl.DataFrame(run_rows, schema=RUN_SCHEMA, orient="row")
    return qrels, chunk_run


def _trec_dicts(qrels: pl.DataFrame, chunk_run: pl.DataFrame, gain=lambda r: r):
    """qrels and the *document* run as trec_eval takes them: each document once, scored by its best chunk."""
    tq: dict[str, dict[str, int]] = {}
    for q, d, r in qrels.iter_rows():
        tq.setdefault(q, {})[d] = int(gain(r))
    tr: dict[str, dict[str, float]] = {}
    for q, d, s in chunk_run.group_by("query_id", "doc_id").agg(pl.col("score").max()).iter_rows():
        tr.setdefault(q, {})[d] = float(s)
    return tq, tr


def _ours(chunk_run, qrels, gain: str) -> dict[tuple[str, str], float]:
    qids = sorted(qrels["query_id"].unique().to_list())
    ms = [Measure(m, k, gain) for m in ("ndcg", "recall", "precision", "hit") for k in CUTOFFS]
    ms.append(Measure("mrr", DEEP, gain))
    pq = evaluate_per_query(document_run(chunk_run), qrels, qids, ms)
    return {(q, m): v for q, m, v in pq.iter_rows()}


TREC_NAMES = {"ndcg": "ndcg_cut_{k}", "recall": "recall_{k}", "precision": "P_{k}", "hit": "success_{k}"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_rank_measure_equals_trec_eval_on_tied_chunk_runs(seed):
    qrels, chunk_run = _tied_problem(seed)
    tq, tr = _trec_dicts(qrels, chunk_run)
    measures = {"ndcg_cut." + ",".join(map(str, CUTOFFS)), "recall." + ",".join(map(str, CUTOFFS)),
                "P." + ",".join(map(str, CUTOFFS)), "success." + ",".join(map(str, CUTOFFS)), "recip_rank"}
    theirs = pytrec_eval.RelevanceEvaluator(tq, measures).evaluate(tr)
    ours = _ours(chunk_run, qrels, "linear")
    assert set(theirs) == set(tr)
    compared = 0
    for q, vals in theirs.items():
        for name, fmt in TREC_NAMES.items():
            for k in CUTOFFS:
                assert ours[(q, f"{name}@{k}")] == pytest.approx(vals[fmt.format(k=k)], abs=TOL, rel=0), (q, name, k)
                compared += 1
        assert ours[(q, f"mrr@{DEEP}")] == pytest.approx(vals["recip_rank"], abs=TOL, rel=0), q
    assert compared == 24 * len(theirs)
    # the fixture is what it claims: ties everywhere, and the producer's order of them is not trec_eval's
    doc_ties = document_run(chunk_run).with_columns(pl.col("score").cast(pl.Float32)).filter(
        pl.struct("query_id", "score").is_duplicated())
    assert doc_ties["query_id"].n_unique() > 40
    producer = chunk_run.unique(["query_id", "doc_id"], keep="first", maintain_order=True)
    differs = [q for (q,), g in producer.group_by("query_id")
               if g["doc_id"].to_list() != document_run(chunk_run).filter(pl.col("query_id") == q)["doc_id"].to_list()]
    assert len(differs) > 20


@pytest.mark.parametrize("seed", [3, 4])
def test_exponential_gain_equals_trec_eval_on_2_pow_r_minus_1_labels_and_ranx_burges(seed):
    qrels, chunk_run = _tied_problem(seed)
    tq, tr = _trec_dicts(qrels, chunk_run, gain=lambda r: 2 ** r - 1)
    theirs = pytrec_eval.RelevanceEvaluator(tq, {"ndcg_cut." + ",".join(map(str, CUTOFFS))}).evaluate(tr)
    ours = _ours(chunk_run, qrels, "exponential")
    for q, vals in theirs.items():
        for k in CUTOFFS:
            assert ours[(q, f"ndcg@{k}")] == pytest.approx(vals[f"ndcg_cut_{k}"], abs=TOL, rel=0), (q, k)

    ranx = pytest.importorskip("ranx")
    docs = document_run(chunk_run)
    # ranx orders ties its own way: give it our order as strictly decreasing scores, so only the formula is compared
    run = ranx.Run({q: {d: -float(r) for _, r, d in g.select("query_id", "rank", "doc_id").iter_rows()}
                    for (q,), g in docs.group_by("query_id")})
    judged = ranx.Qrels({q: {d: r for d, r in v.items() if r > 0} for q, v in
                         _trec_dicts(qrels, chunk_run)[0].items()})
    for k in CUTOFFS:
        burges = ranx.evaluate(judged, run, f"ndcg_burges@{k}", return_mean=False, make_comparable=True)
        for q, v in zip(run.get_query_ids(), burges):
            assert ours[(q, f"ndcg@{k}")] == pytest.approx(float(v), abs=1e-12, rel=0), (q, k)


def test_canonical_order_by_hand():
    run = pl.DataFrame([("q", 1, "c1", "d1", 0.5), ("q", 2, "c10", "d10", 0.9 + 1e-12), ("q", 3, "c2", "d2", 0.9),
                        ("q", 4, "c3", "d3", 0.9), ("q", 5, "c4", "d4", float("nan")),
                        ("q", 6, "c9", "d9", -0.0), ("q", 7, "c0", "d0", 0.0)], schema=RUN_SCHEMA, orient="row")
    out = canonical_order(run)
    # 0.9 + 1e-12 and 0.9 are one float32, so c10's extra 1e-12 does not count: c3 > c2 > c10 (bytes, descending);
    # -0.0 == 0.0: c9 > c0; NaN last
    assert out["chunk_id"].to_list() == ["c3", "c2", "c10", "c1", "c9", "c0", "c4"]
    assert out["rank"].to_list() == list(range(1, 8))
    assert canonical_order(out).equals(out)  # idempotent
    assert canonical_order(run.drop("score"))["chunk_id"].to_list() == run["chunk_id"].to_list()


def test_document_run_scores_each_document_by_its_best_chunk_in_trec_order():
    run = pl.DataFrame([("q", 1, "x1", "dA", 0.8), ("q", 2, "y1", "dB", 0.8), ("q", 3, "x2", "dA", 0.9),
                        ("q", 4, "z1", "dC", 0.7)], schema=RUN_SCHEMA, orient="row")
    dr = document_run(run)
    # the producer's ranks say x1 first, but dA's best chunk (0.9) is what counts; dB at 0.8; dC
    assert dr.rows() == [("q", 1, "dA", 0.9), ("q", 2, "dB", 0.8), ("q", 3, "dC", 0.7)]
    tie = pl.DataFrame([("q", 1, "a", "d1", 1.0), ("q", 2, "b", "d2", 1.0)], schema=RUN_SCHEMA, orient="row")
    assert document_run(tie)["doc_id"].to_list() == ["d2", "d1"]
    with pytest.raises(ValueError, match="ranked twice"):
        evaluate_per_query(run.select("query_id", "rank", "doc_id", "score"),
                           pl.DataFrame({"query_id": ["q"], "doc_id": ["dA"], "relevance": [1]}), ["q"],
                           [Measure("recall", 1)])


# ---------------------------------------------------------------- span, chunk-level, reachability: same order
TEXT = "alpha beta gamma delta"  # chunk a = [0, 11) "alpha beta ", chunk b = [11, 22) "gamma delta"


def _span_fixture():
    chunks = pl.DataFrame([("a", "D", 0, 0, 11, TEXT[:11], ""), ("b", "D", 1, 11, 22, TEXT[11:], "")],
                          schema=CHUNK_SCHEMA, orient="row")
    spans = pl.DataFrame([("q", "D", 11, 16, 1)], schema=SPANS_SCHEMA, orient="row")  # "gamma", inside b
    # the producer put a first; the scores tie, so trec_eval's rule puts b ("b" > "a") first
    run = pl.DataFrame([("q", 1, "a", "D", 2.0), ("q", 2, "b", "D", 2.0)], schema=RUN_SCHEMA, orient="row")
    return chunks, spans, run


def test_span_budget_and_chunk_level_metrics_judge_ties_in_trec_order():
    chunks, spans, run = _span_fixture()
    v = {(q, m): x for q, m, x in span_metrics(run, chunks, spans, [1]).iter_rows()}
    assert v["q", "span_recall@1"] == 1.0 and v["q", "span_contained@1"] == 1.0
    b = {(q, m): x for q, m, x in budget_metrics(run, chunks, spans, [3], {"a": 3, "b": 3}).iter_rows()}
    assert b["q", "evidence_recall@3tok"] == 1.0
    c = {(q, m): x for q, m, x in chunk_level_run_metrics(run, chunks, spans, [Measure("mrr", 10)]).iter_rows()}
    assert c["q", "chunk_mrr@10"] == 1.0
    # a strictly better score for a still wins: the rule only breaks ties
    lead = run.with_columns(pl.when(pl.col("chunk_id") == "a").then(3.0).otherwise(pl.col("score")).alias("score"))
    assert span_metrics(lead, chunks, spans, [1])["value"][0] == 0.0


def test_reachability_and_near_misses_use_the_same_order():
    doc_run = pl.DataFrame([("q", 1, "d1", 1.0), ("q", 2, "d2", 1.0), ("q", 3, "d3", 0.5)],
                           schema={"query_id": pl.String, "rank": pl.Int32, "doc_id": pl.String, "score": pl.Float64},
                           orient="row")
    qrels = pl.DataFrame({"query_id": ["q"], "doc_id": ["d1"], "relevance": [1]},
                         schema={"query_id": pl.String, "doc_id": pl.String, "relevance": pl.Int32})
    r = reachability(doc_run, qrels, ["q"], k=1, pool=2)
    assert r.rows() == [("q", 2, "ranked_badly")]  # d2 > d1 at equal scores
    chunk_run = doc_run.with_columns(pl.col("doc_id").alias("chunk_id")).select(list(RUN_SCHEMA))
    assert near_misses(chunk_run, {"d1"}, "q")["chunk_id"].to_list() == ["d2"]
    assert math.isclose(evaluate_per_query(doc_run, qrels, ["q"], [Measure("mrr", 10)])["value"][0], 0.5)
