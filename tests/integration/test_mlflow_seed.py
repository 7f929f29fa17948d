"""A new home's SQLite MLflow store is copied from the installed MLflow's empty one (made once per MLflow version in
ragbench's tools folder), so the first sweep of a home runs no schema migration; a template MLflow cannot open
is dropped and the store made the old way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import mlflow.store.db.utils as db_utils

from ragbench.core.settings import Settings
from ragbench.results.mlflow_seed import template_path
from ragbench.results.tracking import open_tracker


def _settings(home: Path) -> Settings:
    return Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None,
                                                tools_dir=home.parent / "tools")


def _boom(*a, **k):
    raise AssertionError("MLflow created or migrated the schema of a store copied from the template")


def test_a_new_homes_store_is_copied_and_migrates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    template = template_path(tmp_path / "tools" / "mlflow")
    assert open_tracker(_settings(tmp_path / "first"), "ragbench/first") is not None  # makes the template
    assert template.is_file()

    monkeypatch.setattr(db_utils, "_initialize_tables", _boom)
    monkeypatch.setattr(db_utils, "_upgrade_db", _boom)
    tracker = open_tracker(_settings(tmp_path / "second"), "ragbench/second")
    assert tracker is not None
    run = tracker.client.create_run(tracker.experiment_id, run_name="r")
    tracker.client.log_metric(run.info.run_id, "ndcg_at_10", 0.5)
    assert tracker.client.get_run(run.info.run_id).data.metrics == {"ndcg_at_10": 0.5}
    rows = sqlite3.connect(tmp_path / "second" / "mlflow.db").execute(
        "SELECT name, artifact_location FROM experiments ORDER BY experiment_id").fetchall()
    # MLflow's Default experiment as MLflow makes it in this working folder; ragbench's under the home
    assert rows == [("Default", str(tmp_path / "mlruns" / "0")),
                    ("ragbench/second", (tmp_path / "second" / "mlartifacts").resolve().as_uri())]


def test_a_template_mlflow_cannot_open_is_dropped_and_the_store_made_as_before(tmp_path, monkeypatch):
    template = template_path(tmp_path / "tools" / "mlflow")
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database")
    tracker = open_tracker(_settings(tmp_path / "home"), "ragbench/x")
    assert tracker is not None and tracker.client.get_experiment(tracker.experiment_id).name == "ragbench/x"
    assert not template.exists()


#: what MLflow reads as "in CI or a test" (mlflow.telemetry.utils), where it never starts telemetry anyway
CI_MARKERS = ("PYTEST_CURRENT_TEST", "GITHUB_ACTIONS", "CI", "CIRCLECI", "GITLAB_CI", "JENKINS_URL", "TRAVIS",
              "TF_BUILD", "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "BUILDKITE", "TEAMCITY_VERSION",
              "CLOUD_RUN_EXECUTION", "RUNBOT_HOST_URL", "RUNBOT_BUILD_NAME", "RUNBOT_WORKER_ID")


def test_a_ragbench_process_starts_no_mlflow_telemetry_unless_the_user_asks(tmp_path):
    """Outside CI, importing MLflow 3 starts a telemetry client that calls mlflow.org; after Settings.apply (every
    ragbench command and run_sweep) it starts none, and MLFLOW_DISABLE_TELEMETRY=false (the user's choice) stands.
    Run in a fresh process without CI markers, as a user's shell would be."""
    import os
    import subprocess
    import sys

    code = ("import sys; from ragbench.core.settings import Settings; Settings.from_env(home=sys.argv[1]).apply(); "
            "import mlflow.telemetry; print(mlflow.telemetry.get_telemetry_client() is None)")
    env = {k: v for k, v in os.environ.items() if k not in CI_MARKERS and k != "MLFLOW_DISABLE_TELEMETRY"}
    for choice, none in ((None, "True"), ("false", "False")):
        run_env = env if choice is None else {**env, "MLFLOW_DISABLE_TELEMETRY": choice}
        out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "home")], env=run_env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == none, (choice, out.stdout, out.stderr[-2000:])
