"""A command's process exits without CPython's last full garbage collection.

At exit CPython runs every ``atexit`` handler and then collects garbage over every object still alive before it
clears the modules; with MLflow, SQLAlchemy, pandas and pyarrow imported that scan alone took 0.9-1.1 s of a warm
``ragbench sweep`` (8 s in all) on 2 cores, 1.5 s with torch and sentence-transformers (measured 2026-12-02).
:func:`skip_final_collection_at_exit` freezes the heap (:func:`gc.freeze`) in an ``atexit`` handler registered as
the command line is imported (handlers run last registered, first run: every later one runs before it), so that
scan finds nothing to do. What ragbench stores is already durable before then (every store is written and closed
explicitly and survives a ``kill -9``); only the finalizers of objects caught in reference cycles are not run,
which for a process that ends has no effect beyond the time. ``atexit`` handlers (the llama-server's stop,
``weakref.finalize`` callbacks such as temporary folders) all still run.
"""

from __future__ import annotations

import atexit
import gc
from functools import cache


@cache  # once per process
def skip_final_collection_at_exit() -> None:
    """Register :func:`gc.freeze` to run at exit after every ``atexit`` handler registered later (handlers run last
    registered, first run). For a command line's entry point, not for a library call: the heap is frozen only once
    the interpreter is ending."""
    atexit.register(gc.freeze)
