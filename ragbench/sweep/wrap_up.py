"""What follows a sweep's last stage, measured so that a budget keeps its seconds: **closing** the sweep (the
k sweep, DuckDB's final write, the MLflow child runs of reused configs) and **publishing** it (the report, its plots
and statistics, the summary on the MLflow parent run). Each part times itself where it runs and keeps its seconds per
config of the sweep in ``<home>/calibration/wrap-up-<machine>.json`` (the last measurement of each part wins);
:func:`wrap_up_seconds` prices the next sweep's with them (:mod:`ragbench.sweep.budget` keeps that much of the
budget). A budget that ignored them let the demo's 40-second budget end its command at 67-74 s.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragbench.core.atomic import write_text_atomically
from ragbench.sweep.calibrate import machine_name

#: the parts, in the order they run after the last stage
CLOSE, PUBLISH = "close", "publish"
#: seconds per config before this home measured a part (the demo in a fresh home under the Prefect flow: 20
#: configs, 34 queries, MLflow on, 2 cores, 2026-12-04: closing 2.0 s, publishing 7.5 s)
DEFAULT_SECONDS_PER_CONFIG = {CLOSE: 0.1, PUBLISH: 0.375}


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
    """Keep ``seconds`` spent on ``part`` (:data:`CLOSE`, :data:`PUBLISH`) of a sweep of ``configs`` configs
    (atomically: a reader sees the old file or the new). Never raises: a measurement informs, it never fails
    a sweep."""
    if configs <= 0 or not seconds >= 0:
        return
    try:
        data = read_measured(wrap_up_path(home))
        data[part] = {"configs": configs, "seconds": round(seconds, 3)}
        write_text_atomically(wrap_up_path(home), json.dumps(data, indent=1))
    except OSError:
        pass


def wrap_up_seconds(home: Path, configs: int, parts: tuple[str, ...] = (CLOSE, PUBLISH)) -> float:
    """Seconds the ``parts`` of a sweep of ``configs`` configs are expected to take after its last stage:
    ``sum over parts of configs x (seconds / configs of the part's last measurement in this home)``, a part never
    measured here priced at :data:`DEFAULT_SECONDS_PER_CONFIG`."""
    measured = read_measured(wrap_up_path(home))
    return sum(configs * rate_per_config(measured.get(part), DEFAULT_SECONDS_PER_CONFIG[part]) for part in parts)


def rate_per_config(last, default: float | None) -> float | None:
    """``seconds / configs`` of a kept measurement (``{"configs": n, "seconds": s, ...}``), ``default`` when it is
    missing, malformed or not a finite non-negative rate."""
    try:
        rate = float(last["seconds"]) / int(last["configs"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return default
    return rate if 0 <= rate < float("inf") else default
