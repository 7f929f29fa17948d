"""Prefect settings that must be in place before ``import prefect``.

On a loaded 2-core machine the ephemeral server's first start (database migrations) takes longer than Prefect's
default 20 s timeout, and telemetry fails without a network, so both are set here unless the user set them. The
Prefect home goes under the ragbench home (from :class:`ragbench.core.settings.Settings`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ragbench.core.settings import Settings


def configure_prefect(settings: Settings | None = None) -> None:
    home = Path((settings or Settings.from_env()).home).resolve()
    os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    # Prefect creates its home without parents, and its server then fails to open its database: make the path
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_UI_ENABLED", "false")
