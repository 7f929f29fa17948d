"""The first line of ``ragbench sweep``, written before anything heavy is imported."""

import sys


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
