"""Prefect settings that must be in place before ``import prefect``.

On a loaded 2-core machine the ephemeral server's first start (database migrations) takes longer than Prefect's
default 20 s timeout, and telemetry fails without a network, so both are set here unless the user set them.
"""

from __future__ import annotations

import os
from pathlib import Path


def configure_prefect() -> None:
    home = Path(os.environ.get("RAGBENCH_HOME", ".ragbench")).resolve()
    os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    # Prefect creates its home without parents, and its server then fails to open its database: make the path
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_UI_ENABLED", "false")
