"""Whether a sweep's MLflow runs still stand, read without importing MLflow (its import alone costs ~1-2 s).

A rerun that would record nothing new is up to date (:mod:`ragbench.sweep.up_to_date`) only while the runs it
points people to are there: the sweep's parent run, active in an active experiment, with an active child per
config. A SQLite tracking store is read with ``sqlite3``
(:func:`~ragbench.results.store_connection.active_mlflow_children`); an MLflow server through its REST API, three
small requests (``runs/get``, ``experiments/get``, ``runs/search`` with ``run_view_type = ACTIVE_ONLY``), with the
credentials MLflow's client would send (:meth:`~ragbench.core.settings.Settings.mlflow_auth_header`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

from ragbench.results.store_connection import active_mlflow_children
from ragbench.results.tracking import CONFIG_TAG, sqlite_store_path

#: seconds each request of the check may take: a slow server makes it "cannot tell", never a long wait
CHECK_TIMEOUT_S = 10.0


def standing_children(tracking_uri: str, parent_run: str, auth: Mapping[str, str] | None = None) -> set[str] | None:
    """The config ids of ``parent_run``'s active children when the parent is an active run of an active experiment;
    the empty set when it is not (deleted in MLflow's UI or API, or purged); None when the store cannot tell (a
    server that does not answer, or refuses the credentials ``auth`` (an ``Authorization`` header) or their absence;
    a backend neither SQLite nor HTTP)."""
    db = sqlite_store_path(tracking_uri)
    if db is not None:
        return active_mlflow_children(db, parent_run, CONFIG_TAG)
    if tracking_uri.lower().startswith(("http://", "https://")):
        try:
            return _children_over_http(tracking_uri.rstrip("/"), parent_run, dict(auth or {}))
        except (OSError, ValueError, KeyError, TypeError):  # no answer, 401/403/5xx, another API: cannot tell
            return None
    return None


def _children_over_http(base: str, parent_run: str, auth: dict[str, str]) -> set[str]:
    try:
        run = _call(base, auth, "runs/get", {"run_id": parent_run})["run"]["info"]
    except urllib.error.HTTPError as e:
        if e.code == 404:  # purged (``mlflow gc``) or never there
            return set()
        raise
    experiment = _call(base, auth, "experiments/get", {"experiment_id": run["experiment_id"]})["experiment"]
    if run["lifecycle_stage"] != "active" or experiment["lifecycle_stage"] != "active":
        return set()
    found, token = set(), None
    while True:
        page = _call(base, auth, "runs/search", None, {
            "experiment_ids": [run["experiment_id"]], "filter": f"tags.mlflow.parentRunId = '{parent_run}'",
            "run_view_type": "ACTIVE_ONLY", "max_results": 1000, **({"page_token": token} if token else {})})
        for child in page.get("runs", []):
            found |= {t["value"] for t in child["data"].get("tags", []) if t["key"] == CONFIG_TAG}
        token = page.get("next_page_token")
        if not token:
            return found


def _call(base: str, auth: dict[str, str], endpoint: str, query: dict | None, body: dict | None = None) -> dict:
    """One MLflow REST call (``GET`` with ``query``, else ``POST`` of ``body`` as JSON) with the headers ``auth``,
    its JSON answer."""
    url = f"{base}/api/2.0/mlflow/{endpoint}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **auth})
    with urllib.request.urlopen(request, timeout=CHECK_TIMEOUT_S) as answer:
        return json.loads(answer.read())
