"""Shared fixtures. Tests use the real stack: packaged models, Qdrant Edge, DuckDB and MLflow files in tmp dirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragbench.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo"
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["RAGBENCH_PROGRESS"] = "0"


@pytest.fixture(autouse=True)
def _isolated_mlflow_uris():
    """An in-process promote points MLflow's fluent API (and MLFLOW_TRACKING_URI) at its store: put both back, so
    that no test reads another test's MLflow store or server."""
    saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}
    yield
    if "mlflow" in sys.modules:
        import mlflow

        mlflow.set_tracking_uri(None)
        mlflow.set_registry_uri(None)
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def home(tmp_path) -> Path:
    """A fresh ragbench home (caches, DuckDB, Qdrant Edge, MLflow) for one test."""
    return tmp_path / "home"


@pytest.fixture
def settings(home) -> Settings:
    """Settings of that home with the embedded engines (no Qdrant or MLflow server, whatever the environment)."""
    return Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)


def requires_scifact():
    return pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason=f"SciFact not found at {SCIFACT}")


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The process environment without Prefect, ragbench or MLflow server settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "RAGBENCH_", "MLFLOW_TRACKING_URI"))}
    env.update(HF_HUB_OFFLINE="1", RAGBENCH_PROGRESS="0", **extra)
    return env


@dataclass(frozen=True)
class DemoSweep:
    """configs/demo.yaml swept once through the CLI, as a user would: ``root`` is the working folder, ``home`` its
    ``.ragbench``; ``rows`` the ``--json`` lines; ``stderr`` what the sweep printed there."""

    root: Path
    home: Path
    rows: list[dict]
    stderr: str

    @property
    def sweep_id(self) -> str:
        return self.rows[0]["sweep_id"]


@pytest.fixture(scope="session")
def demo_sweep(tmp_path_factory) -> DemoSweep:
    """The bundled demo sweep (20 configs) run once per test session with the plain-Python orchestrator and MLflow
    on, in ``<tmp>/.ragbench`` (so the README's relative paths hold with ``cwd=root``). About 2 minutes."""
    root = tmp_path_factory.mktemp("demo-sweep")
    home = root / ".ragbench"
    proc = subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(ROOT / "configs" / "demo.yaml"),
                           "--orchestrator", "local", "--home", str(home), "--json"], cwd=ROOT, env=clean_env(),
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 20, proc.stdout[-2000:]
    return DemoSweep(root, home, rows, proc.stderr)
