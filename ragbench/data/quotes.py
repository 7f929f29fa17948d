"""Locating quoted evidence in documents: a quote labels when it occurs exactly once, found the same way everywhere.

Both sides are normalised alike (:func:`normalize`: case, runs of whitespace, typographic quotes and dashes, the
Markdown marks a conversion adds and link targets); quotation marks around a quote are dropped
(:data:`QUOTE_MARKS`), and it must start and end on word boundaries (:func:`find_all`). A hit is ``[start, end)``
of the matched text in the original document (:meth:`QuoteCorpus.locate`).
"""

from __future__ import annotations

import difflib
import re

_TYPOGRAPHIC = {**dict.fromkeys("‘’‚‛′", "'"), **dict.fromkeys("“”„‟″«»", '"'),
                **dict.fromkeys("‐‑‒–—―−", "-"), "…": "...", "\u00ad": ""}
#: Markdown marks a conversion adds and a reader copying from the rendered page does not have
_IGNORED = set("*_`#>")
_LINK = re.compile(r"!?\[([^\]\n]*)\]\(([^)\n]*)\)")
#: quotation marks (and whitespace) around a quote: not part of it
QUOTE_MARKS = "\"'“”„‟‘’‚‛«» \t\n"


def normalize(text: str, *, markdown: bool = True) -> tuple[str, list[int]]:
    """``(normalised text, offsets)``: ``offsets[i]`` is the index in ``text`` of normalised character ``i``.

    Lowercase, typographic quotes/dashes made plain (a run of dashes is one dash: ``--`` reads as ``—``), whitespace
    runs made one space, and (``markdown``) the marks in :data:`_IGNORED` and the ``(target)`` of Markdown links
    dropped. Leading and trailing whitespace is dropped.
    """
    skip = bytearray(len(text))
    if markdown:
        for m in _LINK.finditer(text):
            for i in range(m.start(), m.start(1)):  # "![" / "["
                skip[i] = 1
            for i in range(m.end(1), m.end()):  # "](target)"
                skip[i] = 1
    out: list[str] = []
    offsets: list[int] = []
    space = True  # drop leading whitespace
    for i, ch in enumerate(text):
        if skip[i] or (markdown and ch in _IGNORED):
            continue
        if ch.isspace():
            if not space:
                out.append(" ")
                offsets.append(i)
                space = True
            continue
        space = False
        for c in _TYPOGRAPHIC.get(ch, ch).lower():
            if c == "-" and out and out[-1] == "-":  # "--" typed, "—" printed: one dash
                continue
            out.append(c)
            offsets.append(i)
    if out and out[-1] == " ":
        out.pop()
        offsets.pop()
    return "".join(out), offsets


def _word_char(c: str) -> bool:
    return c.isalnum()


def find_all(haystack: str, needle: str) -> list[int]:
    """Start positions of ``needle`` in ``haystack`` (overlapping ones too) that begin and end on word boundaries."""
    hits, pos = [], haystack.find(needle)
    while pos >= 0:
        end = pos + len(needle)
        left_ok = pos == 0 or not (_word_char(needle[0]) and _word_char(haystack[pos - 1]))
        right_ok = end == len(haystack) or not (_word_char(needle[-1]) and _word_char(haystack[end]))
        if left_ok and right_ok:
            hits.append(pos)
        pos = haystack.find(needle, pos + 1)
    return hits


def snippet(text: str, limit: int = 200) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` characters with an ellipsis."""
    s = " ".join(text.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


class QuoteCorpus:
    """Documents (``doc_id -> text``) normalised once, on demand, for locating quotes."""

    def __init__(self, docs: dict[str, str]):
        self.docs = docs
        self._norm: dict[str, tuple[str, list[int]]] = {}
        self._words: dict[str, set[str]] = {}

    def norm(self, doc_id: str) -> tuple[str, list[int]]:
        """:func:`normalize` of the document (computed once)."""
        if doc_id not in self._norm:
            self._norm[doc_id] = normalize(self.docs[doc_id])
        return self._norm[doc_id]

    def words(self, doc_id: str) -> set[str]:
        """The normalised words of the document (computed once)."""
        if doc_id not in self._words:
            self._words[doc_id] = set(re.findall(r"\w+", self.norm(doc_id)[0]))
        return self._words[doc_id]

    def closest(self, quote: str, candidates: list[str]) -> str:
        """The passage of ``candidates`` most like ``quote`` (normalised), as ``doc: "…"``."""
        qwords = set(re.findall(r"\w+", quote))
        ranked = sorted(candidates, key=lambda d: (-len(qwords & self.words(d)), d))[:3]
        best: tuple[int, str, int, int] | None = None
        for d in ranked:
            text, _ = self.norm(d)
            m = difflib.SequenceMatcher(None, text, quote, autojunk=False).find_longest_match(
                0, len(text), 0, len(quote))
            if m.size and (best is None or m.size > best[0]):
                start = max(0, min(m.a - m.b, len(text) - len(quote)))
                best = (m.size, d, start, min(len(text), start + len(quote)))
        if best is None:
            return "no passage shares a word with it"
        _, d, s, e = best
        text, offsets = self.norm(d)
        s, e = max(0, s - 15), min(len(text), e + 15)  # some context, cut at word boundaries
        while s > 0 and text[s - 1] != " ":
            s -= 1
        while e < len(text) and text[e] != " ":
            e += 1
        orig = self.docs[d][offsets[s]: offsets[max(s, e - 1)] + 1]
        return f"closest passage, in {d}: {snippet(orig)!r}"

    def locate(self, quote: str, candidates: list[str]) -> list[tuple[str, int, int]]:
        """``(doc_id, start, end)`` in original text of each occurrence of normalised ``quote``."""
        out = []
        for d in candidates:
            text, offsets = self.norm(d)
            if quote in text:
                out += [(d, offsets[p], offsets[p + len(quote) - 1] + 1) for p in find_all(text, quote)]
        return out


def locate_quote(quote: str, doc_text: str) -> list[tuple[int, int]]:
    """``[start, end)`` in ``doc_text`` of every occurrence of ``quote``, found as the loader finds quotes
    (normalised both sides, quotation marks around it dropped, word boundaries); one hit = a quote that labels."""
    norm, _ = normalize(quote.strip(QUOTE_MARKS))
    if not norm:
        return []
    return [(s, e) for _, s, e in QuoteCorpus({"doc": doc_text}).locate(norm, ["doc"])]


def where_in(doc_text: str, start: int) -> str:
    """``"line N"``: the 1-based line of offset ``start`` in ``doc_text``."""
    return f"line {doc_text.count(chr(10), 0, start) + 1}"


# a sentence a template can offer as an example quote
_SENTENCE = re.compile(r"[A-Z][^.!?\n`|#*_\[\]]{30,160}[.!?](?=\s|$)")


def example_quote(docs: dict[str, str]) -> tuple[str, str] | None:
    """``(doc_id, sentence)``: the first sentence of 6 to 25 words, in doc id order, that occurs exactly once in
    the corpus (a quote that validates), or None."""
    corpus = QuoteCorpus(docs)
    ids = sorted(docs)
    for d in ids:
        for m in _SENTENCE.finditer(docs[d]):
            sentence = " ".join(m.group(0).split())
            if 6 <= len(sentence.split()) <= 25 and len(corpus.locate(normalize(sentence)[0], ids)) == 1:
                return d, sentence
    return None

