"""Small-to-big parents on hand-made markdown: sections, windows, dedupe, and span judging of the parents."""

from __future__ import annotations

import polars as pl
import pytest

from ragbench.chunking import CHUNK_SCHEMA
from ragbench.core.hashing import stable_hash
from ragbench.core.schemas import CORPUS_SCHEMA, SPANS_SCHEMA
from ragbench.retrieval import RUN_SCHEMA
from ragbench.retrieval.parents import parent_chunks, parent_spans, small_to_big

DOC = ("# Guide\n\nIntro text here.\n\n"
       "## Install\n\nRun the installer. Then check the version.\n\n"
       "### Linux\n\nUse the tarball.\n\n"
       "```\n# not a heading\n```\n\n"
       "## Upgrade\n\nDrain first. Then upgrade.\n")
PLAIN = "No headings at all, just one paragraph of text that is long enough."


def _at(text, needle):
    s = text.index(needle)
    return s, s + len(needle)


def _corpus():
    return pl.DataFrame([("d1", "T", DOC, "{}"), ("d2", "P", PLAIN, "{}")], schema=CORPUS_SCHEMA, orient="row")


def _chunks(spans):
    texts = {"d1": DOC, "d2": PLAIN}
    rows = [(f"c{i}", d, i, s, e, texts[d][s:e], "") for i, (d, s, e) in enumerate(spans)]
    return pl.DataFrame(rows, schema=CHUNK_SCHEMA, orient="row")


def _section(start_needle, end_needle):
    s = DOC.index(start_needle)
    e = DOC.index(end_needle) + len(end_needle)
    return s, e


def test_section_parents_contain_the_chunk_start_and_cover_crossing_chunks():
    spans = [("d1", *_at(DOC, "Run the installer.")),           # in ## Install
             ("d1", *_at(DOC, "Then check the version.")),      # same section -> same parent
             ("d1", *_at(DOC, "Use the tarball.")),             # ### Linux (fence comment is not a heading)
             ("d1", DOC.index("Then check"), DOC.index("Use the tarball") + 3),  # crosses ### Linux
             ("d1", *_at(DOC, "Drain first.")),
             ("d2", *_at(PLAIN, "just one paragraph"))]
    p = parent_spans(_chunks(spans), _corpus(), mode="section")
    rows = {r["chunk_id"]: (r["parent_start"], r["parent_end"]) for r in p.iter_rows(named=True)}
    install = _section("## Install", "check the version.")
    linux = _section("### Linux", "# not a heading\n```")
    assert rows["c0"] == rows["c1"] == install
    assert rows["c2"] == linux
    assert rows["c3"] == (install[0], linux[1])                     # the union of both sections
    assert rows["c4"] == _section("## Upgrade", "Then upgrade.")
    assert rows["c5"] == (0, len(PLAIN))                             # no headings: the whole (trimmed) document
    for r in p.iter_rows(named=True):
        text = DOC if r["doc_id"] == "d1" else PLAIN
        assert r["parent_text"] == text[r["parent_start"]:r["parent_end"]]
        assert r["parent_id"] == stable_hash([r["doc_id"], r["parent_start"], r["parent_end"]])
    # max_level=2: ### Linux no longer cuts, so the Linux chunk's parent is the whole ## Install section
    p2 = parent_spans(_chunks(spans), _corpus(), mode="section", max_level=2)
    assert dict(zip(p2["chunk_id"], p2["parent_start"]))["c2"] == install[0]
    assert dict(zip(p2["chunk_id"], p2["parent_end"]))["c2"] == linux[1]


def test_window_parents_grid_and_centre_clip_to_the_document():
    n = len(DOC)
    spans = [("d1", 5, 10), ("d1", 30, 36), ("d1", 38, 45), ("d1", n - 4, n), ("d1", 0, 60)]
    grid = parent_spans(_chunks(spans), _corpus(), mode="window", window_chars=40)
    g = list(zip(grid["parent_start"], grid["parent_end"]))
    assert g[0] == (0, 40) and g[1] == (0, 40)          # same grid cell -> same parent
    assert g[2] == (0, 45)                              # crosses the grid line at 40 -> extended to cover it
    assert g[3] == ((n - 4) // 40 * 40, n)              # clipped at the document end
    assert g[4] == (0, 60)                              # longer than the window: its own parent
    centre = parent_spans(_chunks(spans), _corpus(), mode="window", window_chars=40, align="center")
    c = list(zip(centre["parent_start"], centre["parent_end"]))
    assert c[0] == (0, 40)                              # shifted right at the document start
    assert c[1] == (33 - 20, 33 + 20)                   # centred on the chunk midpoint 33
    assert c[3] == (n - 40, n)                          # shifted left at the document end


def test_small_to_big_dedupes_parents_and_judges_as_chunks():
    spans = [("d1", *_at(DOC, "Run the installer.")), ("d1", *_at(DOC, "Then check the version.")),
             ("d1", *_at(DOC, "Drain first.")), ("d2", *_at(PLAIN, "one paragraph"))]
    chunks = _chunks(spans)
    parents = parent_spans(chunks, _corpus(), mode="section")
    run = pl.DataFrame([("q", 1, "c1", "d1", 0.9), ("q", 2, "c3", "d2", 0.8), ("q", 3, "c0", "d1", 0.7),
                        ("q", 4, "c2", "d1", 0.6), ("r", 1, "c0", "d1", 0.5)], schema=RUN_SCHEMA, orient="row")
    big = small_to_big(run, parents)
    pid = dict(zip(parents["chunk_id"], parents["parent_id"]))
    q = big.filter(pl.col("query_id") == "q")
    # c0 shares c1's parent and comes later: dropped; the parent keeps c1's rank and score
    assert q["chunk_id"].to_list() == [pid["c1"], pid["c3"], pid["c2"]]
    assert q["rank"].to_list() == [1, 2, 3] and q["score"].to_list() == [0.9, 0.8, 0.6]
    assert big.filter(pl.col("query_id") == "r")["chunk_id"].to_list() == [pid["c0"]]
    table = parent_chunks(parents)
    assert table.schema == pl.Schema(CHUNK_SCHEMA) and table.height == 3
    assert set(big["chunk_id"]) <= set(table["chunk_id"])
    assert (table["prefix"] == "").all()
    # span judging works on the parents: a span inside the Install section is fully covered by its parent
    from ragbench.evaluation.spans import chunk_relevance

    s, e = _at(DOC, "check the version")
    rel = chunk_relevance(table, pl.DataFrame([("q", "d1", s, e, 1)], schema=SPANS_SCHEMA, orient="row"))
    assert rel.filter(pl.col("chunk_id") == pid["c1"])["contains_span"].to_list() == [True]


def test_bad_inputs_are_named():
    chunks = _chunks([("d1", 0, 5)])
    with pytest.raises(ValueError, match="mode must be"):
        parent_spans(chunks, _corpus(), mode="paragraph")
    with pytest.raises(ValueError, match="not in the corpus"):
        parent_spans(chunks.with_columns(pl.lit("dX").alias("doc_id")), _corpus())
    with pytest.raises(ValueError, match="lies outside document"):
        parent_spans(chunks.with_columns(pl.lit(10_000, dtype=pl.Int64).alias("end")), _corpus())
    run = pl.DataFrame([("q", 1, "nope", "d1", 1.0)], schema=RUN_SCHEMA, orient="row")
    with pytest.raises(ValueError, match="have no parent"):
        small_to_big(run, parent_spans(chunks, _corpus()))
