"""Options and helpers shared by several commands."""

from __future__ import annotations

from enum import Enum
from pathlib import Path

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


def home_store(home: Path | None):
    """The results store of the home (``--home``, else the settings' ``$RAGBENCH_HOME``), and the settings; a
    one-line error when the home holds no results yet."""
    from ragbench.core.errors import RagbenchError
    from ragbench.core.settings import Settings
    from ragbench.results.store import ResultStore

    settings = Settings.from_env(home=home).apply()
    h = Path(settings.home)
    if not (h / "results.duckdb").is_file():
        raise RagbenchError(f"no results at {h / 'results.duckdb'}; run `ragbench sweep CONFIG` first or pass "
                            "--home")
    return ResultStore(h / "results.duckdb"), settings
