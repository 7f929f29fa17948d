"""Structure kept, not repeated: a breadcrumb never repeats the title (a page's first heading is its title), a
heading-only or very short section joins the section after it under the markdown chunker, every span is an exact
slice of its document, and the changed behaviour carries new versions (stored chunks and results of before are not
reused)."""

from __future__ import annotations

import re

import pytest

from ragbench.chunking import chunk_corpus
from ragbench.chunking.base import ChunkerSpec
from ragbench.chunking.markdown import MIN_SECTION_TOKENS, MarkdownChunker
from ragbench.chunking.recursive import RecursiveChunker
from ragbench.config import DatasetSpec
from ragbench.core.cache import ChunkCache
from ragbench.core.hashing import stable_hash
from ragbench.data import load_dataset

PAGE = """# gadget-reset(1) Manual Page

## NAME

gadget-reset - Reset the current store to the specified state, keeping or discarding the journal of changes

## SYNOPSIS

## DESCRIPTION

In the first form, gadget reset copies entries from the given tree into the index, so that the next commit records
them. The working files are left as they are; only the index moves back to the state of that tree.

### Modes

Soft.

## OPTIONS

With --quiet nothing is printed except errors, which still go to standard error as one line each.

## SEE ALSO
"""


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "gadget-reset.md").write_text(PAGE, encoding="utf-8")
    (root / "questions.csv").write_text("question,doc\nHow do I reset?,gadget-reset.md\n", encoding="utf-8")
    return load_dataset(DatasetSpec(format="folder", path=root))


def test_the_breadcrumb_does_not_repeat_the_title(dataset):
    assert dataset.corpus["title"][0] == "gadget-reset(1) Manual Page"
    title = "gadget-reset(1) Manual Page"
    prefixes = chunk_corpus(dataset, MarkdownChunker(prefix="breadcrumb"))["prefix"].to_list()
    assert prefixes == [f"{title}\n", f"{title} > SYNOPSIS\n", f"{title} > DESCRIPTION > Modes\n"]
    prefixes = chunk_corpus(dataset, RecursiveChunker(size=24, prefix="breadcrumb"))["prefix"].to_list()
    assert f"{title} > OPTIONS\n" in prefixes and f"{title} > NAME\n" in prefixes, prefixes
    assert all(p.count(title) == 1 for p in prefixes), prefixes


def test_heading_only_and_short_sections_join_the_next_section(dataset):
    chunks = chunk_corpus(dataset, MarkdownChunker(prefix="breadcrumb"))
    texts = chunks["text"].to_list()
    assert not any(re.fullmatch(r"#+ [^\n]*", t) for t in texts), texts  # no chunk is a lone heading
    synopsis = next(t for t in texts if "## SYNOPSIS" in t)
    assert synopsis.startswith("## SYNOPSIS\n\n## DESCRIPTION\n\nIn the first form")  # joined to the next
    modes = next(t for t in texts if "### Modes" in t)
    assert modes.startswith("### Modes\n\nSoft.\n\n## OPTIONS")  # under MIN_SECTION_TOKENS: joined to the next
    options = next(t for t in texts if "## OPTIONS" in t)
    assert options.rstrip().endswith("## SEE ALSO")  # a lone heading at the end joins the section before
    assert texts[0].startswith("# gadget-reset(1) Manual Page\n\n## NAME")  # the title heading too
    assert len(texts) == 3
    assert MIN_SECTION_TOKENS >= 8


@pytest.mark.parametrize("chunker", [MarkdownChunker(), MarkdownChunker(max_tokens=20),
                                     RecursiveChunker(size=24, prefix="breadcrumb")], ids=str)
def test_spans_are_exact_slices_and_lose_no_text(dataset, chunker):
    doc = dataset.corpus["text"][0]
    chunks = chunk_corpus(dataset, chunker).sort("start")
    for start, end, text in chunks.select("start", "end", "text").iter_rows():
        assert doc[start:end] == text
    if chunker.kind == "markdown":  # sections never overlap and together hold every word of the page
        ends = chunks["end"].to_list()
        assert all(a <= b for a, b in zip(ends, chunks["start"].to_list()[1:]))
        assert "\n".join(chunks["text"]).split() == doc.split()


def test_new_behaviour_has_new_versions_so_stored_chunks_are_not_reused():
    fp = "fingerprint"
    for spec in (MarkdownChunker(prefix="breadcrumb"), MarkdownChunker(prefix="title"),
                 RecursiveChunker(size=128, prefix="breadcrumb")):
        assert spec.behaviour_version > 1, spec
        before = stable_hash({"dataset": fp, "chunker": spec.canonical()})  # the key of version 1
        assert ChunkCache.key(fp, spec) != before
    title = RecursiveChunker(size=128)  # its output did not change: its keys stay
    assert title.behaviour_version == 1
    assert ChunkCache.key(fp, title) == stable_hash({"dataset": fp, "chunker": title.canonical()})
    assert issubclass(MarkdownChunker, ChunkerSpec)
