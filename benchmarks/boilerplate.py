"""Boilerplate-only and short chunks of an HTML folder, with and without cleaning at conversion.

For each variant of the folder format's ``convert`` option — ``false`` (everything kept), the default, and
optionally the default plus ``--drop-selectors`` — loads the folder as a sweep would (the conversion cache of
``--home``), chunks it with the markdown chunker (breadcrumb prefix, 256 tokens, as configs/debian-python-howto.yaml)
and the recursive one, and counts per chunker:

* **boilerplate-only chunks**: chunks whose text is page chrome, judged from the HTML itself and not by the
  cleaning under test: a page's *content* is the element ``--main`` selects (Sphinx: ``div[role=main]``), its
  *chrome* every other text of its ``<body>``. A chunk is boilerplate-only when its words (lowercased ``\\w+`` runs,
  link targets removed) are a contiguous run of the chrome's words and not of the content's, or when it has no words
  at all. A chunk that could be either (a heading the sidebar repeats) counts as content.
* **chunks with chrome**: chunks that hold at least one line with words judged as above (a sidebar heading joined
  to the section before it, the "Navigation" heading before a page's title).
* **short chunks**: chunk text (without its contextual prefix) under ``--short`` characters (60).
* chunks whose text still holds a Markdown link target (``](``), and chunks whose breadcrumb prefix starts with a
  title that is chrome (``--chrome-title``, e.g. Sphinx's "Navigation" heading taken for the page title).

    python benchmarks/boilerplate.py /tmp/debian-docs/python-howto [--home /tmp/debian-docs/home]
        [--questions FILE] [--drop-selectors "div.related" --drop-selectors "div.sphinxsidebar" ...] [--json OUT]

``--questions`` names a questions file for the folder (default: the walkthrough's; only the documents are counted).
Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's ragbench, installed or not

WORD = re.compile(r"\w+")
LINK_TARGET = re.compile(r"\]\((?:[^()\s]|\([^()]*\))*(?:\s+\"[^\"]*\")?\)")


def words(text: str) -> str:
    """The text as one space-padded run of lowercased word tokens: substring search = contiguous word run."""
    return " " + " ".join(WORD.findall(text.lower())) + " "


def page_parts(html: str, main: str) -> tuple[str, str]:
    """(content words, chrome words) of one HTML page: the ``main`` element's text, and the rest of <body>."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript"]):
        tag.decompose()
    body = soup.body or soup
    found = body.select_one(main)
    content = found.get_text(" ") if found else ""
    if found:
        found.decompose()
    return words(content), words(body.get_text(" "))


def is_boilerplate(chunk_text: str, content: str, chrome: str) -> bool:
    """True when the chunk's words are a run of the page chrome's words and not of its content's (or it has none)."""
    w = words(LINK_TARGET.sub("]", chunk_text))
    if w.strip() == "":
        return True
    return w in chrome and w not in content


def has_chrome(chunk_text: str, content: str, chrome: str) -> bool:
    """True when some line of the chunk that has words is chrome by :func:`is_boilerplate` (a code fence or a table
    rule has none, and is no evidence either way)."""
    return any(is_boilerplate(line, content, chrome) for line in chunk_text.splitlines()
               if WORD.search(LINK_TARGET.sub("]", line)))


def count(folder: Path, questions: Path, home: Path, convert, main: str, short: int, chrome_title: str | None) -> dict:
    """Counts for one ``convert`` value, per chunker (see the module docstring)."""
    from ragbench.chunking.markdown import MarkdownChunker
    from ragbench.chunking.recursive import RecursiveChunker
    from ragbench.chunking.base import chunk_corpus
    from ragbench.data.folder import FolderDataset

    ds = FolderDataset(path=folder, questions=questions.resolve(), convert=convert).load(cache_root=home / "cache")
    parts = {doc_id: page_parts((folder / doc_id).read_text(encoding="utf-8"), main)
             for doc_id in ds.corpus["doc_id"].to_list()}
    out = {"documents": ds.corpus.height, "characters": int(ds.corpus["text"].str.len_chars().sum())}
    for label, spec in (("markdown", MarkdownChunker(prefix="breadcrumb", max_tokens=256)),
                        ("recursive", RecursiveChunker(size=256, overlap=0))):
        chunks = chunk_corpus(ds, spec)
        boiler = [is_boilerplate(t, *parts[d]) for d, t in zip(chunks["doc_id"], chunks["text"])]
        out[label] = {
            "chunks": chunks.height,
            "boilerplate_only": sum(boiler),
            "with_chrome": sum(has_chrome(t, *parts[d]) for d, t in zip(chunks["doc_id"], chunks["text"])),
            "short": int((chunks["text"].str.strip_chars().str.len_chars() < short).sum()),
            "link_targets": int(chunks["text"].str.contains("](", literal=True).sum()),
            "chrome_title": (int(chunks["prefix"].str.starts_with(chrome_title).sum()) if chrome_title else None),
            "examples": [t[:70] for t, b in zip(chunks["text"], boiler) if b][:5],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="the HTML folder (with a questions file)")
    ap.add_argument("--questions", type=Path, default=ROOT / "datasets" / "debian-python-howto" / "questions.csv",
                    help="a questions file for the folder (only the documents are counted)")
    ap.add_argument("--home", type=Path, default=Path(".ragbench"), help="home whose conversion cache to use")
    ap.add_argument("--main", default="div[role=main]", help="CSS selector of a page's content (default: Sphinx's)")
    ap.add_argument("--short", type=int, default=60, help="a chunk under this many characters is short")
    ap.add_argument("--drop-selectors", action="append", default=[],
                    help="also measure the default cleaning plus these drop_selectors (repeat it)")
    ap.add_argument("--chrome-title", default="Navigation", help="a page title that is chrome ('' to skip)")
    ap.add_argument("--json", type=Path, help="write the counts as JSON here")
    a = ap.parse_args()
    if not a.folder.is_dir():
        sys.exit(f"{a.folder}: folder not found (scripts/fetch_debian_docs.sh writes the walkthrough's)")
    from ragbench.data.convert import ConvertOptions

    variants = {"convert: false": False, "default": True}
    if a.drop_selectors:
        variants["default + drop_selectors"] = ConvertOptions(drop_selectors=tuple(a.drop_selectors))
    results = {name: count(a.folder, a.questions, a.home, v, a.main, a.short, a.chrome_title or None)
               for name, v in variants.items()}
    print(f"| convert | chunker | chunks | boilerplate-only | with chrome | under {a.short} chars "
          f"| with link targets | prefix starts {a.chrome_title!r} |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        for label in ("markdown", "recursive"):
            c = r[label]
            print(f"| {name} | {label} | {c['chunks']} | {c['boilerplate_only']} | {c['with_chrome']} | {c['short']} | "
                  f"{c['link_targets']} | {c['chrome_title']} |")
    for name, r in results.items():
        print(f"\n{name}: {r['documents']} documents, {r['characters']:,} characters; boilerplate-only markdown "
              f"chunks, first five: {r['markdown']['examples']}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
