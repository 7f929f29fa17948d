"""The first line of ``ragbench sweep``, written before anything heavy is imported, and when the command
started."""

import sys
import time

_PROCESS_STARTED = time.time()  # before anything heavy is imported: the entry point imports this module first
_sweeps_begun = [0]


def sweep_started() -> float:
    """When the sweep command now beginning started (wall clock, :func:`time.time`; a ``--budget`` counts from it,
    as the person who set it waits): the process's start when the process was started as ``ragbench sweep``
    (:data:`ANNOUNCED`) and this is its first sweep, else now (tests and notebooks call the command in a process
    started long before). Call it once, as the command begins."""
    _sweeps_begun[0] += 1
    return _PROCESS_STARTED if ANNOUNCED and _sweeps_begun[0] == 1 else time.time()


def _announce_sweep(argv: list[str]) -> bool:
    """``ragbench sweep CONFIG`` says so before anything heavy is imported (typer and rich alone take 0.4-0.5 s on
    a busy 2-core machine; the first line must appear within a second). True when it printed."""
    args = argv[1:]
    if len(args) < 2 or args[0] != "sweep" or args[1].startswith("-") or "--help" in args:
        return False
    sys.stderr.write(f"starting sweep {args[1]} …\n")
    sys.stderr.flush()
    return True


#: whether the command line already announced the sweep (``main.sweep`` then does not repeat it)
ANNOUNCED = _announce_sweep(sys.argv)
