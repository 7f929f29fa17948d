"""The ``ragbench`` command line: ``main`` (sweep, datasets, sync) and ``ops`` (report, compare, explain,
promote, production, rollback)."""

from ragbench.cli.main import app

__all__ = ["app"]
