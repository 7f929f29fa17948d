"""The one settings object: what it reads from the environment for requests ragbench makes itself."""

from __future__ import annotations

import base64

from ragbench.core.settings import Settings


def test_the_mlflow_credentials_are_sent_as_mlflows_client_sends_them():
    """Basic auth when a user and a password are both set (before a token, as MLflow's client decides), else the
    token as a bearer, else nothing."""
    both = {"MLFLOW_TRACKING_USERNAME": "ana", "MLFLOW_TRACKING_PASSWORD": "p:ss wörd", "MLFLOW_TRACKING_TOKEN": "t0k"}
    scheme, value = Settings.from_env(both).mlflow_auth_header()["Authorization"].split(" ")
    assert scheme == "Basic" and base64.b64decode(value).decode() == "ana:p:ss wörd"
    assert Settings.from_env({"MLFLOW_TRACKING_USERNAME": "ana", "MLFLOW_TRACKING_TOKEN": "t0k"}) \
        .mlflow_auth_header() == {"Authorization": "Bearer t0k"}
    assert Settings.from_env({"MLFLOW_TRACKING_USERNAME": "ana"}).mlflow_auth_header() == {}
    assert Settings.from_env({}).mlflow_auth_header() == {}
