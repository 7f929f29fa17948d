"""``python -m ragbench.cli``: the ``ragbench`` command."""

from ragbench.cli import app

app()
