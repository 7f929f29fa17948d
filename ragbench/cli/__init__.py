"""The ``ragbench`` command line: ``main`` (sweep, datasets, sync) and ``ops`` (report, compare, explain,
promote, production, rollback)."""

from ragbench.cli.announce import ANNOUNCED  # noqa: F401  (announces at import, before main is imported)
from ragbench.cli.main import app

__all__ = ["app"]
