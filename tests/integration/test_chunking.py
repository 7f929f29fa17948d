"""Chunkers: offsets always point at the chunk text; sizes, overlaps, sentences and headings behave as specified."""

from __future__ import annotations

import pytest
from conftest import DEMO

from ragbench.chunking import (
    chunk_corpus,
    contextual_text,
    fixed_spans,
    heading_path_at,
    markdown_headings,
    sentence_spans,
)
from ragbench.config import (
    DatasetSpec,
    FixedChunker,
    MarkdownChunker,
    RecursiveChunker,
    SentenceChunker,
    WholeDocChunker,
)
from ragbench.core.models import count_tokens
from ragbench.core.schemas import index_texts
from ragbench.data import load_dataset

SPECS = [WholeDocChunker(), FixedChunker(size=64, overlap=16), FixedChunker(unit="chars", size=300, overlap=50),
         RecursiveChunker(size=96, overlap=0), SentenceChunker(window=3, stride=2),
         MarkdownChunker(prefix="breadcrumb", max_tokens=128)]


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DatasetSpec(path=DEMO, queries="all"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.kind + getattr(s, "unit", ""))
def test_offsets_point_at_chunk_text_and_cover_the_document(demo, spec):
    chunks = chunk_corpus(demo, spec)
    texts = dict(zip(demo.corpus["doc_id"], demo.corpus["text"]))
    assert chunks.height >= demo.corpus.height
    for doc_id, s, e, text in chunks.select("doc_id", "start", "end", "text").iter_rows():
        assert texts[doc_id][s:e] == text and s < e
    # every non-space character of every document lies in some chunk (nothing silently dropped)
    for doc_id, group in chunks.group_by("doc_id"):
        covered = set()
        for s, e in group.select("start", "end").iter_rows():
            covered.update(range(s, e))
        text = texts[doc_id[0]]
        missing = [i for i, ch in enumerate(text) if not ch.isspace() and i not in covered]
        assert not missing, (spec, doc_id, text[missing[0]:missing[0] + 40])
    assert chunks["chunk_id"].n_unique() == chunks.height


def test_fixed_token_windows_have_size_and_overlap():
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "then", "ran", "home"]  # one token each
    text = " ".join(words[i % len(words)] for i in range(300))
    spans = fixed_spans(text, 50, 10, "tokens", "all-MiniLM-L6-v2")
    counts = count_tokens([text[s:e] for s, e in spans], "all-MiniLM-L6-v2")
    assert all(c == 50 for c in counts[:-1]) and counts[-1] <= 50
    first, second = text[spans[0][0]:spans[0][1]], text[spans[1][0]:spans[1][1]]
    assert count_tokens([text[spans[1][0]:spans[0][1]]], "all-MiniLM-L6-v2")[0] == 10  # the overlap
    assert first and second


def test_sentence_spans_and_windows():
    text = "First one. Second one! Third? Fourth ends\n\nFifth para. Version 3.4.1 is fine."
    sents = [text[s:e] for s, e in sentence_spans(text)]
    assert sents == ["First one.", "Second one!", "Third?", "Fourth ends", "Fifth para.", "Version 3.4.1 is fine."]


def test_markdown_breadcrumb_and_contextual_prefix():
    text = "Intro.\n\n## Setup\nInstall it.\n\n### Linux\nUse apt.\n\n## Usage\nRun it.\n"
    heads = markdown_headings(text)
    assert [(lvl, t) for _, lvl, t in heads] == [(2, "Setup"), (3, "Linux"), (2, "Usage")]
    assert heading_path_at(heads, text.index("Use apt")) == ["Setup", "Linux"]
    assert heading_path_at(heads, text.index("Run it")) == ["Usage"]
    assert contextual_text("breadcrumb", "Guide", ["Setup", "Linux"], "Use apt.") == "Guide > Setup > Linux\nUse apt."
    assert contextual_text("title", "Guide", [], "body") == "Guide body"
    assert contextual_text("none", "Guide", ["x"], "body") == "body"
    assert "# not a heading" not in [t for _, _, t in markdown_headings("```\n# not a heading\n```\n")]


def _beir(folder, docs: dict[str, tuple[str, str]]):
    """A one-query BEIR folder holding ``docs`` (id -> (title, text))."""
    import json

    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n"
                                                 for d, (t, x) in docs.items()))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "anything"}) + "\n")
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(f"query-id\tcorpus-id\tscore\nq1\t{next(iter(docs))}\t1\n")
    return load_dataset(DatasetSpec(path=folder))


NON_ASCII = {"emoji": ("Fêtes 🎉", "Café au lait 🎉🎉 naïve façade. 日本語のテキストです。 Ünïcödé combining e\u0301 done."),
             "md": ("Guide ✓", "Intro é.\n\n## Setup 🛠\nInstall it — now.\n\n### Linux\nUse apt ✓.\n\n## Usage\nRun ✓ it.\n"),
             "plain": ("", "short")}


@pytest.mark.parametrize("spec", [FixedChunker(unit="chars", size=7, overlap=3), MarkdownChunker(prefix="breadcrumb",
                                  max_tokens=8), SentenceChunker(window=1), WholeDocChunker(prefix="none"), WholeDocChunker()],
                         ids=lambda s: f"{s.kind}-{s.prefix}")
def test_chunk_texts_are_cut_by_characters_and_index_texts_carry_the_prefix(tmp_path, spec):
    """The chunk table's texts are cut from the corpus column by polars (characters, as Python counts them, emoji
    and combining marks included) and the index text is the contextual prefix plus the text."""
    ds = _beir(tmp_path / "d", NON_ASCII)
    chunks = chunk_corpus(ds, spec)
    assert chunks.height > len(NON_ASCII) or spec.kind == "whole"
    indexed = index_texts(chunks).to_list()
    for row, (doc_id, s, e, text) in enumerate(chunks.select("doc_id", "start", "end", "text").iter_rows()):
        title, doc = NON_ASCII[doc_id]
        assert text == doc[s:e]
        if spec.prefix == "breadcrumb":  # the BEIR title convention, or a trail of headings on its own line
            trail = " > ".join(t for t in [title, *heading_path_at(markdown_headings(doc), s)] if t)
            expected = f"{trail}\n{text}" if trail else text
        else:
            expected = f"{title} {text}" if spec.prefix == "title" and title else text
        assert indexed[row] == expected
    assert index_texts(chunks)[1:3].to_list() == indexed[1:3] and index_texts(chunks).gather([2, 0]).to_list() == [
        indexed[2], indexed[0]]
    assert index_texts(chunks).len_chars().to_list() == [len(t) for t in indexed]


def test_whole_document_chunks_share_the_corpus_text(tmp_path):
    """Whole-document chunks hold no copy of the corpus text (built or read back from the cache): their text
    column's Arrow buffers are the corpus column's. Cut chunks carry their own."""
    from polars import CompatLevel

    from ragbench.chunking import share_corpus_text
    from ragbench.core.cache import ChunkCache

    def buffers(series):
        arrow = series.to_arrow(compat_level=CompatLevel.newest())
        return {b.address for b in arrow.buffers()[2:] if b is not None}

    ds = _beir(tmp_path / "d", {f"d{i}": (f"T{i}", f"document number {i} " * 5) for i in range(20)})
    corpus = buffers(ds.corpus["text"])
    whole = chunk_corpus(ds, WholeDocChunker())
    assert buffers(whole["text"]) <= corpus
    cache = ChunkCache(tmp_path / "cache")
    cache.get_or_build("k", lambda: whole)
    cached, was_cached = cache.get_or_build("k", lambda: None)
    assert was_cached and not buffers(cached["text"]) & corpus  # read back: a copy of its own
    shared = share_corpus_text(cached, ds.corpus)
    assert shared.equals(cached) and buffers(shared["text"]) <= corpus
    cut = chunk_corpus(ds, FixedChunker(unit="chars", size=30, overlap=0))
    assert share_corpus_text(cut, ds.corpus) is cut and not buffers(cut["text"]) & corpus
