"""Commands that act on finished sweeps (report, explain, promote, production, rollback), registered on the CLI."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the sweep-inspection and promotion commands to ``app``."""
