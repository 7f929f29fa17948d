"""A generated Sphinx-style manual (the chrome of python3.11-doc's pages: a top bar with ``<h3>Navigation</h3>``,
a sidebar of "Table of Contents", "Previous topic", "Next topic" and "This Page", permalink marks ``¶`` after
each heading) loads as a folder dataset with each page's own title, headings without the mark, no navigation
headings or links in the text, and link text kept without its target even when it spans a line or sits in a
heading. Converted text is cached under the converter's version, so an old entry is not reused."""

from __future__ import annotations

import pytest

from ragbench.config import DatasetSpec
from ragbench.core.cache import DocumentCache
from ragbench.data import load_dataset
from ragbench.data.convert import (CLEANING_VERSION, CONVERTER_VERSION, ConvertOptions, clean_links, cleaning_id,
                                   convert, converter_id)
from ragbench.data.folder import scan_folder

TOPICS = ["Sorting", "Logging", "Sockets", "Unicode", "Regular Expressions"]


def _sidebar(topic: str) -> str:
    return f"""<div class="sphinxsidebar" role="navigation" aria-label="main navigation">
<div class="sphinxsidebarwrapper">
  <div><h3><a href="../contents.html">Table of Contents</a></h3>
    <ul><li><a class="reference internal" href="#">{topic} HOW TO</a><ul>
      <li><a class="reference internal" href="#basics">Basics</a></li>
      <li><a class="reference internal" href="#key-functions">Key Functions</a></li></ul></li></ul></div>
  <div><h4>Previous topic</h4><p class="topless"><a href="prev.html" title="previous chapter">Prev HOWTO</a></p></div>
  <div><h4>Next topic</h4><p class="topless"><a href="next.html" title="next chapter">Next HOWTO</a></p></div>
  <div role="note" aria-label="source link"><h3>This Page</h3>
    <ul class="this-page-menu"><li><a href="../bugs.html">Report a Bug</a></li>
      <li><a href="https://example.org/{topic}.rst" rel="nofollow">Show Source</a></li></ul></div>
</div></div>"""


def _page(topic: str, *, role: bool = True) -> str:
    nav_role = ' role="navigation"' if role else ""
    related = f"""<div class="related"{nav_role} aria-label="related navigation"><h3>Navigation</h3>
<ul><li class="right"><a href="../genindex.html" title="General Index">index</a></li>
<li class="right"><a href="../py-modindex.html">modules</a> |</li><li class="right"><a href="next.html">next</a> |</li>
<li class="right"><a href="prev.html">previous</a> |</li><li><a href="../index.html">3.11 Documentation</a> &#187;</li>
<li><a href="index.html">Python HOWTOs</a> &#187;</li>
<li class="nav-item-this"><a href="">{topic} HOW TO</a></li></ul></div>"""
    sidebar = _sidebar(topic) if role else _sidebar(topic).replace(' role="navigation"', "")
    return f"""<!DOCTYPE html><html><head><title>{topic} HOW TO &#8212; Python 3.11.2 documentation</title></head>
<body>{related}
<div class="document"><div class="body" role="main">
<section id="{topic.lower()}-how-to"><h1>{topic} HOW TO<a class="headerlink" href="#{topic.lower()}-how-to"
 title="Permalink to this heading">¶</a></h1>
<p>The {topic.lower()} module is explained step by step; start with the <a href="https://wiki.example.org/BG">Beginner’s
Guide to Python</a> if the language is new to you.</p>
<section id="basics"><h2>Basics<a class="headerlink" href="#basics" title="Permalink to this heading">¶</a></h2>
<p>Calling the {topic.lower()} helpers returns a new value and leaves the old one alone.</p></section>
<section id="key-functions"><h2>Key Functions<a class="headerlink" href="#key-functions"
 title="Permalink to this heading">¶</a></h2>
<h3><a class="toc-backref" href="#id51">Why does a_tuple[i] += [‘item’] raise an exception?</a><a class="headerlink"
 href="#why" title="Permalink to this heading">¶</a></h3>
<p>Because the tuple cannot be changed in place while the list inside it can.</p></section></section>
</div></div>{sidebar}{related}</body></html>"""


@pytest.fixture
def manual(tmp_path):
    root = tmp_path / "howto"
    root.mkdir()
    for t in TOPICS:
        (root / f"{t.lower().replace(' ', '_')}.html").write_text(_page(t), encoding="utf-8")
    (root / "questions.csv").write_text("question,doc,quote\nWhat do the sorting helpers return?,sorting.html,"
                                        "returns a new value\n", encoding="utf-8")
    return root


def test_each_page_is_titled_by_its_h1_not_by_the_navigation_bar(manual, tmp_path):
    ds = load_dataset(DatasetSpec(format="folder", path=manual), tmp_path / "cache")
    titles = dict(zip(ds.corpus["doc_id"], ds.corpus["title"]))
    assert titles["sorting.html"] == "Sorting HOW TO"
    assert titles["regular_expressions.html"] == "Regular Expressions HOW TO"
    text = dict(zip(ds.corpus["doc_id"], ds.corpus["text"]))["sorting.html"]
    assert text.startswith("# Sorting HOW TO\n")
    assert "¶" not in text and "## Basics\n" in text and "## Key Functions\n" in text
    assert "Navigation" not in text and "General Index" not in text


def test_title_falls_back_to_the_title_element_without_an_h1():
    page = "<html><head><title>Glossary &#8212; Docs</title></head><body><h3>Terms</h3><p>Terms.</p></body>"
    assert convert(page.encode(), "html")[1] == "Glossary — Docs"


def test_the_first_h1_is_the_title_even_after_another_heading(tmp_path):
    (tmp_path / "glossary.html").write_text("<html><body><div class='header'><h2>Python 3.11 docs</h2>"
                                            "<p>Welcome to the docs.</p></div>"
                                            "<h1>Glossary</h1><p>Terms and their meaning.</p></body></html>")
    assert scan_folder(tmp_path).documents[0].title == "Glossary"


def test_an_element_marked_as_navigation_goes_even_when_it_is_not_a_link_list():
    page = ("<html><body><div role='navigation'><h3>Navigation</h3><p>Use the index to find a page.</p></div>"
            "<h1>Glossary</h1><p>Terms.</p></body></html>")
    text, _ = convert(page.encode(), "html")
    assert text == "# Glossary\n\nTerms.\n"


def test_sidebar_headings_go_with_their_link_lists(manual):
    scan = scan_folder(manual)
    doc = next(d for d in scan.documents if d.doc_id == "logging.html")
    for chrome in ("Table of Contents", "Previous topic", "Next topic", "This Page", "Prev HOWTO", "Show Source"):
        assert chrome not in doc.text, chrome
    assert doc.text.rstrip().endswith("while the list inside it can.")


def test_headings_over_link_only_sections_go_when_chrome_is_not_marked(manual):
    """The same sidebar without role=navigation (another theme): the headings over link lists, over one link or
    over nothing are dropped by the Markdown cleaning itself."""
    text, _ = convert(_page("Sorting", role=False).encode(), "html", ConvertOptions(drop_link_lists=False))
    assert "#### Next topic" in text and "### Navigation" in text  # kept when link lists are kept
    cleaned, dropped = clean_links(text, ConvertOptions())
    for chrome in ("Table of Contents", "Previous topic", "Next topic", "This Page", "Navigation"):
        assert chrome not in cleaned, chrome
    assert any("#### Next topic" in b for b in dropped)
    assert "## Basics" in cleaned and "Calling the sorting helpers" in cleaned


def test_a_heading_over_real_text_or_a_subsection_stays():
    """A heading over links goes with them; one with nothing under it in the page itself is structure (the
    markdown chunker joins it to the next section) and stays."""
    text = "# Guide\n\n## Setup\n\nInstall it.\n\n## See also\n\n[Other](o.html)\n\n## Empty\n"
    cleaned, _ = clean_links(text, ConvertOptions())
    assert cleaned == "# Guide\n\n## Setup\n\nInstall it.\n\n## Empty\n"


def test_link_targets_go_across_a_line_break_and_inside_a_heading(manual):
    doc = next(d for d in scan_folder(manual).documents if d.doc_id == "sorting.html")
    assert "Beginner’s\nGuide to Python if the language" in doc.text or \
        "Beginner’s Guide to\nPython if the language" in doc.text
    assert "### Why does a_tuple[i] += [‘item’] raise an exception?\n" in doc.text
    assert "](" not in doc.text and "wiki.example.org" not in doc.text and "#id51" not in doc.text


def test_a_conversion_cached_by_the_version_1_converter_is_not_reused(manual, tmp_path):
    """An entry left by the converter before these fixes (the "Navigation" title, ``¶`` marks) is keyed apart."""
    import hashlib

    cache_root = tmp_path / "cache"
    options = ConvertOptions()
    sha = hashlib.sha256((manual / "sorting.html").read_bytes()).hexdigest()
    old_id = converter_id("html").replace(f"html-v{CONVERTER_VERSION}", "html-v1", 1) + cleaning_id(options)
    stale = "### Navigation\n\n# Sorting HOW TO¶\n\nold text\n"
    DocumentCache(cache_root).put(DocumentCache.key(sha, old_id.replace(f"clean-v{CLEANING_VERSION}", "clean-v1")),
                                  {"text": stale, "title": None})
    DocumentCache(cache_root).put(DocumentCache.key(sha, old_id), {"text": stale, "title": None})
    doc = next(d for d in scan_folder(manual, cache_root=cache_root).documents if d.doc_id == "sorting.html")
    assert not doc.cached and doc.title == "Sorting HOW TO" and "old text" not in doc.text


def test_a_link_title_with_escaped_quotes_loses_its_target():
    """markdownify escapes the quotes of a title: ``[DBM](dbm.html "the standard \\"database\\" interface")``."""
    page = '<p>Hashes such as <a href="dbm.html" title="the standard &quot;database&quot; (Unix)">DBM</a> work.</p>'
    text, _ = convert(page.encode(), "html")
    assert clean_links(text, ConvertOptions())[0] == "Hashes such as DBM work.\n", text
