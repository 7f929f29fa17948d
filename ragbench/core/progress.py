"""Progress bars and the pipeline log, on stderr so ``--json`` output on stdout stays clean."""

from __future__ import annotations

import contextlib
import logging
import sys
import time

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ragbench.core.redact import RedactingFilter

console = Console(stderr=True, width=None if sys.stderr.isatty() else 160)
stdout = Console(width=None if sys.stdout.isatty() else 160)
log = logging.getLogger("ragbench")
if not log.handlers:
    log.addHandler(RichHandler(console=console, show_path=False, markup=False, rich_tracebacks=False))
    log.addFilter(RedactingFilter())
    log.setLevel("INFO")
    log.propagate = False

_bars = True  # set by configure() from the settings; bars are drawn only on an interactive terminal anyway


def configure(level: str = "INFO", bars: bool = True) -> None:
    """Set the ragbench log level and whether progress bars may be drawn (from :class:`Settings`)."""
    global _bars
    log.setLevel(level.upper())
    _bars = bars
    quiet_third_party()


#: third-party loggers that talk at INFO or DEBUG about their own plumbing (MLflow's migrations, bm25s' indexing)
NOISY_LOGGERS = ("alembic", "bm25s", "httpx", "mlflow", "numba")


def quiet_third_party() -> None:
    """Keep third-party plumbing off the terminal: their loggers at WARNING (lower levels only raised)."""
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)


def progress_enabled() -> bool:
    return _bars and sys.stderr.isatty()


_active: Progress | None = None  # one live display at a time: nested bars join it as extra rows


@contextlib.contextmanager
def progress(description: str, total: int):
    """Yield ``advance(n)``; draws a bar on an interactive terminal, stays silent otherwise. Bars opened inside
    another bar's block (a stage inside the sweep) are shown as further rows of the same display."""
    global _active
    if not progress_enabled() or total <= 0:
        yield lambda n=1: None
        return
    owner = _active is None
    if owner:
        _active = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           TimeRemainingColumn(), console=console, transient=False)
        _active.start()
    bar = _active
    task = bar.add_task(description, total=total)
    try:
        yield lambda n=1: bar.advance(task, n)
    finally:
        if owner:
            bar.stop()
            _active = None
        else:
            bar.remove_task(task)


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds of wall time)``."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0
