"""``python -m ragbench``: the ``ragbench`` command."""

from ragbench.cli import app

app()
