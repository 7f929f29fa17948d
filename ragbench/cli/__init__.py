"""The ``ragbench`` command line: ``main`` (sweep, datasets, sync) and ``ops`` (report, compare, explain,
promote, production, rollback)."""

from ragbench.cli.announce import ANNOUNCED  # noqa: F401  (announces at import, before main is imported)
from ragbench.core.exit import skip_final_collection_at_exit

skip_final_collection_at_exit()  # a command's process exits without the last full GC scan

from ragbench.cli.main import app  # noqa: E402

__all__ = ["app"]
