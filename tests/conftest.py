"""Shared fixtures. Tests use the real stack: packaged models, Qdrant Edge, DuckDB and MLflow files in tmp dirs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "datasets" / "demo"
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["RAGBENCH_PROGRESS"] = "0"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh ragbench home (caches, DuckDB, Qdrant Edge, MLflow) for one test."""
    h = tmp_path / "home"
    monkeypatch.setenv("RAGBENCH_HOME", str(h))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("RAGBENCH_QDRANT_URL", raising=False)
    return h


def requires_scifact():
    return pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason=f"SciFact not found at {SCIFACT}")


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
