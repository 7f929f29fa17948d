"""MLflow on a real PostgreSQL: a throw-away cluster on a free localhost port (initdb + pg_ctl as a non-root
user), `mlflow server` backed by it, then a sweep (published there, then up to date: a rerun would record
nothing), a promotion and a rollback through it.

Debian's `postgresql` package provides the binaries (`make test` installs it); the test is skipped, saying so,
only where they are absent."""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import DEMO, free_port, mlflow_server, write_config

PG_USER = "ragbench-pg"




def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else (Path(shutil.which("initdb")).parent if shutil.which("initdb")
                                                 else None)


def _as_pg(args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run a PostgreSQL tool as the non-root cluster owner (initdb and pg_ctl refuse to run as root)."""
    if os.geteuid() == 0:
        args = ["runuser", "-u", PG_USER, "--", *args]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture
def postgres():
    bin_dir = _pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries are not installed (apt-get install postgresql; `make test` does)")
    root = Path(tempfile.mkdtemp(prefix="ragbench-pg-"))  # outside pytest's root-only tree: the owner must reach it
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(PG_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", PG_USER], check=True)
        shutil.chown(root, PG_USER, PG_USER)
        os.chmod(root, 0o700)
    data, port = root / "data", free_port()
    init = _as_pg([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"])
    assert init.returncode == 0, init.stderr
    start = _as_pg([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60", "-o",
                    f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start"])
    assert start.returncode == 0, start.stderr + (root / "log").read_text()
    try:
        made = _as_pg([str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow"])
        assert made.returncode == 0, made.stderr
        yield f"postgresql://postgres@127.0.0.1:{port}/mlflow"
    finally:
        _as_pg([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def mlflow_on_postgres(postgres, tmp_path):
    with mlflow_server(postgres, tmp_path / "artifacts") as url:
        yield url


def test_sweep_promote_and_rollback_against_mlflow_on_postgresql(mlflow_on_postgres, home, settings, tmp_path,
                                                                  monkeypatch):
    from mlflow.tracking import MlflowClient
    from typer.testing import CliRunner

    from ragbench.cli import app
    from ragbench.config import load_config
    from ragbench.sweep import publish_sweep, run_sweep, up_to_date

    cfg = load_config(write_config(tmp_path / "pg.yaml", f"""name: on-postgres
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 10]}}
"""))
    on_postgres = settings.replace(mlflow_tracking_uri=mlflow_on_postgres)
    result = run_sweep(cfg, on_postgres)
    assert result.n_failed == 0
    client = MlflowClient(tracking_uri=mlflow_on_postgres)
    exp = client.get_experiment_by_name("ragbench/on-postgres")
    runs = client.search_runs([exp.experiment_id])
    assert sorted(r.data.tags.get("ragbench.kind") for r in runs) == ["config", "config", "sweep"]
    parent = next(r.info.run_id for r in runs if r.data.tags.get("ragbench.kind") == "sweep")
    assert publish_sweep(result.sweep_id, on_postgres, mlflow=True).mlflow_run_id == parent
    standing = up_to_date(cfg, on_postgres)                  # a rerun would record nothing: summarized there
    assert standing is not None and (standing.sweep_id, standing.mlflow_run_id) == (result.sweep_id, parent)
    assert up_to_date(cfg, settings.replace(mlflow_tracking_uri=None)) is None  # not in the home's own store
    child = next(r.info.run_id for r in runs if r.data.tags.get("ragbench.kind") == "config")
    for deleted in (parent, child):          # deleted in the UI: asked over the server's REST API, logged anew
        client.delete_run(deleted)
        assert up_to_date(cfg, on_postgres) is None
        client.restore_run(deleted)
        assert up_to_date(cfg, on_postgres).sweep_id == result.sweep_id

    best = max(result.outcomes, key=lambda o: o.metrics["ndcg@10"])
    other = next(o for o in result.outcomes if o.config_id != best.config_id)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_on_postgres)  # the CLI reads its settings at the edge
    cli = CliRunner()
    res = cli.invoke(app, ["promote", "latest", best.config_id, "--home", str(home)])
    assert res.exit_code == 0, res.output
    res = cli.invoke(app, ["promote", "latest", other.config_id, "--force", "--reason", "cheaper", "--home",
                           str(home)])
    assert res.exit_code == 0, res.output
    versions = client.search_model_versions("name='ragbench-retriever'")
    assert len(versions) == 2
    assert client.get_model_version_by_alias("ragbench-retriever", "production").version == \
        max(v.version for v in versions)
    res = cli.invoke(app, ["rollback", "--home", str(home)])
    assert res.exit_code == 0, res.output
    assert client.get_model_version_by_alias("ragbench-retriever", "production").version == \
        min(v.version for v in versions)
    live = json.loads(cli.invoke(app, ["production", "--json", "--home", str(home)]).stdout.strip().splitlines()[-1])
    assert live["config_id"] == best.config_id
    assert up_to_date(cfg, on_postgres) is None             # promoted since: "against production" reads anew
