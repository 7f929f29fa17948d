"""Shared fixtures. Tests use the real stack: packaged models, Qdrant Edge, DuckDB and MLflow files in tmp dirs."""

from __future__ import annotations

import contextlib
import csv
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from ragbench.core.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
DEMO = ROOT / "datasets" / "demo"
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["RAGBENCH_PROGRESS"] = "0"


#: the MLflow URIs of the environment the tests started in (a module-scoped fixture's promote runs before any
#: function fixture could save them, so they are taken here, once)
_MLFLOW_ENV = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI")}


#: the test tiers, each a folder of tests/ and a marker; `fast` marks the integration tests of `make test-fast`
TIERS = ("unit", "integration", "system")
TIER_PLAN = TESTS / "TIERS.tsv"


@dataclass(frozen=True)
class Tier:
    """Where a test file belongs: ``name`` one of TIERS, ``fast`` whether it runs in `make test-fast`."""

    name: str
    fast: bool


def read_tier_plan(path: Path = TIER_PLAN) -> dict[str, Tier]:
    """tests/TIERS.tsv (columns old_path, new_path, tier, seconds, reason, fast; paths from the repository root) as
    {path: Tier}, under both the old and the new path, so a file is marked alike before and after
    scripts/move_tests.py moves it. A missing plan is an empty one."""
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    plan = {}
    for row in rows:
        tier = Tier(row["tier"], row["fast"] == "yes")
        plan[row["old_path"]] = plan[row["new_path"]] = tier
    return plan


def tier_of(path: str, plan: dict[str, Tier]) -> Tier | None:
    """The tier of the test file at ``path`` (from the repository root): its folder decides (tests/unit/... is
    unit), else the plan; ``fast`` only from the plan. None for a top-level file the plan does not list."""
    planned = plan.get(path)
    parts = path.split("/")
    if len(parts) > 2 and parts[1] in TIERS:
        return Tier(parts[1], planned is not None and planned.fast)
    return planned


_UNTIERED = pytest.StashKey[list]()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(config, items):
    """Marks every test with its tier (and ``fast``), so `-m "unit or fast"` selects the fast lane in either layout;
    files without a tier are named in the summary."""
    plan = read_tier_plan()
    untiered = set()
    for item in items:
        if not item.path.resolve().is_relative_to(ROOT):
            continue  # a test collected from elsewhere (a copy in a tmp dir) has no place in the plan
        path = item.path.resolve().relative_to(ROOT).as_posix()
        tier = tier_of(path, plan)
        if tier is None:
            untiered.add(path)
            continue
        item.add_marker(tier.name)
        if tier.fast:
            item.add_marker("fast")
    config.stash[_UNTIERED] = sorted(untiered)


def pytest_terminal_summary(terminalreporter, config):
    """Names the test files that have no tier yet (they still run in `make test`, never in `make test-fast`)."""
    untiered = config.stash.get(_UNTIERED, [])
    if untiered:
        terminalreporter.write_line(f"test files without a tier (not in a tier folder nor in tests/TIERS.tsv): "
                                    f"{', '.join(untiered)}")


@pytest.fixture(autouse=True)
def _isolated_mlflow_uris():
    """An in-process promote points MLflow's fluent API (and MLFLOW_TRACKING_URI) at its store: put both back as
    the test session found them, so that no test reads another test's MLflow store or server."""
    saved = _MLFLOW_ENV
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


def _llm_available() -> bool:
    from ragbench.generation.llm import LLMError
    from ragbench.generation.llm.server import locate_llama_server, locate_model

    try:
        locate_llama_server(Settings.from_env()), locate_model(Settings.from_env(), "smollm2-135m")
        return True
    except LLMError:
        return False


#: tests that talk to the local llama-server: skipped when it is missing, unless RAGBENCH_REQUIRE_LLM=1 (CI)
needs_llm = pytest.mark.skipif(not _llm_available() and os.environ.get("RAGBENCH_REQUIRE_LLM") != "1",
                               reason="llama-server or SmolLM2 missing: run `make llm`")


def requires_scifact():
    return pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason=f"SciFact not found at {SCIFACT}")


def without_costs(metrics) -> dict:
    """A config's measures without its cost measures (latency, embed seconds, bytes on disk): those are measured
    again on every run, so two runs agree on everything else."""
    from ragbench.evaluation.cost import COST_MEASURES

    return {k: v for k, v in metrics.items() if k not in COST_MEASURES}


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def price_model_high(home: Path, emb, seconds_per_token: float = 10.0) -> Path:
    """The test hook of a budget: this machine's stored calibration of embedder ``emb`` in ``home`` says
    ``seconds_per_token`` (10 s per token: any dense embedding takes hours); returns its file."""
    from dataclasses import asdict

    from ragbench.core.models import configure_revision_memo, resolve_device
    from ragbench.embedding.embed import model_key
    from ragbench.sweep.calibrate import Calibration, calibration_path, machine_name

    configure_revision_memo(None)
    hook = calibration_path(home, emb, resolve_device(emb.device))
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(json.dumps(asdict(Calibration(model_key(emb), resolve_device(emb.device), seconds_per_token, 256,
                                                  1, 1, 1, machine_name()))))
    return hook


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


@pytest.fixture
def ragbench_log():
    """The messages of the ragbench logger (it does not propagate to pytest's caplog)."""
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    logger = logging.getLogger("ragbench")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def mlflow_server(backend_store_uri: str, artifacts: Path, timeout: float = 240, app: list[str] = (),
                  env: dict[str, str] | None = None):
    """A real ``mlflow server`` on a free localhost port, lean (one worker, no job runner), yielding its URL once
    /health answers; stopped with SIGINT (it ignores SIGTERM for long), killed if it lingers. ``app``: more
    arguments (``["--app-name", "basic-auth"]``); ``env``: more environment variables."""
    port = free_port()
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_store_uri, "--artifacts-destination",
         str(artifacts), "--host", "127.0.0.1", "--port", str(port), "--workers", "1", *app], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"mlflow server exited: {proc.stderr.read().decode()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            time.sleep(1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"mlflow server ({backend_store_uri.split(':')[0]}) did not become healthy in "
                             f"{timeout:.0f} s")
    try:
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
