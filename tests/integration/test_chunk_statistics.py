"""Chunking statistics on the tiny corpus of test_spans, with hand-computed expectations.

    doc A (100 chars): sentences [0,30) [31,58) [59,100)    chunks c1 [0,40) c2 [30,70) c3 [59,100)
    doc B (60 chars):  sentences [0,20) [21,60)             chunks c4 [0,5)  c5 [5,60)
    spans: A[10,30) (inside c1), B[0,10) (split over c4 and c5), A[50,60) (inside c2)
"""

from __future__ import annotations

import math

import polars as pl
import pytest

from ragbench.chunking import CHUNK_SCHEMA, SentenceChunker, chunk_corpus, sentence_spans
from ragbench.chunking.chunk_statistics import chunk_statistics
from ragbench.core.schemas import CORPUS_SCHEMA, SPANS_SCHEMA
from ragbench.data.dataset import Dataset
from conftest import SCIFACT, requires_scifact, write_config

DOC_A = "Rivers carry water to the sea. Most rivers start in hills. Some rivers dry up in summer and returns."
DOC_B = "Bridges span rivers. The oldest bridge here is from 1820 AD."
DOCS = {"A": DOC_A, "B": DOC_B}
CHUNKS = [("c1", "A", 0, 40), ("c2", "A", 30, 70), ("c3", "A", 59, 100), ("c4", "B", 0, 5), ("c5", "B", 5, 60)]
TOKENS = {"c1": 10, "c2": 10, "c3": 10, "c4": 2, "c5": 20}
CORPUS = pl.DataFrame([(d, "", t, "{}") for d, t in DOCS.items()], schema=CORPUS_SCHEMA, orient="row")
SPANS = pl.DataFrame([("q1", "A", 10, 30, 2), ("q1", "B", 0, 10, 1), ("q2", "A", 50, 60, 1)], schema=SPANS_SCHEMA,
                     orient="row")


def chunks_table(rows=CHUNKS) -> pl.DataFrame:
    return pl.DataFrame([(c, d, i, s, e, DOCS[d][s:e], "") for i, (c, d, s, e) in enumerate(rows)],
                        schema=CHUNK_SCHEMA, orient="row")


def test_sentence_boundaries_used_below():
    assert sentence_spans(DOC_A) == [(0, 30), (31, 58), (59, 100)]
    assert sentence_spans(DOC_B) == [(0, 20), (21, 60)]


def test_chunk_statistics_hand_computed():
    st = chunk_statistics(chunks_table(), TOKENS, SPANS, CORPUS)
    assert st["chunk_count"] == 5
    assert st["chunk_tokens_mean"] == pytest.approx(52 / 5)
    assert st["chunk_tokens_p50"] == 10
    assert st["chunk_tokens_p95"] == pytest.approx(18)  # sorted 2,10,10,10,20: position 3.8 -> 10 + 0.8 * 10
    assert st["chunk_tokens_max"] == 20
    # ends: c1 40, c2 70, c4 5 are mid-sentence; c3 100 and c5 60 end sentences
    assert st["chunks_end_mid_sentence"] == pytest.approx(3 / 5)
    # starts: c2 30 (the sentence starts at 31) and c5 5 are mid-sentence
    assert st["chunks_start_mid_sentence"] == pytest.approx(2 / 5)
    assert st["chunks_cut_mid_sentence"] == pytest.approx(4 / 5)  # c1, c2, c4, c5
    # B[0,10) is overlapped by c4 and c5, contained by neither: 1 of 3 spans split
    assert st["spans_split"] == pytest.approx(1 / 3)
    assert st["spans_counted"] == 3 and st["spans_uncovered"] == 0
    assert st["index_chars"] == 40 + 40 + 41 + 5 + 55
    assert st["corpus_chars"] == 160
    assert st["expansion"] == pytest.approx(181 / 160)
    assert st["index_tokens"] == 52


def test_uncovered_spans_and_no_spans():
    # only c1 and c4: q2's A[50,60) touches no chunk; B[0,10) is overlapped by c4 alone, not contained -> split
    st = chunk_statistics(chunks_table(CHUNKS[:1] + CHUNKS[3:4]), TOKENS, SPANS, CORPUS)
    assert st["spans_uncovered"] == 1
    assert st["spans_split"] == pytest.approx(1 / 3)
    assert st["expansion"] == pytest.approx(45 / 160)
    st = chunk_statistics(chunks_table(), TOKENS, SPANS.clear(), CORPUS)
    assert math.isnan(st["spans_split"]) and st["spans_counted"] == 0


def test_sentence_chunker_never_cuts_mid_sentence():
    ds = Dataset("tiny", CORPUS, pl.DataFrame(), pl.DataFrame(), SPANS, "fp")
    chunks = chunk_corpus(ds, SentenceChunker(window=1, prefix="none"))
    tokens = {c: 1 for c in chunks["chunk_id"]}
    st = chunk_statistics(chunks, tokens, SPANS, CORPUS)
    assert st["chunk_count"] == 5
    assert st["chunks_cut_mid_sentence"] == 0.0
    # A[10,30) and B[0,10) lie inside one sentence; A[50,60) crosses the boundary at 58/59: split
    assert st["spans_split"] == pytest.approx(1 / 3)
    assert st["expansion"] == pytest.approx((30 + 27 + 41 + 20 + 39) / 160)  # the separating spaces are dropped


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="token_counts lacks 1 chunk id.*c5"):
        chunk_statistics(chunks_table(), {k: v for k, v in TOKENS.items() if k != "c5"}, SPANS, CORPUS)
    with pytest.raises(ValueError, match="absent from the corpus.*'B'"):
        chunk_statistics(chunks_table(), TOKENS, SPANS, CORPUS.filter(pl.col("doc_id") == "A"))
    with pytest.raises(ValueError, match="no chunks"):
        chunk_statistics(chunks_table([]), TOKENS, SPANS, CORPUS)


def test_window_statistics_hand_computed():
    from ragbench.chunking.chunk_statistics import window_statistics

    # window 10: 12 and 30 are over it; 2 + 20 of the 4 + 10 + 12 + 30 = 56 tokens are never read
    st = window_statistics([4, 10, 12, 30], 10)
    assert st == {"embed_window_tokens": 10.0, "chunks_over_embed_window": 0.5,
                  "tokens_never_embedded": pytest.approx(22 / 56)}
    unlimited = window_statistics([4, 1000], None)                  # a static model reads every token
    assert math.isnan(unlimited["embed_window_tokens"])
    assert unlimited["chunks_over_embed_window"] == 0 and unlimited["tokens_never_embedded"] == 0
    with pytest.raises(ValueError, match="no texts"):
        window_statistics([], 10)


def test_embedding_windows_of_the_packaged_models():
    from ragbench.embedding.embed import embedding_window, embedding_window_statistics
    from ragbench.embedding.spec import EmbedderSpec

    minilm = EmbedderSpec(model="all-MiniLM-L6-v2")
    assert embedding_window(minilm) == 254                               # max_seq_length 256 minus [CLS], [SEP]
    assert embedding_window(EmbedderSpec(model="all-MiniLM-L6-v2", max_seq_length=64)) == 62
    assert embedding_window(EmbedderSpec(model="static-retrieval-m2v")) is None
    st = embedding_window_statistics(["word " * 300, "short text"], minilm)  # 300 tokens and 2
    assert st["chunks_over_embed_window"] == 0.5 and st["tokens_never_embedded"] == pytest.approx(46 / 302)
    prompted = embedding_window_statistics(["word " * 250], EmbedderSpec(model="all-MiniLM-L6-v2",
                                                                         document_prompt="passage: " * 4))
    assert prompted["chunks_over_embed_window"] == 1.0                   # the prompt is read first and counts


def test_embedding_window_statistics_skip_counting_when_nothing_is_cut(monkeypatch):
    """A static model reads every token: its window statistics need no tokenizer pass over the corpus."""
    from ragbench.embedding import embed
    from ragbench.embedding.spec import EmbedderSpec

    def no_counting(*_):
        raise AssertionError("tokenized the corpus")

    monkeypatch.setattr(embed, "count_tokens", no_counting)
    st = embed.embedding_window_statistics(["word " * 300, "short text"], EmbedderSpec(model="static-retrieval-m2v"))
    assert math.isnan(st["embed_window_tokens"]) and st["tokens_never_embedded"] == 0


@requires_scifact()
def test_a_chunkers_texts_are_tokenized_once_when_the_embedder_reads_them_as_counted(tmp_path, monkeypatch):
    """The context budget's count under the embedder's own tokenizer serves its window statistics too (one pass
    over the chunks, not two), and only when the embedder reads the same texts: a title prefix is read by the
    embedder and not counted in the context, so that chunker is counted again, and its statistics say so."""
    from ragbench import Settings, load_config, load_dataset
    from ragbench.core import models
    from ragbench.core.schemas import index_texts
    from ragbench.embedding import embed
    from ragbench.embedding.embed import embedding_window_statistics
    from ragbench.sweep import work as work_module
    from ragbench.sweep.work import StageWork

    cfg = load_config(write_config(tmp_path / "sweep.yaml", f"""
name: tokens-once
dataset: {{path: {SCIFACT}, split: test, max_docs: 40}}
chunkers: [{{kind: whole, prefix: none}}, {{kind: whole, prefix: title}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: dense, exact: true}}]
output: {{mlflow: false}}
"""))
    passes: list[tuple[str, int]] = []

    def counting(texts, tokenizer, prefix=""):
        passes.append((tokenizer, len(texts)))
        return models.count_tokens(texts, tokenizer, prefix=prefix)

    monkeypatch.setattr(work_module, "count_tokens", counting)
    monkeypatch.setattr(embed, "count_tokens", counting)
    work = StageWork(cfg, load_dataset(cfg.dataset), Settings.from_env(home=tmp_path / "home"))
    stats, counted, n = {}, {}, {}
    for i, chunker in enumerate(cfg.chunkers):
        run_config = next(r for r in cfg.expand() if r.chunker == chunker)
        chunks = work.chunk(chunker)
        passes.clear()
        stats[chunker.prefix] = work._inputs(run_config, i, chunks, None, None, None).chunk_stats
        counted[chunker.prefix], n[chunker.prefix] = list(passes), chunks.height
        fresh = embedding_window_statistics(index_texts(chunks), run_config.embedder)
        assert {k: stats[chunker.prefix][k] for k in fresh} == fresh
    assert counted["none"] == [("all-MiniLM-L6-v2", n["none"])]
    assert counted["title"] == [("all-MiniLM-L6-v2", n["title"])] * 2
    assert stats["title"]["tokens_never_embedded"] > stats["none"]["tokens_never_embedded"] > 0
