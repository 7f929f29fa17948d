"""A local llama.cpp ``llama-server``, started and stopped by ragbench on 127.0.0.1.

The binary is started directly (never through a wrapper, which would orphan it on SIGTERM) in its own session and
process group, on a port picked free, with its output going to a log file (a pipe would fill up and stall it).
Readiness is ``GET /health`` answering 200 (503 while the model loads). Stopping sends SIGTERM to the server's own
PID, then SIGKILL after a grace period; :func:`atexit` does the same if the interpreter exits first, so no orphan
remains even when the caller forgets the context manager.

``locate_llama_server()`` and ``locate_model()`` find the files built/fetched by ``scripts/build_llama_server.sh``
and ``scripts/fetch_llm_model.py`` (env overrides ``RAGBENCH_LLAMA_SERVER`` and ``RAGBENCH_LLM_MODEL``).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import httpx

from ragbench.core.hashing import file_sha256
from ragbench.generation.llm import DEFAULT_MODEL, LLAMA_SERVER_DIR, MODELS, LLMServerError, model_path

BUILD_HINT = "build it with: scripts/build_llama_server.sh (about 20 min on 2 cores, once; cached)"


def locate_llama_server(settings) -> Path:
    """The ``llama-server`` binary: ``settings.llama_server`` (``$RAGBENCH_LLAMA_SERVER``) or
    ``<tools>/llama-server-11434/llama-server``."""
    env = settings.llama_server
    path = Path(env) if env else Path(settings.tools_dir) / LLAMA_SERVER_DIR / "llama-server"
    if not path.is_file() or not os.access(path, os.X_OK):
        where = "RAGBENCH_LLAMA_SERVER points to" if env else "expected"
        raise LLMServerError(f"llama-server not found: {where} {path}; {BUILD_HINT}")
    return path


def locate_model(settings, name: str | None = None) -> Path:
    """A GGUF model file from a registry name (``ragbench.generation.llm.MODELS``) or a path.

    ``name=None`` means ``settings.llm_model`` (``$RAGBENCH_LLM_MODEL``: a name or a path) or the default
    ``smollm2-135m``.
    """
    name = name or settings.llm_model or DEFAULT_MODEL
    if name in MODELS:
        path = model_path(name, settings.tools_dir)
        if not path.is_file():
            raise LLMServerError(f"LLM model {name!r} not found at {path}; fetch it with: "
                                 f"python scripts/fetch_llm_model.py --model {name}")
        return path
    path = Path(name).expanduser()
    if not path.is_file():
        raise LLMServerError(f"LLM model file not found: {path} (known model names: {', '.join(sorted(MODELS))})")
    return path


@lru_cache(maxsize=16)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:  # size and mtime: a changed file is hashed again
    return file_sha256(path)


def model_identity(path: Path) -> str:
    """``<file stem>@sha256:<16 hex>``: names the exact weights, so response caches never mix two models.

    The hash of the whole file is computed once per (path, size, mtime) per process (0.3 s for 100 MB).
    """
    st = path.stat()
    return f"{path.stem}@sha256:{_file_sha256(str(path), st.st_size, st.st_mtime_ns)[:16]}"


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free right now (there is a small race until the server binds; start() retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no server log)"
    return "\n".join(lines[-n:]) or "(server printed nothing)"


@dataclass(frozen=True)
class ServerOptions:
    """How a :class:`LocalLLMServer` runs: ``ctx`` total context tokens (each of the ``parallel`` request slots gets
    ``ctx // parallel``; >1 only for a bigger machine), ``threads`` CPU threads for generation, a fixed ``port``
    (None: a free one) on ``host``, ``startup_timeout`` seconds to wait for ``/health`` = 200, ``stop_grace``
    seconds between SIGTERM and SIGKILL on stop, and ``extra_args`` for the server's command line."""

    ctx: int = 4096
    parallel: int = 1
    threads: int = 2
    port: int | None = None
    host: str = "127.0.0.1"
    startup_timeout: float = 120.0
    stop_grace: float = 5.0
    extra_args: Sequence[str] = ()


class LocalLLMServer:
    """``llama-server -m MODEL --host 127.0.0.1 --port P -c CTX --parallel N -t THREADS`` as a context manager.

    Parameters
    ----------
    binary, model_path : the server executable and the GGUF file (see :func:`locate_llama_server`,
        :func:`locate_model`).
    options : context size, slots, threads, port, timeouts and extra arguments (:class:`ServerOptions`; no
        throughput gain from ``parallel`` > 1 on 2 cores).

    Attributes ``base_url`` (``http://127.0.0.1:P``), ``pid``, ``model_id`` (:func:`model_identity`, also served as
    the model alias) and ``log_path`` are valid while running.
    """

    def __init__(self, binary: str | Path, model_path: str | Path, options: ServerOptions = ServerOptions()):
        o = options
        ctx, parallel, threads, port, host = o.ctx, o.parallel, o.threads, o.port, o.host
        startup_timeout, stop_grace, extra_args = o.startup_timeout, o.stop_grace, o.extra_args
        if ctx <= 0 or parallel <= 0 or threads <= 0:
            raise LLMServerError(f"llama-server needs positive ctx/parallel/threads, got {ctx}/{parallel}/{threads}")
        self.binary, self.model_path = Path(binary), Path(model_path)
        self.ctx, self.parallel, self.threads, self.port, self.host = ctx, parallel, threads, port, host
        self.startup_timeout, self.stop_grace, self.extra_args = startup_timeout, stop_grace, tuple(extra_args)
        self._proc: subprocess.Popen | None = None
        self._logdir: tempfile.TemporaryDirectory | None = None
        self.model_id: str | None = None

    def __repr__(self) -> str:
        state = f"pid={self.pid} url={self.base_url}" if self.running else "stopped"
        return f"LocalLLMServer({self.model_path.name}, ctx={self.ctx}, parallel={self.parallel}, {state})"

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> LocalLLMServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def base_url(self) -> str:
        if self._proc is None:
            raise LLMServerError("the LLM server is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return Path(self._logdir.name) / "llama-server.log" if self._logdir else None

    def start(self) -> LocalLLMServer:
        if self._proc is not None:
            raise LLMServerError("this LocalLLMServer is already started")
        if not self.binary.is_file() or not os.access(self.binary, os.X_OK):
            raise LLMServerError(f"llama-server binary not found or not executable: {self.binary}; {BUILD_HINT}")
        if not self.model_path.is_file():
            raise LLMServerError(f"LLM model file not found: {self.model_path}")
        self.model_id = model_identity(self.model_path)
        fixed_port = self.port is not None
        for attempt in range(1 if fixed_port else 3):
            if not fixed_port:
                self.port = free_port(self.host)
            try:
                self._launch()
                return self
            except LLMServerError as e:
                # another process grabbed the port between free_port() and bind(): try a new one
                if fixed_port or "bind" not in str(e).lower() or attempt == 2:
                    raise
        return self

    def _launch(self) -> None:
        self._logdir = tempfile.TemporaryDirectory(prefix="ragbench-llm-")
        cmd = [str(self.binary), "-m", str(self.model_path), "--host", self.host, "--port", str(self.port),
               "-c", str(self.ctx), "--parallel", str(self.parallel), "-t", str(self.threads),
               "--alias", self.model_id, *self.extra_args]
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed right after Popen; the child keeps its own fd
        try:
            # own session and process group: a terminal Ctrl-C does not reach it; stop()/atexit end it by PID
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        except OSError as e:
            self._cleanup_logdir()
            raise LLMServerError(f"cannot start {self.binary}: {e}") from e
        finally:
            log.close()
        atexit.register(self.stop)
        try:
            self._wait_healthy()
        except BaseException:  # LLMServerError (already stopped) or Ctrl-C while loading: never leave it running
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{self.host}:{self.port}/health"
        with httpx.Client(timeout=2.0) as http:
            while True:
                code = self._proc.poll()
                if code is not None:
                    tail = _tail(self.log_path)
                    self.stop()
                    raise LLMServerError(f"llama-server exited with code {code} while loading model "
                                         f"{self.model_path}:\n{tail}")
                try:
                    if http.get(url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    tail = _tail(self.log_path)
                    self.stop()
                    raise LLMServerError(f"llama-server with model {self.model_path} not healthy after "
                                         f"{self.startup_timeout:.0f} s:\n{tail}")
                time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM to the server's own PID, SIGKILL after ``stop_grace`` s; idempotent."""
        proc, self._proc = self._proc, None
        atexit.unregister(self.stop)
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=self.stop_grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        self._cleanup_logdir()

    def _cleanup_logdir(self) -> None:
        if self._logdir is not None:
            self._logdir.cleanup()
            self._logdir = None
