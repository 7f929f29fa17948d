"""The scale-out path against servers started here as processes: a real `mlflow server` (HTTP tracking, also behind
MLflow's basic authentication) and Qdrant through qdrant-client (its local mode: no Qdrant server binary can run on
this machine)."""

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


ADMIN_PASSWORD = "night-shift-2026"


@pytest.fixture
def mlflow_basic_auth_url(tmp_path):
    """A real ``mlflow server --app-name basic-auth``: every API call needs a user's credentials (admin's here)."""
    ini = tmp_path / "basic_auth.ini"
    ini.write_text(f"""[mlflow]
default_permission = READ
database_uri = sqlite:///{tmp_path / 'users.db'}
admin_username = admin
admin_password = {ADMIN_PASSWORD}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
""")
    with mlflow_server(f"sqlite:///{tmp_path / 'server.db'}", tmp_path / "artifacts", timeout=180,
                       app=["--app-name", "basic-auth"],
                       env={"MLFLOW_AUTH_CONFIG_PATH": str(ini), "MLFLOW_FLASK_SERVER_SECRET_KEY": "test-only"}) as url:
        yield url


def test_up_to_date_asks_an_mlflow_server_behind_basic_auth_with_mlflows_credentials(
        settings, tmp_path, monkeypatch, mlflow_basic_auth_url):
    """The up-to-date check reads the runs with the credentials MLflow's client uses (MLFLOW_TRACKING_USERNAME and
    _PASSWORD), so a parent run deleted on a server behind authentication makes the rerun record again; without
    them, or with a wrong password, the server cannot be asked and the publication stamp vouches, as before."""
    from mlflow.tracking import MlflowClient

    from ragbench.sweep import publish_sweep, up_to_date

    url = mlflow_basic_auth_url
    creds = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": ADMIN_PASSWORD}
    for k, v in creds.items():  # MLflow's own client reads them from the process environment
        monkeypatch.setenv(k, v)
    signed_in = settings.replace(mlflow_tracking_uri=url, environ=creds)
    cfg = load_config(write_config(tmp_path / "auth.yaml", f"""name: behind-auth
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [1, 10]}}
"""))
    result = run_sweep(cfg, signed_in)
    parent = publish_sweep(result.sweep_id, signed_in, mlflow=True).mlflow_run_id
    assert parent is not None and up_to_date(cfg, signed_in).mlflow_run_id == parent

    client = MlflowClient(tracking_uri=url)
    client.delete_run(parent)
    assert up_to_date(cfg, signed_in) is None  # asked with the credentials: the run is gone, record again
    wrong = settings.replace(mlflow_tracking_uri=url, environ={**creds, "MLFLOW_TRACKING_PASSWORD": "wrong"})
    for cannot_ask in (settings.replace(mlflow_tracking_uri=url, environ={}), wrong):
        assert up_to_date(cfg, cannot_ask).sweep_id == result.sweep_id  # refused: the stamp vouches
    client.restore_run(parent)
    assert up_to_date(cfg, signed_in).sweep_id == result.sweep_id
