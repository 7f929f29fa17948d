"""Markdown table cells hold what they say: a label's `|` stays in its cell and an error text's HTML reads as text
(MLflow and Prefect render raw HTML inside markdown)."""

from __future__ import annotations

import markdown_it

from ragbench.reporting.tables import Column, to_markdown


def test_cells_keep_pipes_and_show_html_as_text():
    cols = [Column("config", "config"), Column("error", "error")]
    text = to_markdown(cols, [{"config": "whole | MiniLM | dense", "error": "<b>boom</b> & <script>x</script>"}])
    html = markdown_it.MarkdownIt("commonmark").enable("table").render(text)
    assert "<b>" not in html and "<script>" not in html
    assert "&lt;b&gt;boom&lt;/b&gt; &amp;amp;" not in html  # escaped once, not twice
    cells = html.split("<tbody>")[1].count("<td>")
    assert cells == 2 and "whole | MiniLM | dense" in html and "&lt;b&gt;boom&lt;/b&gt; &amp; " in html
