"""The one settings object: every environment variable ragbench reads is read here, once, at the edge.

The CLI, the Prefect flow, the serving model and tests build a :class:`Settings` (``Settings.from_env()``, with
overrides such as ``home=``) and pass it down; library code never reads ``os.environ``. Process-wide knobs that
third-party libraries read from the environment (Hugging Face offline mode) and the log level are applied once by
:meth:`Settings.apply`.

Every variable, the setting it fills and its default are listed on the generated settings page of the manual
(docs/reference/settings.md, written from this class and :meth:`Settings.from_env` at build time).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

DEFAULT_HOME = Path(".ragbench")


def default_tools_dir() -> Path:
    """``~/.cache/ragbench/tools``, with ``~`` expanded: a relative ``~`` would be a folder of that name in the
    working directory."""
    return Path.home() / ".cache" / "ragbench" / "tools"


def _flag(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() not in ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Settings:
    """Where ragbench keeps its state and which servers it talks to."""

    #: caches, DuckDB, embedded Qdrant and the MLflow store
    home: Path = DEFAULT_HOME
    #: an MLflow server (none: SQLite under the home)
    mlflow_tracking_uri: str | None = None
    #: a Qdrant server instead of the embedded Qdrant Edge
    qdrant_url: str | None = None
    #: the Qdrant server's API key (never logged)
    qdrant_api_key: str | None = field(default=None, repr=False)
    #: log level of the ragbench logger
    log_level: str = "INFO"
    #: progress bars (0 hides them)
    progress: bool = True
    #: seconds between two progress lines of a running stage when output is not a terminal (a log file, a pipe)
    progress_interval_s: float = 30.0
    #: a Prefect server's API (none: Prefect's ephemeral mode, no UI)
    prefect_api_url: str | None = None
    #: the MLflow UI's URL (``http://mlflow.example:5000``), for links in reports; none: no link
    mlflow_ui_url: str | None = None
    #: 1 lets unknown model names download from a hub (default: offline)
    allow_download: bool = False
    #: disk reserve kept free by the disk-space guard before embedding and indexing
    min_free_bytes: int = 200 * 1024 * 1024
    #: vectors per cache segment written while embedding
    embed_segment_rows: int = 512
    #: tools cache: the llama-server build and GGUF models
    tools_dir: Path = field(default_factory=default_tools_dir)
    #: an explicit llama-server binary
    llama_server: Path | None = None
    #: the default local LLM (a registry name or a .gguf path)
    llm_model: str | None = None
    #: the home a promoted model serves from, when it moved since promotion
    serving_home: Path | None = None
    #: a Dask scheduler (tcp://host:8786) that runs the embedding shards
    dask_address: str | None = None
    #: how long a sweep waits for results.duckdb held by another process before a result goes to the spool
    results_busy_wait_s: float = 5.0
    #: how long a sweep waits at its end for that process to let go, to merge the spooled results
    results_final_wait_s: float = 300.0
    #: retries of each MLflow HTTP request (MLflow's own default, 7 with backoff, waits minutes on a dead server)
    mlflow_http_retries: int = 2
    #: seconds each MLflow HTTP request may take
    mlflow_http_timeout: float = 60.0
    #: who promotes (recorded with each promotion)
    user: str = "unknown"
    #: the environment the settings were read from: secrets named by a config (``api_key_env``) are looked up here
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides) -> "Settings":
        """Settings from ``environ`` (default: the process environment); keyword overrides win (None is ignored
        for ``home``, so ``from_env(home=cli_option)`` keeps ``$RAGBENCH_HOME`` when the option is absent)."""
        env = dict(os.environ if environ is None else environ)
        tools = env.get("RAGBENCH_TOOLS")
        values = dict(
            home=Path(env.get("RAGBENCH_HOME") or DEFAULT_HOME),
            mlflow_tracking_uri=env.get("MLFLOW_TRACKING_URI") or None,
            qdrant_url=env.get("RAGBENCH_QDRANT_URL") or None,
            qdrant_api_key=env.get("RAGBENCH_QDRANT_API_KEY") or None,
            log_level=env.get("RAGBENCH_LOG_LEVEL", "INFO"),
            progress=_flag(env.get("RAGBENCH_PROGRESS"), True),
            progress_interval_s=float(env.get("RAGBENCH_PROGRESS_INTERVAL", 30.0)),
            mlflow_ui_url=env.get("RAGBENCH_MLFLOW_UI_URL") or None,
            prefect_api_url=env.get("PREFECT_API_URL") or None,
            allow_download=env.get("RAGBENCH_ALLOW_DOWNLOAD") == "1",
            min_free_bytes=int(env.get("RAGBENCH_MIN_FREE_BYTES", 200 * 1024 * 1024)),
            embed_segment_rows=int(env.get("RAGBENCH_EMBED_SEGMENT_ROWS", 512)),
            tools_dir=Path(tools).expanduser() if tools else default_tools_dir(),
            llama_server=Path(env["RAGBENCH_LLAMA_SERVER"]).expanduser() if env.get("RAGBENCH_LLAMA_SERVER")
            else None,
            llm_model=env.get("RAGBENCH_LLM_MODEL") or None,
            serving_home=Path(env["RAGBENCH_SERVING_HOME"]) if env.get("RAGBENCH_SERVING_HOME") else None,
            dask_address=env.get("RAGBENCH_DASK_ADDRESS") or None,
            results_busy_wait_s=float(env.get("RAGBENCH_RESULTS_BUSY_WAIT", 5.0)),
            results_final_wait_s=float(env.get("RAGBENCH_RESULTS_FINAL_WAIT", 300.0)),
            mlflow_http_retries=int(env.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", 2)),
            mlflow_http_timeout=float(env.get("MLFLOW_HTTP_REQUEST_TIMEOUT", 60.0)),
            user=env.get("USER") or env.get("LOGNAME") or "unknown",
            environ=env,
        )
        if overrides.get("home") is None:
            overrides.pop("home", None)
        values.update(overrides)
        values["home"] = Path(values["home"])
        return cls(**values)

    def with_home(self, home: str | os.PathLike | None) -> "Settings":
        """The same settings with another home (None keeps this one)."""
        return self if home is None else replace(self, home=Path(home))

    def replace(self, **changes) -> "Settings":
        return replace(self, **changes)

    def ensure_home(self) -> Path:
        """Create the home folder if needed; a path that is a file or cannot be written is a clear error."""
        from ragbench.core.errors import RagbenchError

        home = Path(self.home)
        if home.exists() and not home.is_dir():
            raise RagbenchError(f"home {home} is not a folder (use --home or RAGBENCH_HOME to pick another)")
        try:
            home.mkdir(parents=True, exist_ok=True)
            # a name of its own: two sweeps starting together on one home must not unlink each other's probe
            with tempfile.NamedTemporaryFile(dir=home, prefix=".write-test-"):
                pass
        except OSError as e:
            raise RagbenchError(f"home {home} cannot be written ({e.strerror}); pick another with --home") from None
        return home

    def secret(self, name: str | None) -> str | None:
        """The value of the environment variable ``name`` (an API key a config refers to by name), never logged."""
        return self.environ.get(name) if name else None

    def mlflow_auth_header(self) -> dict[str, str]:
        """The ``Authorization`` header MLflow's own client sends a tracking server, from the variables it reads:
        ``Basic`` of ``MLFLOW_TRACKING_USERNAME:MLFLOW_TRACKING_PASSWORD`` when both are set, else ``Bearer
        MLFLOW_TRACKING_TOKEN``; empty when none is set. For requests ragbench makes without MLflow's client."""
        import base64

        user, password = self.environ.get("MLFLOW_TRACKING_USERNAME"), self.environ.get("MLFLOW_TRACKING_PASSWORD")
        if user and password:
            return {"Authorization": "Basic " + base64.standard_b64encode(f"{user}:{password}".encode()).decode()}
        token = self.environ.get("MLFLOW_TRACKING_TOKEN")
        return {"Authorization": f"Bearer {token}"} if token else {}

    def apply(self) -> "Settings":
        """Apply the process-wide parts: Hugging Face offline mode (unless the user set it), tokenizer threads,
        third-party progress bars and log levels off the terminal, MLflow's telemetry off (unless the user set it),
        its HTTP retries and timeout, the ragbench log level and progress bars. Returns ``self``."""
        from ragbench.core import progress

        os.environ.setdefault("HF_HUB_OFFLINE", "0" if self.allow_download else "1")
        os.environ.setdefault(TOKENIZER_THREADS, "false")  # on to count tokens or encode on CUDA: tokenizer_threads
        # third-party progress bars (MLflow's artifact transfers, tqdm) and MLflow's INFO lines stay off the
        # terminal; ragbench draws its own bars
        os.environ.setdefault("TQDM_DISABLE", "1")
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "WARNING")
        # MLflow 3 starts a telemetry client when imported outside CI (a config fetched from mlflow.org, usage
        # posted there): an overnight batch on shared, often offline machines sends nothing out, as Prefect's
        # analytics are off (flows/settings.py); MLFLOW_DISABLE_TELEMETRY=false turns it back on
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        # MLflow's HTTP client reads its retry bound from the environment: a dead server fails in seconds
        os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(self.mlflow_http_retries)
        os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = f"{self.mlflow_http_timeout:g}"
        progress.configure(level=self.log_level, bars=self.progress, every=self.progress_interval_s)
        return self


def hub_downloads_allowed() -> bool:
    """Whether model names may resolve to a hub download (``HF_HUB_OFFLINE=0``, as :meth:`Settings.apply` sets
    from ``RAGBENCH_ALLOW_DOWNLOAD``)."""
    return os.environ.get("HF_HUB_OFFLINE") == "0"


#: the tokenizers library's switch for its own threads, read at every call (``false``: one thread)
TOKENIZER_THREADS = "TOKENIZERS_PARALLELISM"
_tokenizer_threads_lock = threading.Lock()
#: blocks with the threads on running in this process, and the variable's value before the first of them began
_tokenizer_threads_state: dict = {"blocks": 0, "before": None}


@contextmanager
def tokenizer_threads(on: bool = True):
    """The tokenizer's own threads on for the block (``TOKENIZERS_PARALLELISM=true``; ``on=False``: nothing changes),
    put back when the last such block of the process ends, so a later fork finds the variable as it was.

    :meth:`Settings.apply` turns them off (a process that forks after using them gets the library's warning), which
    suits a CPU encode: torch's threads hold the cores, tokenizing is about 1 % of it. Two kinds of work turn them on:
    a CUDA encode, where the GPU waits for the host's tokenizer (on an H200 MiniLM's model ran 32,500 passages/s while
    its host, threads on, tokenized ~3,000), and counting tokens, which is all a plan does besides reading caches (on
    this 2-core CPU one thread tokenized 1,600 SciFact abstracts/s, two 2,550)."""
    if not on:
        yield
        return
    state = _tokenizer_threads_state
    with _tokenizer_threads_lock:
        if state["blocks"] == 0:
            state["before"] = os.environ.get(TOKENIZER_THREADS)
            os.environ[TOKENIZER_THREADS] = "true"
        state["blocks"] += 1
    try:
        yield
    finally:
        with _tokenizer_threads_lock:
            state["blocks"] -= 1
            if state["blocks"] == 0:
                if state["before"] is None:
                    os.environ.pop(TOKENIZER_THREADS, None)
                else:
                    os.environ[TOKENIZER_THREADS] = state["before"]
