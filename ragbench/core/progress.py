"""Progress bars and the pipeline log, on stderr so ``--json`` output on stdout stays clean.

On an interactive terminal a stage draws a bar; otherwise (output to a file or a pipe, a Prefect worker) a stage
that is still running after :data:`interval` seconds logs ``progress: <stage>: done/total (percent), rate/s, ETA``
every ``interval`` seconds (``RAGBENCH_PROGRESS_INTERVAL``, default 30) through the ragbench log, so the lines also
reach Prefect's task logs."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace

from rich.console import Console, ConsoleDimensions
from rich.logging import RichHandler
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ragbench.core.redact import RedactingFilter

#: width of a console whose stream is not a terminal (a file, a pipe) when ``COLUMNS`` is not set
FILE_WIDTH = 160


class _Console(Console):
    """A console that, when its stream is not a terminal, is ``$COLUMNS`` wide (read at each print, so
    ``COLUMNS=100 ragbench report > file`` is honoured) or :data:`FILE_WIDTH`; on a terminal, the terminal's."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._width = None  # rich fixes $COLUMNS at creation: read it at each print instead

    @property
    def size(self) -> ConsoleDimensions:
        if self.is_terminal or self._width is not None:
            return Console.size.fget(self)
        cols = self._environ.get("COLUMNS") or ""  # rich's view of the environment (the process's, live)
        return ConsoleDimensions(int(cols) if cols.isdigit() and int(cols) > 0 else FILE_WIDTH, self._height or 25)

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)


console = _Console(stderr=True)
stdout = _Console()
log = logging.getLogger("ragbench")
if not log.handlers:
    log.addHandler(RichHandler(console=console, show_path=False, markup=False, rich_tracebacks=False))
    log.addFilter(RedactingFilter())
    log.setLevel("INFO")
    log.propagate = False

_bars = True  # set by configure() from the settings; bars are drawn only on an interactive terminal anyway
#: seconds between two progress lines of a stage when output is not a terminal (set by configure())
interval = 30.0


def configure(level: str = "INFO", bars: bool = True, every: float | None = None) -> None:
    """Set the ragbench log level, whether progress may be shown (bars on a terminal, log lines elsewhere) and
    the seconds between two progress lines (``every``; from :class:`Settings`)."""
    global _bars, interval
    log.setLevel(level.upper())
    _bars = bars
    if every is not None:
        interval = max(float(every), 0.05)
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


#: seconds left as the caller prices them (None: not known yet), for a stage whose items cost unlike amounts
Eta = Callable[[], "float | None"]


def progress_line(description: str, done: int, total: int, seconds: float, eta: Eta | None = None) -> str:
    """``progress: <description>: 40/100 (40 %), 2.5/s, ETA 24 s``: done of total, the mean rate since the
    stage began (items per second) and the time left: ``eta()`` when given (``ETA ?`` while it is None), else
    the items left at the mean rate (``ETA ?`` before the first item)."""
    rate = done / seconds if seconds > 0 else 0.0
    left = eta() if eta is not None else (total - done) / rate if rate > 0 else None
    return (f"progress: {description}: {done}/{total} ({100 * done / total:.0f} %), {rate:.3g}/s, "
            f"ETA {'?' if left is None else _duration(left)}, {_duration(seconds)} elapsed")


def rough_duration(seconds: float) -> str:
    """An estimate's duration as the plan prints it: whole seconds under 90 s, tenths of minutes under 90 min, tenths
    of hours beyond."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    return f"{s // 60} min {s % 60:02d} s" if s < 3600 else f"{s // 3600} h {s % 3600 // 60:02d} min"


class _Ticker:
    """Counts a stage's items and, from a thread, logs :func:`progress_line` every :data:`interval` seconds until
    the stage ends (a stage shorter than that logs nothing). The thread runs in a copy of the caller's context,
    so a Prefect task's log handler knows which task run the lines belong to."""

    def __init__(self, description: str, total: int, eta: Eta | None = None):
        self.description, self.total, self.done, self.eta = description, total, 0, eta
        self.start = time.monotonic()
        self._stop = threading.Event()
        ctx = contextvars.copy_context()
        self._thread = threading.Thread(target=ctx.run, args=(self._loop,), daemon=True,
                                        name=f"progress {description}")
        self._thread.start()

    def advance(self, n: int = 1) -> None:
        self.done += n

    def _loop(self) -> None:
        while not self._stop.wait(interval):
            log.info(progress_line(self.description, min(self.done, self.total), self.total,
                                   time.monotonic() - self.start, self.eta))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _TimeLeftColumn(TimeRemainingColumn):
    """rich's time-remaining column, from the task's ``eta`` field when it has one (see :func:`progress`)."""

    def render(self, task) -> Text:
        eta = task.fields.get("eta")
        if eta is None:
            return super().render(task)
        # the parent formats what it is given: the caller's seconds left in place of rich's rate-based guess
        return super().render(SimpleNamespace(total=task.total, time_remaining=eta(), finished=False))


_active: Progress | None = None  # one live display at a time: nested bars join it as extra rows


@contextlib.contextmanager
def progress(description: str, total: int, eta: Eta | None = None):
    """Yield ``advance(n)``; draws a bar on an interactive terminal, else logs a progress line every
    :data:`interval` seconds while the stage runs (:class:`_Ticker`). Bars opened inside another bar's block (a
    stage inside the sweep) are shown as further rows of the same display. ``eta``: the seconds left as the
    caller prices them, for items of unlike cost (a sweep's configs: BM25 first, then those that wait for an
    embedding), where the mean rate so far says little; without it, the items left at the mean rate."""
    global _active
    if not _bars or total <= 0:
        yield lambda n=1: None
        return
    if not progress_enabled():
        ticker = _Ticker(description, total, eta)
        try:
            yield ticker.advance
        finally:
            ticker.close()
        return
    owner = _active is None
    if owner:
        _active = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           _TimeLeftColumn(), console=console, transient=False)
        _active.start()
    bar = _active
    task = bar.add_task(description, total=total, eta=eta)
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
