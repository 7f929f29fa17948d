"""Markdown heading structure: ATX headings outside code fences, and the breadcrumb in force at an offset. Used by
the markdown chunker, the ``breadcrumb`` prefix of every chunker, and small-to-big parents."""

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
