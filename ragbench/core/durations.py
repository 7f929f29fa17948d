"""Durations as people write them in a sweep file or on the command line: ``8h``, ``90m``, ``120s``, ``1h30m``."""

from __future__ import annotations

import math
import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*[hms]\s*)+$")


def parse_duration(text: str | float | int) -> float:
    """Seconds of a duration: ``8h``, ``90m``, ``120s``, ``1h30m`` (the parts summed), or a number of seconds.

    Raises ``ValueError`` naming the text for anything else, and for no time at all (``0s``, ``0``, ``-5``: a
    budget of nothing would spend the sweep's start-up and run no config)."""
    hint = "write e.g. 8h, 90m, 120s or 1h30m"
    if isinstance(text, (int, float)):
        seconds = float(text)
    elif _DURATION.match(str(text)):
        seconds = sum(float(n) * _UNITS[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)\s*([hms])", str(text)))
    else:
        raise ValueError(f"{str(text)!r} is not a duration; {hint}")
    if not 0 < seconds < math.inf:
        raise ValueError(f"{str(text)!r} is not a duration of more than 0 s; {hint}")
    return seconds
