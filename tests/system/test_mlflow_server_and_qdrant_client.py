"""The scale-out path against servers started here as processes: a real `mlflow server` (HTTP tracking) and
Qdrant through qdrant-client (its local mode: no Qdrant server binary can run on this machine)."""

from __future__ import annotations

import pytest
from conftest import DEMO, mlflow_server, write_config

from ragbench.config import load_config
from ragbench.sweep import run_sweep


@pytest.fixture
def mlflow_server_url(tmp_path):
    with mlflow_server(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts", timeout=180) as url:
        yield url


def test_sweep_against_an_mlflow_server_and_qdrant_client(home, settings, tmp_path, monkeypatch, mlflow_server_url):
    settings = settings.replace(mlflow_tracking_uri=mlflow_server_url, qdrant_url=":memory:")
    cfg = write_config(tmp_path / "s.yaml", f"""name: server-path
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 10]}}
""")
    result = run_sweep(load_config(cfg), settings)
    assert result.n_failed == 0
    assert not (home / "mlflow.db").exists() and not (home / "qdrant-edge").exists()  # nothing embedded was used
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server_url)
    exp = client.get_experiment_by_name("ragbench/server-path")
    runs = client.search_runs([exp.experiment_id], filter_string="tags.`ragbench.kind` = 'config'")
    assert len(runs) == 2 and all("ndcg_at_10" in r.data.metrics for r in runs)
    assert {a.path for a in client.list_artifacts(runs[0].info.run_id)} >= {"per_query.parquet"}
    dense = next(o for o in result.outcomes if o.spec["retriever"]["kind"] == "dense")
    assert 0 < dense.metrics["ndcg@10"] <= 1
