"""What follows a sweep's last stage, measured so that a budget keeps its seconds: **closing** the sweep (the
k sweep, DuckDB's final write, the MLflow child runs of reused configs) and **publishing** it (the report, its plots
and statistics, the summary on the MLflow parent run). Each part times itself where it runs and keeps its seconds and
the sweep's configs with results in ``<home>/calibration/wrap-up-<machine>.json`` (its last :data:`KEPT`
measurements); :func:`part_cost` fits them as fixed seconds plus seconds per config, and :func:`wrap_up_of` prices
the next sweep's with them (:mod:`ragbench.sweep.budget` keeps that much of the budget). A budget that ignored them
let the demo's 40-second budget end its command at 67-74 s.

A config *with results* is one the sweep ends with results for: evaluated in it, reused from another sweep or done
before a resume. Configs the budget did not start cost the wrap-up next to nothing (a row of the report), so the
budget keeps the seconds of the configs that will have results (:class:`WrapUp`), not of the whole grid: priced per
config of the grid, a 25-second budget on the demo started nothing, its BM25 configs included, and ended at 17 s.
The fixed part (imports, the report's page, the MLflow summary) comes with the first config with results: priced
per config alone, the same budget ran 5 configs and ended 3 s past it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ragbench.core.atomic import write_text_atomically
from ragbench.sweep.calibrate import machine_name

#: the parts, in the order they run after the last stage
CLOSE, PUBLISH = "close", "publish"
#: a part's price before this home measured it, ``(fixed seconds, seconds per config with results)``: the demo
#: under the Prefect flow (20 configs, 34 queries, MLflow on, 2 cores, 2026-12-04) closed in 2.0 s and published in
#: 7.5 s; with the local runner (2026-12-05) closing took 1.0 s for 5 and for 20 configs, publishing 1.8 s for 5 and
#: 5.3 s for 20 (0.7 s + 0.23 s a config)
DEFAULT_COST = {CLOSE: (1.0, 0.05), PUBLISH: (1.0, 0.33)}
#: measurements kept per part: enough sweeps of different sizes to tell a part's fixed seconds from its per-config
KEPT = 8


@dataclass(frozen=True)
class WrapUp:
    """What follows a sweep's last stage, priced: ``fixed`` seconds once any config has results, and ``per_config``
    seconds per config with results, of which ``stored`` (reused or done before) are the sweep's before any stage
    runs. With no config with results there is no report to write: nothing."""

    per_config: float = 0.0
    fixed: float = 0.0
    stored: int = 0

    def seconds(self, started: int) -> float:
        """``fixed + per_config x (stored + started)`` once ``started`` configs have run; 0 when no config has
        results."""
        n = self.stored + started
        return self.fixed + self.per_config * n if n > 0 else 0.0


def wrap_up_of(home: Path, stored: int, parts: tuple[str, ...] = (CLOSE, PUBLISH)) -> WrapUp:
    """The :class:`WrapUp` of a sweep in ``home`` with ``stored`` configs already with results: the ``parts``'
    prices as this home measured them (:func:`part_cost`)."""
    measured = read_measured(wrap_up_path(home))
    costs = [part_cost(measured.get(part), DEFAULT_COST[part]) for part in parts]
    return WrapUp(sum(per for _, per in costs), sum(fixed for fixed, _ in costs), stored)


def wrap_up_path(home: Path) -> Path:
    """``<home>/calibration/wrap-up-<machine>.json``: one file per machine, as the encoders' rates."""
    return Path(home) / "calibration" / f"wrap-up-{machine_name()}.json"


def read_measured(path: Path) -> dict:
    """The measurements a sweep kept in ``path`` (JSON), or ``{}`` when there are none yet or the file is damaged
    (the defaults then price what it would have)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def remember_wrap_up(home: Path, part: str, configs: int, seconds: float) -> None:
    """Keep ``seconds`` spent on ``part`` (:data:`CLOSE`, :data:`PUBLISH`) of a sweep ending with ``configs``
    configs with results, with the part's last :data:`KEPT` measurements (atomically: a reader sees the old file or
    the new). Never raises: a measurement informs, it never fails a sweep."""
    if configs <= 0 or not 0 <= seconds < float("inf"):
        return
    try:
        data = read_measured(wrap_up_path(home))
        kept = _points(data.get(part))[-(KEPT - 1):] + [(configs, round(seconds, 3))]
        data[part] = {"configs": configs, "seconds": round(seconds, 3), "history": kept}
        write_text_atomically(wrap_up_path(home), json.dumps(data, indent=1))
    except OSError:
        pass


def wrap_up_seconds(home: Path, configs: int, parts: tuple[str, ...] = (CLOSE, PUBLISH)) -> float:
    """Seconds the ``parts`` of a sweep ending with ``configs`` configs with results are expected to take after its
    last stage (:func:`wrap_up_of`)."""
    return wrap_up_of(home, 0, parts).seconds(configs)


def part_cost(entry, default: tuple[float, float]) -> tuple[float, float]:
    """``(fixed seconds, seconds per config)`` of a part from its kept measurements ``entry``: with sweeps of two
    sizes or more, the least-squares line through ``(configs, seconds)`` (slope at least 0; a negative intercept
    refitted through the origin); with one size, its mean seconds split as the ``default``'s fixed part (at most all
    of it) and the rest per config; with none (or a damaged entry), ``default``."""
    points = _points(entry)
    if not points:
        return default
    n = [float(c) for c, _ in points]
    s = [float(t) for _, t in points]
    mean_n, mean_s = sum(n) / len(n), sum(s) / len(s)
    spread = sum((x - mean_n) ** 2 for x in n)
    if spread == 0:  # one size: what is fixed in it cannot be told from it
        fixed = min(default[0], mean_s)
        return fixed, (mean_s - fixed) / mean_n
    slope = max(0.0, sum((x - mean_n) * (y - mean_s) for x, y in zip(n, s)) / spread)
    fixed = mean_s - slope * mean_n
    return (fixed, slope) if fixed >= 0 else (0.0, sum(s) / sum(n))


def _points(entry) -> list[tuple[int, float]]:
    """The valid ``(configs, seconds)`` of a part's entry (``history``, else its last ``configs`` and ``seconds``,
    as a file written before the history has it): configs > 0, finite seconds >= 0."""
    if not isinstance(entry, dict):
        return []
    raw = entry.get("history")
    if not isinstance(raw, list):
        raw = [[entry.get("configs"), entry.get("seconds")]]
    points = []
    for item in raw:
        try:
            configs, seconds = int(item[0]), float(item[1])
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        if configs > 0 and 0 <= seconds < float("inf"):
            points.append((configs, seconds))
    return points


def rate_per_config(last, default: float | None) -> float | None:
    """``seconds / configs`` of a kept measurement (``{"configs": n, "seconds": s, ...}``), ``default`` when it is
    missing, malformed or not a finite non-negative rate."""
    try:
        rate = float(last["seconds"]) / int(last["configs"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return default
    return rate if 0 <= rate < float("inf") else default
