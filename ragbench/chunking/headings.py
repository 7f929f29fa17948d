"""Markdown heading structure: ATX headings outside code fences, and the breadcrumb in force at an offset. Used by
the markdown chunker, the ``breadcrumb`` prefix of every chunker, and small-to-big parents. A breadcrumb never
repeats the document's title (:func:`trail_after_title`): a page whose first heading is its title (every converted
HTML page) would otherwise say it twice in every chunk."""

from __future__ import annotations

import re
from bisect import bisect_right

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """``(offset, level, title)`` of each ATX heading outside fenced code blocks."""
    fenced = [(m.start(), m.end()) for m in _FENCE.finditer(text)]
    return [(m.start(), len(m.group(1)), m.group(2).strip()) for m in _HEADING.finditer(text)
            if not any(a <= m.start() < b for a, b in fenced)]


def heading_path_at(headings: list[tuple[int, int, str]], offset: int) -> list[str]:
    """The breadcrumb (outermost first) of headings in force at ``offset``."""
    stack: list[tuple[int, str]] = []
    for pos, level, title in headings[:bisect_right([h[0] for h in headings], offset)]:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
    return [t for _, t in stack]


def _same_heading(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def trail_after_title(title: str, breadcrumb: list[str]) -> list[str]:
    """``breadcrumb`` without its first heading when that heading is ``title`` (spacing and case aside): the title
    is said once, by the prefix, not again by the trail."""
    if breadcrumb and title and _same_heading(breadcrumb[0], title):
        return breadcrumb[1:]
    return breadcrumb
