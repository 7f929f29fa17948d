"""Span-aware judging on a tiny corpus with hand-computed expectations.

Corpus (character offsets ``[start, end)``)::

    doc A (100 chars)   spans: q1 A[10,30) rel 2, q2 A[50,60) rel 1
        c1 A[0,40)   c2 A[30,70)   c3 A[59,100)     (c1/c2 overlap by 10, c2/c3 by 11)
    doc B (60 chars)    span:  q1 B[0,10) rel 1  (split across c4 and c5)
        c4 B[0,5)    c5 B[5,60)

    tokens: c1 10, c2 10, c3 10, c4 2, c5 20
    run q1: c1, c2, c5, c4, c3      run q2: c3, c2      run q3 (no spans): c1
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from ragbench.chunking import CHUNK_SCHEMA, FixedChunker, chunk_corpus
from ragbench.core.models import count_tokens
from ragbench.core.schemas import SPANS_SCHEMA
from ragbench.evaluation.metrics import Measure
from ragbench.evaluation.spans import (
    budget_metrics,
    chunk_level_run_metrics,
    chunk_relevance,
    merge_intervals,
    merge_spans,
    span_metrics,
    union_lengths,
)
from ragbench.retrieval import RUN_SCHEMA

DOC_A = "Rivers carry water to the sea. Most rivers start in hills. Some rivers dry up in summer and returns."
DOC_B = "Bridges span rivers. The oldest bridge here is from 1820 AD."
DOCS = {"A": DOC_A, "B": DOC_B}
CHUNKS = [("c1", "A", 0, 40), ("c2", "A", 30, 70), ("c3", "A", 59, 100), ("c4", "B", 0, 5), ("c5", "B", 5, 60)]
TOKENS = {"c1": 10, "c2": 10, "c3": 10, "c4": 2, "c5": 20}
QIDS = ["q1", "q2", "q3"]


def chunks_table() -> pl.DataFrame:
    return pl.DataFrame([(c, d, i, s, e, DOCS[d][s:e], "") for i, (c, d, s, e) in enumerate(CHUNKS)],
                        schema=CHUNK_SCHEMA, orient="row")


def spans_table(rows=(("q1", "A", 10, 30, 2), ("q1", "B", 0, 10, 1), ("q2", "A", 50, 60, 1))) -> pl.DataFrame:
    return pl.DataFrame(list(rows), schema=SPANS_SCHEMA, orient="row")


def run_table(ranking: dict[str, list[str]]) -> pl.DataFrame:
    doc = {c: d for c, d, _, _ in CHUNKS}
    rows = [(q, r, c, doc[c], 1.0 / r) for q, cs in ranking.items() for r, c in enumerate(cs, 1)]
    return pl.DataFrame(rows, schema=RUN_SCHEMA, orient="row")


RUN = run_table({"q1": ["c1", "c2", "c5", "c4", "c3"], "q2": ["c3", "c2"], "q3": ["c1"]})


def values(table: pl.DataFrame) -> dict[tuple[str, str], float]:
    return {(q, m): v for q, m, v in table.iter_rows()}


def oracle(ranking: list[str], chunks: list[tuple], spans: list[tuple], k: int) -> dict[str, float]:
    """Span measures from Python sets of (doc, character) -- an independent re-implementation of the definitions.

    ``ranking``: chunk ids best first; ``chunks``: (chunk_id, doc, start, end); ``spans``: (doc, start, end, rel)
    of one query. Merged spans are the maximal runs of consecutive evidence characters of a document.
    """
    where = {c: (d, s, e) for c, d, s, e in chunks}
    E = {(d, i) for d, s, e, r in spans if r > 0 for i in range(s, e)}
    top = [where[c] for c in ranking[:k]]
    R = {(d, i) for d, s, e in top for i in range(s, e)}
    runs, cur = [], None
    for d, i in sorted(E):
        if cur and cur[0] == d and cur[2] == i:
            cur[2] = i + 1
        else:
            cur = [d, i, i + 1]
            runs.append(cur)
    inside = sum(any(cd == d and cs <= s and e <= ce for cd, cs, ce in top) for d, s, e in runs)
    allc = {(d, i) for _, d, s, e in chunks for i in range(s, e)}
    return {"span_recall": len(E & R) / len(E), "span_precision": len(E & R) / len(R) if R else 0.0,
            "span_iou": len(E & R) / len(E | R), "span_contained": inside / len(runs) if top else 0.0,
            "span_recall_max": len(E & allc) / len(E)}


def test_span_metrics_equal_a_character_set_oracle():
    """The interval arithmetic against plain sets of characters: the fixture, then random runs over random spans
    (overlapping, touching, crossing chunk borders, relevance 0 ones ignored) -- every value to 1e-12."""
    assert len(DOC_A) == 100 and len(DOC_B) == 60  # the hand computations below rely on these lengths
    spans_q = {"q1": [("A", 10, 30, 2), ("B", 0, 10, 1)], "q2": [("A", 50, 60, 1)]}
    v = values(span_metrics(RUN, chunks_table(), spans_table(), [1, 2, 3, 5], query_ids=QIDS))
    order = {q: g["chunk_id"].to_list() for (q,), g in RUN.sort("rank").group_by("query_id", maintain_order=True)}
    for q, sp in spans_q.items():
        for k in (1, 2, 3, 5):
            for m, want in oracle(order[q], CHUNKS, sp, k).items():
                name = m if m == "span_recall_max" else f"{m}@{k}"
                assert v[q, name] == pytest.approx(want, abs=1e-12, rel=0), (q, name)

    rng = np.random.default_rng(0)
    ids = [c for c, *_ in CHUNKS]
    for trial in range(40):
        sp = []
        for _ in range(int(rng.integers(1, 5))):
            d = str(rng.choice(["A", "B"]))
            s0 = int(rng.integers(0, len(DOCS[d]) - 1))
            sp.append((d, s0, int(rng.integers(s0 + 1, min(len(DOCS[d]), s0 + 30) + 1)), int(rng.integers(0, 3))))
        if not any(r > 0 for *_, r in sp):
            sp[0] = (*sp[0][:3], 1)
        ranking = list(rng.permutation(ids)[: int(rng.integers(1, 6))])
        run = run_table({"q": ranking})
        spans = pl.DataFrame([("q", *x) for x in sp], schema=SPANS_SCHEMA, orient="row")
        got = values(span_metrics(run, chunks_table(), spans, [1, 2, 3, 5]))
        for k in (1, 2, 3, 5):
            for m, want in oracle(ranking, CHUNKS, sp, k).items():
                name = m if m == "span_recall_max" else f"{m}@{k}"
                assert got["q", name] == pytest.approx(want, abs=1e-12, rel=0), (trial, name, sp, ranking)


def test_interval_helpers():
    s, e = merge_intervals([30, 0, 70, 5], [40, 10, 80, 32])
    assert s.tolist() == [0, 70] and e.tolist() == [40, 80]
    assert union_lengths(np.array([0, 0]), [0, 10], [10, 20], 1).tolist() == [20]  # touching: joined
    assert union_lengths(np.array([], dtype=np.int64), [], [], 2).tolist() == [0, 0]
    # groups never join, even when one group's interval ends where the next group's begins on its stretch
    assert union_lengths(np.array([0, 1, 1, 2]), [0, 0, 5, 3], [30, 10, 30, 4], 4).tolist() == [30, 30, 1, 0]


def test_chunk_relevance():
    rel = chunk_relevance(chunks_table(), spans_table())
    got = {(q, c): (o, cont, r) for q, c, o, cont, r in rel.iter_rows()}
    assert got == {
        ("q1", "c1"): (20, True, 2),   # holds A[10,30) whole
        ("q1", "c4"): (5, False, 1),   # B[0,5) of B[0,10)
        ("q1", "c5"): (5, False, 1),   # B[5,10)
        ("q2", "c2"): (10, True, 1),   # A[30,70) holds A[50,60)
        ("q2", "c3"): (1, False, 1),   # A[59,60): one character
    }  # c2 touches q1's A[10,30) only at its end offset 30: no overlap


def test_overlapping_spans_are_merged_not_double_counted():
    spans = spans_table([("q1", "A", 10, 30, 1), ("q1", "A", 20, 35, 2), ("q1", "A", 35, 38, 1)])
    merged = merge_spans(spans)
    assert merged.select("start", "end", "relevance").rows() == [(10, 38, 2)]
    rel = {c: o for _, c, o, _, _ in chunk_relevance(chunks_table(), spans).iter_rows()}
    assert rel == {"c1": 28, "c2": 8}


def test_span_metrics_hand_computed():
    v = values(span_metrics(RUN, chunks_table(), spans_table(), [1, 2, 3, 5], query_ids=QIDS))
    # q1: E = A[10,30) + B[0,10) = 30 chars
    # k=1: R = A[0,40) (40); E∩R = 20
    assert v["q1", "span_recall@1"] == pytest.approx(20 / 30)
    assert v["q1", "span_precision@1"] == pytest.approx(20 / 40)
    assert v["q1", "span_iou@1"] == pytest.approx(20 / (30 + 40 - 20))
    assert v["q1", "span_contained@1"] == pytest.approx(1 / 2)
    # k=2: R = A[0,70) = 70 (the overlap [30,40) counted once)
    assert v["q1", "span_recall@2"] == pytest.approx(20 / 30)
    assert v["q1", "span_precision@2"] == pytest.approx(20 / 70)
    assert v["q1", "span_iou@2"] == pytest.approx(20 / 80)
    # k=3: + B[5,60): R = 125, E∩R = 25
    assert v["q1", "span_recall@3"] == pytest.approx(25 / 30)
    assert v["q1", "span_precision@3"] == pytest.approx(25 / 125)
    assert v["q1", "span_iou@3"] == pytest.approx(25 / 130)
    assert v["q1", "span_contained@3"] == pytest.approx(1 / 2)
    # k=5: everything (160 chars); B[0,10) is split over c4 and c5, so still not contained
    assert v["q1", "span_recall@5"] == 1.0
    assert v["q1", "span_precision@5"] == pytest.approx(30 / 160)
    assert v["q1", "span_iou@5"] == pytest.approx(30 / 160)
    assert v["q1", "span_contained@5"] == pytest.approx(1 / 2)
    # q2: E = A[50,60); k=1: R = A[59,100) (41), one shared character
    assert v["q2", "span_recall@1"] == pytest.approx(1 / 10)
    assert v["q2", "span_precision@1"] == pytest.approx(1 / 41)
    assert v["q2", "span_iou@1"] == pytest.approx(1 / 50)
    assert v["q2", "span_contained@1"] == 0.0
    # k=2: R = A[30,100) = 70; only two chunks retrieved, so k=5 equals k=2
    for k in (2, 5):
        assert v["q2", f"span_recall@{k}"] == 1.0
        assert v["q2", f"span_precision@{k}"] == pytest.approx(10 / 70)
        assert v["q2", f"span_iou@{k}"] == pytest.approx(10 / 70)
        assert v["q2", f"span_contained@{k}"] == 1.0
    # q3 has no spans: NaN for every measure, never 0 or 1 (16 = 4 measures x 4 cutoffs, plus span_recall_max)
    q3 = [val for (q, _), val in v.items() if q == "q3"]
    assert len(q3) == 17 and all(math.isnan(x) for x in q3)
    # every character of E lies in some chunk of this table: the ceiling is 1
    assert v["q1", "span_recall_max"] == v["q2", "span_recall_max"] == 1.0


def test_labelled_query_missing_from_run_scores_zero():
    run = RUN.filter(pl.col("query_id") != "q2")
    v = values(span_metrics(run, chunks_table(), spans_table(), [5], query_ids=QIDS))
    assert [v["q2", f"{m}@5"] for m in ("span_recall", "span_precision", "span_iou", "span_contained")] == [0.0] * 4


def test_budget_metrics_cut_the_chunk_at_the_budget_edge():
    budgets = [5, 15, 17, 30, 42, 100]
    v = values(budget_metrics(RUN, chunks_table(), spans_table(), budgets, TOKENS, query_ids=QIDS))
    # q1 ranks c1(10 tok, A[0,40)), c2(10, A[30,70)), c5(20, B[5,60)), c4(2), c3(10); E = 30 chars
    expected_q1 = {
        5: (10 / 30, 1),   # c1 cut to 5/10 of 40 chars = A[0,20): A[10,20) of evidence
        15: (20 / 30, 2),  # c1 whole + c2 cut to A[30,50): no more evidence
        17: (20 / 30, 2),  # c2 cut to 28 chars
        30: (25 / 30, 3),  # c1, c2 whole; c5 cut to 55*10//20 = 27 chars = B[5,32): B[5,10) of evidence
        42: (1.0, 4),      # exactly full after c4: nothing cut
        100: (1.0, 5),
    }
    for n, (recall, count) in expected_q1.items():
        assert v["q1", f"evidence_recall@{n}tok"] == pytest.approx(recall), n
        assert v["q1", f"chunks_in_budget@{n}tok"] == count, n
    # q2 ranks c3(10, A[59,100)), c2(10, A[30,70)); E = A[50,60)
    expected_q2 = {5: (1 / 10, 1), 15: (1 / 10, 2), 17: (9 / 10, 2), 30: (1.0, 2), 42: (1.0, 2), 100: (1.0, 2)}
    for n, (recall, count) in expected_q2.items():
        assert v["q2", f"evidence_recall@{n}tok"] == pytest.approx(recall), n
        assert v["q2", f"chunks_in_budget@{n}tok"] == count, n
    assert all(math.isnan(val) for (q, _), val in v.items() if q == "q3")


def test_budget_cut_rounds_the_character_count_down():
    """The cut chunk keeps floor(len * remaining / tokens) characters -- not ceil, not round-half-even."""
    # c5 = B[5, 60): 55 characters, 20 tokens. 1 token -> 55/20 = 2.75 -> B[5, 7); 2 tokens -> 5.5 -> B[5, 10)
    run = run_table({"q7": ["c5"], "q10": ["c5"]})
    spans = spans_table([("q7", "B", 7, 8, 1), ("q10", "B", 10, 11, 1)])  # the first character floor() leaves out
    v = values(budget_metrics(run, chunks_table(), spans, [1, 2, 3], TOKENS))
    assert v["q7", "evidence_recall@1tok"] == 0.0   # ceil (3) or round (3) would keep B[7]
    assert v["q7", "evidence_recall@3tok"] == 1.0   # 8.25 -> 8 characters: B[5, 13)
    assert v["q10", "evidence_recall@2tok"] == 0.0  # round-half-even (6) or ceil (6) would keep B[10]
    assert v["q10", "evidence_recall@3tok"] == 1.0
    assert v["q7", "chunks_in_budget@1tok"] == 1.0  # the cut chunk counts: it has characters in the context


def test_budget_cut_exactly_at_token_offsets_with_a_real_tokenizer():
    text = "extraordinary wonderful dog ran home"
    chunks = pl.DataFrame([("x", "D", 0, 0, len(text), text, "")], schema=CHUNK_SCHEMA, orient="row")
    start = text.index("dog")  # [24, 27)
    spans = spans_table([("q", "D", start, start + 3, 1)])
    run = pl.DataFrame([("q", 1, "x", "D", 1.0)], schema=RUN_SCHEMA, orient="row")
    (n_tok,) = count_tokens([text], "all-MiniLM-L6-v2")
    assert n_tok == 5  # one token per word
    tc = {"x": n_tok}
    exact = values(budget_metrics(run, chunks, spans, [2, 3], tc, tokenizer="all-MiniLM-L6-v2"))
    assert exact["q", "evidence_recall@2tok"] == 0.0   # "extraordinary wonderful"
    assert exact["q", "evidence_recall@3tok"] == 1.0   # "... dog": cut at the end of the 3rd token
    # proportional: 3/5 of 35 chars = 21 chars, which stops inside "wonderful": no evidence
    approx = values(budget_metrics(run, chunks, spans, [3, 4], tc))
    assert approx["q", "evidence_recall@3tok"] == 0.0
    assert approx["q", "evidence_recall@4tok"] == 1.0  # 28 chars


def test_chunk_level_rank_metrics_reuse_metrics_module():
    ms = [Measure("recall", 1), Measure("recall", 3), Measure("mrr", 10), Measure("ndcg", 3)]
    v = values(chunk_level_run_metrics(RUN, chunks_table(), spans_table(), ms, query_ids=QIDS))
    # q1: relevant c1 (2), c4 (1), c5 (1); ranking c1, c2, c5, c4, c3 -> labels 2, 0, 1, 1, 0
    assert v["q1", "chunk_recall@1"] == pytest.approx(1 / 3)
    assert v["q1", "chunk_recall@3"] == pytest.approx(2 / 3)
    assert v["q1", "chunk_mrr@10"] == 1.0
    dcg = 3 + 0 + 1 / math.log2(4)
    idcg = 3 + 1 / math.log2(3) + 1 / math.log2(4)
    assert v["q1", "chunk_ndcg@3"] == pytest.approx(dcg / idcg)
    # q2: relevant c2, c3 (both overlap A[50,60)); ranking c3, c2
    assert v["q2", "chunk_recall@1"] == pytest.approx(1 / 2)
    assert v["q2", "chunk_mrr@10"] == 1.0
    assert all(math.isnan(v["q3", f"chunk_{m}"]) for m in map(str, ms))


def test_bad_input_is_named():
    stray = run_table({"q1": ["c1"]}).with_columns(pl.lit("zz").alias("chunk_id"))
    with pytest.raises(ValueError, match="absent from the chunks table.*zz"):
        span_metrics(stray, chunks_table(), spans_table(), [1])
    with pytest.raises(ValueError, match="token_counts lacks 1 .*c4"):
        budget_metrics(RUN, chunks_table(), spans_table(), [10], {k: v for k, v in TOKENS.items() if k != "c4"})
    with pytest.raises(ValueError, match="cutoffs must be"):
        span_metrics(RUN, chunks_table(), spans_table(), [0])
    with pytest.raises(ValueError, match="lacks column"):
        span_metrics(RUN.drop("rank"), chunks_table(), spans_table(), [1])


def test_real_chunker_output_against_the_oracle():
    """Real FixedChunker output (overlapping token windows) on the fixture, a shuffled run, every k: equal to the
    character-set oracle, and full retrieval reaches the ceiling, which is 1 here (windows cover every character)."""
    from ragbench.core.schemas import CORPUS_SCHEMA
    from ragbench.data.dataset import Dataset

    corpus = pl.DataFrame([("A", "", DOC_A, "{}"), ("B", "", DOC_B, "{}")], schema=CORPUS_SCHEMA, orient="row")
    ds = Dataset("tiny", corpus, pl.DataFrame(), pl.DataFrame(), spans_table(), "fp")
    chunks = chunk_corpus(ds, FixedChunker(size=4, overlap=1, prefix="none"))
    assert chunks.height > 8 and (chunks["text"] == [DOCS[d][s:e] for d, s, e in
                                                     chunks.select("doc_id", "start", "end").iter_rows()]).all()
    rows = list(chunks.select("chunk_id", "doc_id", "start", "end").iter_rows())
    ranking = [rows[i][0] for i in np.random.default_rng(3).permutation(len(rows))]
    doc = {c: d for c, d, _, _ in rows}
    run = pl.DataFrame([(q, r, c, doc[c], 1.0 / r) for q in ("q1", "q2") for r, c in enumerate(ranking, 1)],
                       schema=RUN_SCHEMA, orient="row")
    ks = [1, 2, 5, 9, len(rows)]
    v = values(span_metrics(run, chunks, spans_table(), ks))
    for q, sp in {"q1": [("A", 10, 30, 2), ("B", 0, 10, 1)], "q2": [("A", 50, 60, 1)]}.items():
        for k in ks:
            for m, want in oracle(ranking, rows, sp, k).items():
                name = m if m == "span_recall_max" else f"{m}@{k}"
                assert v[q, name] == pytest.approx(want, abs=1e-12, rel=0), (q, name)
        assert v[q, f"span_recall@{len(rows)}"] == v[q, "span_recall_max"] == 1.0


def test_a_gap_no_chunk_covers_caps_span_recall_and_is_reported():
    """A gold span across a paragraph break: the chunks hold both paragraphs but not the "\n\n" between them, so
    full retrieval covers all but 2 characters; span_recall_max reports that ceiling."""
    text = "First paragraph about rivers.\n\nSecond paragraph about bridges."
    cut = text.index("\n\n")
    chunks = pl.DataFrame([("p1", "D", 0, 0, cut, text[:cut], ""),
                           ("p2", "D", 1, cut + 2, len(text), text[cut + 2:], "")],
                          schema=CHUNK_SCHEMA, orient="row")
    start, end = text.index("rivers"), text.index(" about bridges")
    spans = spans_table([("q", "D", start, end, 1), ("q0", "D", 0, 5, 0)])  # q0: relevance 0 only: unlabelled
    run = pl.DataFrame([("q", 1, "p2", "D", 2.0), ("q", 2, "p1", "D", 1.0)], schema=RUN_SCHEMA, orient="row")
    v = values(span_metrics(run, chunks, spans, [1, 2], query_ids=["q", "q0"]))
    n = end - start
    assert v["q", "span_recall_max"] == (n - 2) / n
    assert v["q", "span_recall@2"] == (n - 2) / n  # everything retrieved: exactly the ceiling, not 1
    assert v["q", "span_recall@1"] == (end - (cut + 2)) / n
    assert math.isnan(v["q0", "span_recall_max"])
    assert "span_recall_max" not in {m for _, m in values(
        span_metrics(run, chunks, spans, [1], reachable=False))}


@pytest.mark.parametrize("chunker,gapped", [({"kind": "markdown", "max_tokens": 256}, 8),
                                            ({"kind": "recursive", "size": 128, "overlap": 0}, 7)])
def test_demo_spans_across_sections_have_a_reachable_ceiling(chunker, gapped):
    """The demo set: under markdown-256, 8 gold spans (7 under recursive-128) include a "\n\n" no chunk holds; q25
    can reach 368/370. Retrieving every chunk gives exactly span_recall_max, below 1 for those queries only."""
    from conftest import DEMO

    from ragbench.config import CHUNKERS, DatasetSpec
    from ragbench.data import load_dataset

    ds = load_dataset(DatasetSpec(path=DEMO, queries="all"))
    chunks = chunk_corpus(ds, CHUNKERS.parse(chunker))
    qids = ds.spans["query_id"].unique().sort().to_list()
    run = pl.DataFrame([(q, r, c, d, -float(r)) for q in qids
                        for r, (c, d) in enumerate(chunks.select("chunk_id", "doc_id").iter_rows(), 1)],
                       schema=RUN_SCHEMA, orient="row")
    v = values(span_metrics(run, chunks, ds.spans, [chunks.height], query_ids=qids))
    below = {q for q in qids if v[q, "span_recall_max"] < 1.0}
    assert len(below) == gapped and {f"q{i}" for i in (25, 27, 28, 29, 30, 31, 32)} <= below
    assert v["q25", "span_recall_max"] == 368 / 370
    for q in qids:
        assert v[q, f"span_recall@{chunks.height}"] == v[q, "span_recall_max"]


def budget_oracle(ranking: list[str], chunks: list[tuple], spans: list[tuple], tokens: dict[str, int],
                  n: int) -> tuple[float, int]:
    """evidence_recall@{n}tok and chunks_in_budget@{n}tok from Python sets of (doc, character), filling the context
    chunk by chunk: whole while it fits, then the first that does not is cut to floor(len * left / tokens)."""
    where = {c: (d, s, e) for c, d, s, e in chunks}
    E = {(d, i) for d, s, e, r in spans if r > 0 for i in range(s, e)}
    ctx, used, count = set(), 0, 0
    for c in ranking:
        d, s, e = where[c]
        if used + tokens[c] <= n:
            ctx |= {(d, i) for i in range(s, e)}
            used, count = used + tokens[c], count + 1
            continue
        keep = (e - s) * (n - used) // tokens[c]
        if keep > 0:
            ctx |= {(d, i) for i in range(s, s + keep)}
            count += 1
        break
    return len(E & ctx) / len(E), count


def random_queries(rng, n_queries: int) -> tuple[dict[str, list[tuple]], dict[str, list[str]]]:
    """Random spans (overlapping, touching, crossing chunk borders, some of relevance 0) and rankings of the
    fixture's chunks for ``n_queries`` queries; some queries have no evidence, some are absent from the run."""
    ids = [c for c, *_ in CHUNKS]
    spans, rankings = {}, {}
    for i in range(n_queries):
        q = f"q{i}"
        spans[q] = []
        for _ in range(int(rng.integers(0, 5))):
            d = str(rng.choice(["A", "B"]))
            s0 = int(rng.integers(0, len(DOCS[d]) - 1))
            spans[q].append((d, s0, int(rng.integers(s0 + 1, min(len(DOCS[d]), s0 + 30) + 1)),
                             int(rng.integers(0, 3))))
        if rng.random() < 0.85:
            rankings[q] = list(rng.permutation(ids)[: int(rng.integers(1, 6))])
    return spans, rankings


def test_many_queries_at_once_equal_the_character_set_oracles():
    """Every query of a call is computed at once (each on its own stretch of one line): random batches of up to 12
    queries sharing chunks, against the per-query oracles -- span measures at every k, evidence recall and chunk
    counts at every budget (token counts include 0, budgets land on and between chunk edges)."""
    rng = np.random.default_rng(7)
    for trial in range(30):
        spans_q, rankings = random_queries(rng, int(rng.integers(2, 13)))
        qids = list(spans_q)
        spans = pl.DataFrame([(q, *x) for q, sp in spans_q.items() for x in sp], schema=SPANS_SCHEMA, orient="row")
        run = run_table(rankings)
        tokens = {c: int(rng.integers(0, 12)) for c, *_ in CHUNKS}
        budgets = sorted({int(b) for b in rng.integers(1, 50, 4)})
        span_v = values(span_metrics(run, chunks_table(), spans, [1, 2, 3, 5], query_ids=qids))
        budget_v = values(budget_metrics(run, chunks_table(), spans, budgets, tokens, query_ids=qids))
        for q in qids:
            if not any(r > 0 for *_, r in spans_q[q]):
                assert all(math.isnan(v) for (p, _), v in {**span_v, **budget_v}.items() if p == q), (trial, q)
                continue
            for k in (1, 2, 3, 5):
                for m, want in oracle(rankings.get(q, []), CHUNKS, spans_q[q], k).items():
                    name = m if m == "span_recall_max" else f"{m}@{k}"
                    assert span_v[q, name] == pytest.approx(want, abs=1e-12, rel=0), (trial, q, name)
            for n in budgets:
                recall, count = budget_oracle(rankings.get(q, []), CHUNKS, spans_q[q], tokens, n)
                assert budget_v[q, f"evidence_recall@{n}tok"] == pytest.approx(recall, abs=1e-12, rel=0), (trial, q)
                assert budget_v[q, f"chunks_in_budget@{n}tok"] == count, (trial, q, n)
