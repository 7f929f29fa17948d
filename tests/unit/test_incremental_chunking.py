"""Incremental chunking of a folder: touching one file re-chunks only that file, and the chunks equal a chunking from
scratch (ids, offsets, prefixes, texts); a chunker change or a damaged span file cuts everything again."""

from __future__ import annotations

from folder_fixture import build_folder
from polars.testing import assert_frame_equal

from ragbench.chunking import FixedChunker, MarkdownChunker, chunk_corpus, chunk_corpus_incremental
from ragbench.data import DatasetSpec, load_dataset


def _load(root, home):
    return load_dataset(DatasetSpec(format="folder", path=root), home / "cache")


def test_touching_one_file_rechunks_only_that_file(tmp_path):
    root, home, kept = build_folder(tmp_path / "docs"), tmp_path / "home", tmp_path / "home" / "by-document"
    ds = _load(root, home)
    docs = ds.corpus["doc_id"].to_list()
    for spec in (FixedChunker(unit="chars", size=120, overlap=20), MarkdownChunker(prefix="breadcrumb")):
        chunks, cut = chunk_corpus_incremental(ds, spec, kept)
        assert sorted(cut) == sorted(docs)  # first time: every document
        assert_frame_equal(chunks, chunk_corpus(ds, spec))
        assert chunk_corpus_incremental(ds, spec, kept)[1] == ()  # nothing changed: nothing cut

    # one file edited (a new section in the middle shifts every later offset of that document only)
    md = root / "guides" / "install.md"
    md.write_text(md.read_text().replace("## First start", "## Sizing\n\nGive the broker 8 GB of memory per "
                                                            "thousand queues.\n\n## First start"))
    changed = _load(root, home)
    assert changed.fingerprint != ds.fingerprint
    for spec in (FixedChunker(unit="chars", size=120, overlap=20), MarkdownChunker(prefix="breadcrumb")):
        chunks, cut = chunk_corpus_incremental(changed, spec, kept)
        assert cut == ("guides/install.md",)
        assert_frame_equal(chunks, chunk_corpus(changed, spec))
        assert "Give the broker 8 GB" in " ".join(chunks.filter(chunks["doc_id"] == "guides/install.md")["text"])

    # another chunker setting: everything is cut again; the edit undone: served from what was kept before
    assert len(chunk_corpus_incremental(changed, FixedChunker(unit="chars", size=100), kept)[1]) == len(docs)
    md.write_text(md.read_text().replace("## Sizing\n\nGive the broker 8 GB of memory per thousand queues.\n\n", ""))
    assert chunk_corpus_incremental(_load(root, home), FixedChunker(unit="chars", size=120, overlap=20), kept)[1] == ()


def test_a_damaged_span_file_is_cut_again(tmp_path):
    root, home, kept = build_folder(tmp_path / "docs"), tmp_path / "home", tmp_path / "kept"
    ds, spec = _load(root, home), FixedChunker(unit="chars", size=150)
    chunk_corpus_incremental(ds, spec, kept)
    (file,) = kept.glob("*.parquet")
    file.write_bytes(b"not parquet")
    chunks, cut = chunk_corpus_incremental(ds, spec, kept)
    assert len(cut) == ds.corpus.height
    assert_frame_equal(chunks, chunk_corpus(ds, spec))
    assert chunk_corpus_incremental(ds, spec, kept)[1] == ()  # rewritten
