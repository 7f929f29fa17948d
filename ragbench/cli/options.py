"""Options and helpers shared by several commands."""

from __future__ import annotations

from enum import Enum

import typer


class Format(str, Enum):
    """How a leaderboard is printed on stdout: a table that fits the terminal, markdown, CSV or JSON lines."""

    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


def fail(e: Exception, code: int = 2) -> None:
    """Print ``error: <message>`` (secrets masked, markup escaped) on one line and exit with ``code``."""
    from rich.markup import escape

    from ragbench.core.progress import console
    from ragbench.core.redact import redact

    console.print(f"[red]error:[/red] {escape(redact(str(e)))}", soft_wrap=True, markup=True, highlight=False)
    raise typer.Exit(code)
