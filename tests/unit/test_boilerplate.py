"""Boilerplate out at conversion: on a generated manual of 12 HTML pages with a repeated footer (its date differs
per page), a navigation bar and a table of contents, the folder dataset drops the repeated blocks and the link lists
and keeps link text without its target; ``convert: false`` keeps everything; ``datasets validate`` and ``datasets
init`` say what was dropped and how often; quotes are located in the cleaned text and a quote of the footer is
reported as boilerplate, naming the questions file and line."""

from __future__ import annotations

import csv
import io

import pytest
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import DatasetSpec
from ragbench.core.errors import DatasetError
from ragbench.data import load_dataset
from ragbench.data.folder import scan_folder

TOPICS = ["reset", "merge", "rebase", "commit", "branch", "tag", "fetch", "push", "pull", "log", "diff", "stash"]
NAV = '<p><a href="index.html">Home</a> | <a href="toc.html">Contents</a> | <a href="next.html">Next page</a></p>'
TOC = ('<ul class="toc"><li><a href="#synopsis">Synopsis</a></li><li><a href="#description">Description</a></li>'
       '<li><a href="#options">Options</a></li></ul>')
FOOTER = ('<div class="site-footer"><p>Last updated 2024-05-{day:02d} 10:{day:02d}:00 UTC</p>'
          '<p>Part of the Gadget documentation suite.</p></div>')


def _page(i: int, topic: str) -> str:
    return f"""<!doctype html><html><head><title>gadget-{topic}</title></head><body>
<div id="banner"><p>Try the new gadget cloud for free today.</p></div>
{NAV}
<h1>gadget-{topic}(1) Manual Page</h1>
{TOC}
<h2 id="synopsis">SYNOPSIS</h2>
<pre><code>gadget {topic} [--verbose] [&lt;path&gt;...]</code></pre>
<h2 id="description">DESCRIPTION</h2>
<p>The {topic} command changes the state of the gadget store number {i} and records every change in the journal
so that it can be undone with a later <a href="gadget-undo.html#def_undo">undo</a> of the same store.</p>
<h2 id="options">OPTIONS</h2>
<p>With --verbose the {topic} command prints each object it touches, one line per object, to standard error.</p>
{FOOTER.format(day=i + 1)}
</body></html>
"""


def _questions(rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["question", "doc", "quote", "answer", "class"])
    writer.writerows(rows)
    return buf.getvalue()


QUESTIONS = [("What does reset record?", "man/gadget-reset.html",
              "records every change in the journal so that it can be undone with a later undo", "", ""),
             ("What does merge print with --verbose?", "", "the merge command prints each object it touches", "", "")]


@pytest.fixture
def manual(tmp_path):
    root = tmp_path / "manual"
    (root / "man").mkdir(parents=True)
    for i, topic in enumerate(TOPICS):
        (root / "man" / f"gadget-{topic}.html").write_text(_page(i, topic), encoding="utf-8")
    (root / "questions.csv").write_text(_questions(QUESTIONS), encoding="utf-8")
    return root


def _texts(ds) -> dict[str, str]:
    return dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))


def test_footer_navigation_and_table_of_contents_are_dropped_by_default(manual):
    ds = load_dataset(DatasetSpec(format="folder", path=manual))
    texts = _texts(ds)
    assert len(texts) == 12
    for doc_id, text in texts.items():
        assert "Last updated" not in text and "documentation suite" not in text, doc_id
        assert "Next page" not in text and "Contents" not in text, doc_id  # navigation and table of contents
        assert "(#synopsis)" not in text and "#def_undo" not in text and "gadget-undo.html" not in text
        assert "later undo of the same store" in " ".join(text.split())  # the link's text stays
        assert "## SYNOPSIS" in text and "## DESCRIPTION" in text and "```" in text  # structure and code kept
        assert "Try the new gadget cloud" not in text  # the banner repeats too
    assert ds.corpus.filter(ds.corpus["doc_id"] == "man/gadget-reset.html")["title"][0] == \
        "gadget-reset(1) Manual Page"


def test_convert_false_keeps_everything_and_is_another_fingerprint(manual):
    cleaned = load_dataset(DatasetSpec(format="folder", path=manual))
    kept = load_dataset(DatasetSpec(format="folder", path=manual, convert=False))
    text = _texts(kept)["man/gadget-reset.html"]
    assert "Last updated 2024-05-01" in text and "Part of the Gadget documentation suite." in text
    assert "[Next page](next.html)" in text and "[Synopsis](#synopsis)" in text
    assert "[undo](gadget-undo.html#def_undo)" in text
    assert kept.fingerprint != cleaned.fingerprint
    assert DatasetSpec(format="folder", path=manual, convert=True) == DatasetSpec(format="folder", path=manual)


def test_options_are_part_of_the_conversion_cache_key(manual, tmp_path):
    cache = tmp_path / "cache"
    first = scan_folder(manual, cache_root=cache)
    assert first.n_converted == 12
    off = scan_folder(manual, cache_root=cache, convert=DatasetSpec(format="folder", path=manual,
                                                                     convert=False).convert)
    assert off.n_converted == 12  # not the cleaned text of the cache
    assert all("](" in d.text for d in off.documents)
    again = scan_folder(manual, cache_root=cache)
    assert again.n_converted == 0 and [d.text for d in again.documents] == [d.text for d in first.documents]


def test_selectors_drop_elements_and_too_small_a_folder_keeps_its_repeats(manual, tmp_path):
    spec = DatasetSpec(format="folder", path=manual, convert={"drop_repeated": 0, "drop_selectors": ["#banner"]})
    texts = _texts(load_dataset(spec)).values()
    assert all("gadget cloud" not in t and "Part of the Gadget documentation suite." in t for t in texts)
    small = tmp_path / "small"
    (small / "man").mkdir(parents=True)
    for i, topic in enumerate(TOPICS[:9]):  # fewer documents than a repeat needs
        (small / "man" / f"gadget-{topic}.html").write_text(_page(i, topic), encoding="utf-8")
    texts = [d.text for d in scan_folder(small).documents]
    assert all("Part of the Gadget documentation suite." in t for t in texts)
    assert all("Next page" not in t for t in texts)  # a link list goes whatever the folder's size
    with pytest.raises(ValueError, match="not a CSS selector"):
        DatasetSpec(format="folder", path=manual, convert={"drop_selectors": ["#"]})


def test_validate_and_init_list_what_was_dropped_and_how_often(manual, tmp_path):
    res = CliRunner().invoke(app, ["datasets", "validate", str(manual), "--home", str(tmp_path / "home")],
                             terminal_width=250)
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.replace("│", " ").split())  # table cells wrap
    assert "3 repeated blocks dropped from 12 pages" in out, res.output
    assert "'Last updated 2024-05-05 10:05:00 UTC' (12 pages)" in out  # as the first page says it (branch)
    assert "'Part of the Gadget documentation suite.' (12 pages)" in out
    assert "2 link lists dropped from 12 pages: '- Synopsis - Description - Options' (12 pages), 'Home | " \
        "Contents | Next page' (12 pages)" in out
    assert "convert: false" in out
    kept = CliRunner().invoke(app, ["datasets", "validate", str(manual), "--no-convert", "--home",
                                    str(tmp_path / "home")], terminal_width=250)
    assert kept.exit_code == 0, kept.output
    assert "dropped from" not in kept.output
    (manual / "questions.csv").unlink()
    init = CliRunner().invoke(app, ["datasets", "init", str(manual), "--home", str(tmp_path / "home")],
                              terminal_width=250)
    assert init.exit_code == 0, init.output
    assert "3 repeated blocks dropped from 12 pages" in " ".join(init.output.split()), init.output


def test_quotes_are_located_in_the_cleaned_text_and_a_footer_quote_is_reported(manual):
    ds = load_dataset(DatasetSpec(format="folder", path=manual))
    texts = _texts(ds)
    assert ds.spans.height == 2
    for doc_id, start, end in ds.spans.select("doc_id", "start", "end").iter_rows():
        assert "undo" in texts[doc_id][start:end] or "prints each object" in texts[doc_id][start:end]
    rows = [*QUESTIONS, ("Who makes the manual?", "man/gadget-tag.html", "Part of the Gadget documentation suite",
                         "", "")]
    (manual / "questions.csv").write_text(_questions(rows), encoding="utf-8")
    with pytest.raises(DatasetError) as e:
        load_dataset(DatasetSpec(format="folder", path=manual))
    line = next(x for x in str(e.value).splitlines() if "documentation suite" in x)
    assert line.startswith(f"{manual / 'questions.csv'}:4: ")
    assert "only in boilerplate dropped at conversion (man/gadget-tag.html)" in line
    ok = load_dataset(DatasetSpec(format="folder", path=manual, convert=False))
    assert ok.spans.height == 3
