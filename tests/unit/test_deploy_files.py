"""Structural checks of the deployment files: docker-compose.yml, prefect.yaml, docker/.

No Docker engine and no network are needed. `docker compose config` is run only when the
compose plugin is installed (it renders the file offline) and is skipped otherwise.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import zoneinfo
from datetime import datetime, timezone
from urllib.parse import urlparse

import pytest
import yaml

from conftest import ROOT
COMPOSE_FILE = ROOT / "docker-compose.yml"
PREFECT_FILE = ROOT / "prefect.yaml"

REQUIRED_SERVICES = {"qdrant", "postgres", "mlflow", "prefect-server", "prefect-worker", "deploy", "dask-scheduler",
                     "dask-worker"}
WIRING_VARS = {  # env var -> (service it must point at, container port)
    "RAGBENCH_QDRANT_URL": ("qdrant", 6333),
    "MLFLOW_TRACKING_URI": ("mlflow", 5000),
    "PREFECT_API_URL": ("prefect-server", 4200),
}
DEPLOYMENT_NAME = "ragbench-nightly-sweep"

# ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?err} ... ("$$" is an escaped literal "$")
INTERP_RE = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}")
SECRET_KEY_RE = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|ACCESS_KEY", re.IGNORECASE)
URL_USERINFO_RE = re.compile(r"^[a-z][a-z0-9+.\-]*://([^/@\s]+)@", re.IGNORECASE)


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE_FILE.is_file(), "docker-compose.yml is missing at the repository root"
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def prefect_project() -> dict:
    assert PREFECT_FILE.is_file(), "prefect.yaml is missing at the repository root"
    data = yaml.safe_load(PREFECT_FILE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def deployment(prefect_project: dict) -> dict:
    deployments = {d.get("name"): d for d in prefect_project.get("deployments") or []}
    assert DEPLOYMENT_NAME in deployments, f"no deployment named {DEPLOYMENT_NAME!r}"
    return deployments[DEPLOYMENT_NAME]


def render_defaults(value: str) -> str:
    """Interpolate like compose would with an empty environment (take the defaults)."""
    return INTERP_RE.sub(lambda m: m.group(3) or "", value)


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def command_text(service: dict) -> str:
    cmd = service.get("command") or ""
    return " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)


def depends_on(service: dict) -> dict[str, dict]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: {"condition": "service_started"} for name in deps}
    return {name: (spec or {}) for name, spec in deps.items()}


def container_ports(service: dict) -> set[int]:
    ports = set()
    for entry in service.get("ports") or []:
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            target = render_defaults(str(entry)).split("/")[0].rsplit(":", 1)[-1]
            ports.add(int(target.split("-")[0]))
    return ports


def volume_sources(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each mount; long-form entries are normalised."""
    out = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            out.append((str(entry.get("source", "")), str(entry.get("target", ""))))
        else:
            parts = str(entry).split(":")
            out.append((parts[0], parts[1]) if len(parts) > 1 else ("", parts[0]))
    return out


def is_bind_source(source: str) -> bool:
    return source.startswith((".", "/", "~", "$"))


def iter_strings(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from iter_strings(value, path + (str(key),))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from iter_strings(value, path + (str(i),))
    elif isinstance(node, str):
        yield path, node


def worker_pool_name(services: dict) -> str:
    match = re.search(r"prefect worker start\b.*?--pool[ =](\S+)", command_text(services["prefect-worker"]))
    assert match, "prefect-worker command does not run `prefect worker start --pool <name>`"
    return match.group(1)


# ------------------------------------------------------------------ docker-compose.yml


def test_required_services_present(services):
    missing = REQUIRED_SERVICES - services.keys()
    assert not missing, f"docker-compose.yml lacks services: {sorted(missing)}"
    assert services["qdrant"]["image"].startswith("qdrant/qdrant")
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["prefect-server"]["image"].startswith("prefecthq/prefect:3")


def test_depends_on_targets_exist(services):
    for name, service in services.items():
        for target, spec in depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target!r}"
            assert target != name
            if spec.get("condition") == "service_healthy":
                assert services[target].get("healthcheck"), (
                    f"{name} waits for {target} to be healthy but {target} has no healthcheck"
                )


def test_dependency_order(services):
    assert depends_on(services["mlflow"])["postgres"]["condition"] == "service_healthy"
    assert depends_on(services["prefect-server"])["postgres"]["condition"] == "service_healthy"
    worker_deps = depends_on(services["prefect-worker"])
    assert {"prefect-server", "mlflow", "qdrant"} <= worker_deps.keys()
    assert worker_deps["prefect-server"]["condition"] == "service_healthy"
    assert "prefect-server" in depends_on(services["deploy"])


def test_build_contexts_and_dockerfiles_exist(services):
    built = {}
    for name, service in services.items():
        build = service.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = (ROOT / build.get("context", ".")).resolve()
        assert context.is_dir(), f"{name}: build context {context} does not exist"
        dockerfile = context / build.get("dockerfile", "Dockerfile")
        assert dockerfile.is_file(), f"{name}: Dockerfile {dockerfile} does not exist"
        text = dockerfile.read_text()
        assert re.search(r"^FROM\s+\S+", text, re.MULTILINE), f"{dockerfile} has no FROM line"
        built[name] = text
    # the worker image has the project installed, with CPU-only torch first
    assert "prefect-worker" in built and "deploy" in built
    worker_df = built["prefect-worker"]
    assert "download.pytorch.org/whl/cpu" in worker_df
    assert worker_df.index("download.pytorch.org/whl/cpu") < worker_df.index("pip install -e .")
    # MLflow needs the Postgres driver, whether it is built or an image that has it
    mlflow = services["mlflow"]
    assert "mlflow" in built and "psycopg2" in built["mlflow"], (
        "the mlflow service must be built from a Dockerfile that installs psycopg2"
    )
    assert mlflow.get("image") != services["prefect-worker"].get("image")


def test_published_ports(services):
    expected = {"qdrant": {6333, 6334}, "mlflow": {5000}, "prefect-server": {4200}}
    for name, ports in expected.items():
        assert ports <= container_ports(services[name]), f"{name} must publish {sorted(ports)}"


def test_named_volumes_declared(compose, services):
    declared = set((compose.get("volumes") or {}).keys())
    used = set()
    for name, service in services.items():
        for source, target in volume_sources(service):
            assert target.startswith("/"), f"{name}: volume target {target!r} is not absolute"
            if source and not is_bind_source(source):
                used.add(source)
            elif source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: bind source {source} does not exist"
    undeclared = used - declared
    assert not undeclared, f"named volumes not declared at top level: {sorted(undeclared)}"
    # the stateful services keep their data in volumes
    for name in ("qdrant", "postgres", "mlflow", "prefect-worker"):
        assert volume_sources(services[name]), f"{name} has no volume"
    assert any(t == "/qdrant/storage" for _, t in volume_sources(services["qdrant"]))
    assert any(t == "/var/lib/postgresql/data" for _, t in volume_sources(services["postgres"]))


@pytest.mark.parametrize("service_name", ["prefect-worker", "deploy"])
def test_worker_env_wires_the_servers(services, service_name):
    env = env_of(services[service_name])
    for var, (target, port) in WIRING_VARS.items():
        assert var in env, f"{service_name} lacks {var}"
        url = urlparse(render_defaults(env[var]))
        assert url.scheme == "http", f"{var}={env[var]!r}"
        assert url.hostname in services, f"{var} points at {url.hostname!r}, not a service"
        assert url.hostname == target, f"{var} should point at the {target} service"
        assert url.port == port, f"{var} should use port {port}"
    assert urlparse(env["PREFECT_API_URL"]).path.rstrip("/") == "/api"
    assert env.get("RAGBENCH_HOME", "").startswith("/data")
    mounts = dict((t, s) for s, t in volume_sources(services[service_name]))
    assert "/data" in mounts, f"{service_name} must mount a volume at /data (RAGBENCH_HOME)"
    assert mounts.get("/app") in {".", "./"}, f"{service_name} must mount the checkout at /app"


def test_dask_scheduler_and_scalable_workers_share_the_home(services):
    scheduler, worker = services["dask-scheduler"], services["dask-worker"]
    assert scheduler["command"][:2] == ["dask", "scheduler"] and "8786" in scheduler["command"]
    assert worker["command"][:3] == ["dask", "worker", "tcp://dask-scheduler:8786"]
    assert "container_name" not in worker  # `--scale dask-worker=N` needs unnamed containers
    assert any(t == "/data" for _, t in volume_sources(worker)), "workers must see the same home as the sweep"
    assert worker["image"] == services["prefect-worker"]["image"]  # same code and models on every worker
    for name in ("prefect-worker", "deploy"):
        url = urlparse(env_of(services[name])["RAGBENCH_DASK_ADDRESS"])
        assert (url.scheme, url.hostname, url.port) == ("tcp", "dask-scheduler", 8786)


def test_mlflow_server_command(services):
    mlflow = services["mlflow"]
    cmd = command_text(mlflow)
    for flag in ("mlflow server", "--backend-store-uri postgresql://", "--artifacts-destination",
                 "--serve-artifacts", "--host 0.0.0.0", "--port 5000", "--workers 1"):
        assert flag in cmd, f"mlflow command lacks {flag!r}"
    assert env_of(mlflow).get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "").lower() == "false"
    artifacts = re.search(r"--artifacts-destination (\S+)", cmd).group(1)
    assert artifacts in {t for _, t in volume_sources(mlflow)}, "artifact store is not on a volume"
    # the worker reaches the server as "mlflow:5000": it must pass MLflow's Host allow-list
    allowed = render_defaults(env_of(mlflow).get("MLFLOW_SERVER_ALLOWED_HOSTS", ""))
    allowed_list = allowed.split(",") if allowed else []
    m = re.search(r"--allowed-hosts[ =](\S+)", cmd)
    if m:
        allowed_list = render_defaults(m.group(1)).split(",")
    assert allowed_list, "set MLFLOW_SERVER_ALLOWED_HOSTS: the default rejects Host: mlflow:5000"
    assert "*" in allowed_list or "mlflow:*" in allowed_list or "mlflow:5000" in allowed_list


def test_prefect_server(services):
    server = services["prefect-server"]
    cmd = command_text(server)
    assert "prefect server start" in cmd and "--host 0.0.0.0" in cmd
    env = env_of(server)
    db_url = env.get("PREFECT_API_DATABASE_CONNECTION_URL") or env.get(
        "PREFECT_SERVER_DATABASE_CONNECTION_URL", ""
    )
    assert db_url.startswith("postgresql+asyncpg://"), "Prefect must use Postgres via asyncpg"
    assert urlparse(render_defaults(db_url)).hostname == "postgres"
    assert env.get("PREFECT_SERVER_ANALYTICS_ENABLED", "").lower() == "false"


def test_two_databases(services):
    """MLflow and Prefect get separate databases; the second is made by an init script."""
    pg_env = {k: render_defaults(v) for k, v in env_of(services["postgres"]).items()}
    mlflow_db = urlparse(
        render_defaults(re.search(r"--backend-store-uri (\S+)", command_text(services["mlflow"])).group(1))
    ).path.lstrip("/")
    server_env = env_of(services["prefect-server"])
    prefect_db = urlparse(
        render_defaults(server_env.get("PREFECT_API_DATABASE_CONNECTION_URL")
                        or server_env["PREFECT_SERVER_DATABASE_CONNECTION_URL"])
    ).path.lstrip("/")
    assert mlflow_db and prefect_db and mlflow_db != prefect_db
    assert pg_env.get("POSTGRES_DB") in {mlflow_db, prefect_db}
    other_db = prefect_db if pg_env.get("POSTGRES_DB") == mlflow_db else mlflow_db

    init_mounts = [s for s, t in volume_sources(services["postgres"])
                   if t.startswith("/docker-entrypoint-initdb.d")]
    assert init_mounts, "postgres needs an init script to create the second database"
    init_path = ROOT / init_mounts[0]
    assert init_path.resolve().is_relative_to((ROOT / "docker").resolve())
    scripts = [init_path] if init_path.is_file() else sorted(init_path.glob("*.sh")) + sorted(
        init_path.glob("*.sql")
    )
    assert scripts, f"no init scripts in {init_path}"
    text = "\n".join(p.read_text() for p in scripts)
    assert "CREATE DATABASE" in text.upper()
    # the script names the database literally or through an env var postgres receives
    names_db = other_db in text or any(
        f"${var}" in text or f"${{{var}" in text for var, val in pg_env.items() if val == other_db
    )
    assert names_db, f"init script does not create database {other_db!r}"


def test_healthchecks(services):
    for name in ("postgres", "prefect-server"):
        hc = services[name].get("healthcheck")
        assert hc and hc.get("test"), f"{name} needs a healthcheck"
        assert hc.get("disable") is not True
    pg_test = services["postgres"]["healthcheck"]["test"]
    assert "pg_isready" in (" ".join(pg_test) if isinstance(pg_test, list) else pg_test)
    server_test = services["prefect-server"]["healthcheck"]["test"]
    assert "4200/api/health" in (" ".join(server_test) if isinstance(server_test, list) else server_test)


def test_worker_creates_pool_and_starts(services):
    cmd = command_text(services["prefect-worker"])
    pool = worker_pool_name(services)
    assert re.search(rf"prefect work-pool create {re.escape(pool)}\b.*--type process", cmd)
    assert re.search(r"prefect worker start\b.*--type process", cmd)


def test_deploy_service_is_one_shot(services):
    deploy = services["deploy"]
    assert "deploy" in (deploy.get("profiles") or []), "deploy must sit behind the 'deploy' profile"
    assert "prefect deploy --all --no-prompt" in command_text(deploy)
    assert str(deploy.get("restart", "no")) == "no"
    assert deploy.get("working_dir") == "/app"


def test_credentials_only_through_interpolation(services):
    """Secrets come from ${VAR:-default}; no literal password appears in the file."""
    secret_vars = set()
    for name, service in services.items():
        for key, value in env_of(service).items():
            if SECRET_KEY_RE.search(key):
                assert INTERP_RE.fullmatch(value.strip()), (
                    f"{name}: {key} must be set as ${{VAR:-default}}, not a literal"
                )
                secret_vars.add(INTERP_RE.fullmatch(value.strip()).group(1))
    assert "POSTGRES_PASSWORD" in secret_vars

    for path, text in iter_strings(services):
        for token in text.split():
            m = URL_USERINFO_RE.match(token)
            if not m:
                continue
            # user[:password], where either part may itself be ${VAR:-default}
            parts = re.fullmatch(r"((?:\$\{[^}]*\}|[^:$])*)(?::(.*))?", m.group(1))
            assert parts, f"cannot parse credentials in {token!r}"
            password = parts.group(2)
            where = "/".join(path)
            if password is not None:
                assert INTERP_RE.fullmatch(password), f"{where}: literal password in URL {token!r}"


def test_interpolated_vars_are_documented(compose):
    """Each ${VAR} used appears in the .env.example-style comment block at the top."""
    raw = COMPOSE_FILE.read_text()
    header = []
    for line in raw.splitlines():
        if line.startswith("#") or not line.strip():
            header.append(line)
        else:
            break
    header_text = "\n".join(header)
    body = "\n".join(line for line in raw.splitlines() if not line.lstrip().startswith("#"))
    used = {m.group(1) for m in INTERP_RE.finditer(body)}
    assert used, "docker-compose.yml uses no ${VAR:-default} interpolation"
    undocumented = {var for var in used if not re.search(rf"\b{var}=", header_text)}
    assert not undocumented, f"document these in the header block: {sorted(undocumented)}"
    for m in INTERP_RE.finditer(body):
        if SECRET_KEY_RE.search(m.group(1)):
            assert m.group(2) in {":-", "-"}, f"${{{m.group(1)}}} needs a default (:-)"


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker:
        try:
            probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            probe = None
        if probe is not None and probe.returncode == 0:
            return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    if standalone:
        try:
            probe = subprocess.run([standalone, "version", "--short"], capture_output=True,
                                   text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if probe.returncode == 0 and probe.stdout.strip().lstrip("v").startswith("2"):
            return [standalone]
    return None


def test_docker_compose_config_renders():
    cli = _compose_cli()
    if cli is None:
        pytest.skip("docker compose plugin (v2) is not installed; offline render not possible")
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "--profile", "deploy", "config", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------------- prefect.yaml


def test_prefect_project_metadata(prefect_project):
    assert prefect_project.get("name") == "ragbench"
    assert prefect_project.get("prefect-version")
    assert prefect_project.get("build") is None
    assert prefect_project.get("push") is None


def test_prefect_yaml_matches_prefect_schema(prefect_project):
    """The file loads with the model `prefect deploy` itself validates it against."""
    models = pytest.importorskip("prefect.cli.deploy._models")
    model = models.PrefectYamlModel.model_validate(prefect_project)
    (dep,) = [d for d in model.deployments if d.name == DEPLOYMENT_NAME]
    assert dep.work_pool is not None and dep.schedules


def test_entrypoint_defines_flow_function(deployment):
    entrypoint = deployment.get("entrypoint", "")
    path_part, sep, func_name = entrypoint.rpartition(":")
    assert sep and path_part.endswith(".py"), f"entrypoint {entrypoint!r} is not path.py:function"
    assert func_name == "sweep_flow"
    source_file = ROOT / path_part
    assert source_file.is_file(), f"entrypoint file {path_part} does not exist"
    tree = ast.parse(source_file.read_text(), filename=str(source_file))
    funcs = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert func_name in funcs, f"{path_part} defines no top-level function {func_name!r}"
    fn = funcs[func_name]
    assert fn.decorator_list, f"{func_name} is not decorated (expected @flow)"
    accepted = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    if fn.args.kwarg is None:
        unknown = set(deployment.get("parameters") or {}) - accepted
        assert not unknown, f"deployment passes parameters {sorted(unknown)} that {func_name} lacks"


def test_parameters(deployment):
    params = deployment.get("parameters") or {}
    assert "config_path" in params
    assert isinstance(params["config_path"], str) and params["config_path"].endswith(".yaml")


def test_schedule_is_valid_nightly_cron(deployment):
    cronsim = pytest.importorskip("cronsim")
    schedules = deployment.get("schedules") or []
    assert schedules, "deployment has no schedules"
    crons = [s for s in schedules if "cron" in s]
    assert crons, "expected a cron schedule"
    for schedule in crons:
        expr = schedule["cron"]
        assert len(expr.split()) == 5, f"{expr!r} is not a 5-field cron"
        tz = zoneinfo.ZoneInfo(schedule.get("timezone", "UTC"))
        it = cronsim.CronSim(expr, datetime(2025, 1, 1, tzinfo=timezone.utc).astimezone(tz))
        first, second = next(it), next(it)
        assert second > first
        assert schedule.get("active", True) is True


def test_work_pool_matches_compose_worker(deployment, services):
    pool = deployment.get("work_pool") or {}
    assert pool.get("name") == worker_pool_name(services)
    assert pool.get("work_queue_name") == "default"
    deploy_cmd = command_text(services["deploy"])
    assert pool["name"] in deploy_cmd, "deploy service should ensure the same work pool exists"


def test_pull_step_points_worker_at_checkout(prefect_project, deployment, services):
    steps = deployment.get("pull") or prefect_project.get("pull") or []
    directories = [
        step["prefect.deployments.steps.set_working_directory"]["directory"]
        for step in steps
        if "prefect.deployments.steps.set_working_directory" in step
    ]
    assert directories, "a set_working_directory pull step is required for a process worker"
    directory = directories[0]
    env_ref = re.fullmatch(r"\{\{\s*\$([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", directory)
    if env_ref:
        # the variable must be set on the worker, to where the checkout is mounted
        worker = services["prefect-worker"]
        value = env_of(worker).get(env_ref.group(1))
        assert value, f"prefect-worker must set {env_ref.group(1)} for the pull step"
        assert value in {t for s, t in volume_sources(worker) if s in {".", "./"}}
    else:
        assert "{{" not in directory or "$" in directory
