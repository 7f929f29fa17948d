"""Shared fixtures. Tests use the real stack: packaged models, Qdrant Edge, DuckDB and MLflow files in tmp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragbench.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo"
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["RAGBENCH_PROGRESS"] = "0"


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
