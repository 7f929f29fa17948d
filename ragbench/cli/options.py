"""Options shared by several commands."""

from __future__ import annotations

from enum import Enum


class Format(str, Enum):
    """How a leaderboard is printed on stdout: a table that fits the terminal, markdown, CSV or JSON lines."""

    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"
