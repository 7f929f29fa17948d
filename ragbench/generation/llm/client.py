"""A client for any OpenAI-compatible ``POST {base_url}/v1/chat/completions`` endpoint.

Works with llama.cpp's ``llama-server``, vLLM, Ollama and hosted APIs. Policies:

* **Retries** with exponential backoff (``backoff * 2**attempt`` s) on timeouts, connection errors and HTTP 5xx/429
  only; other 4xx are permanent (a bad request does not get better by repeating it).
* **API key** read from the environment variable named by ``api_key_env`` at construction; sent as a Bearer token,
  never included in ``repr``, error messages, cache files or anything returned.
* **Disk cache**: one small JSON file per response, named by the SHA-256 of
  ``{"model", "messages", "params"}`` (params = temperature, max_tokens and ``extra_body``; the base URL is left out
  because a local server gets a new port each run — the model id must therefore name the exact weights, as
  :func:`ragbench.generation.llm.server.model_identity` does). Written atomically (temp file + rename), so a crash never leaves
  a half entry; a corrupt entry is ignored and refetched. Each entry also records the seconds the request took, so
  a cached rerun can still report what the call cost (:attr:`Completion.recorded_seconds`).
* **Garbage** (non-JSON body, no ``choices[0].message.content``) raises :class:`ragbench.generation.llm.LLMClientError`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ragbench.core.atomic import write_text_atomically
from ragbench.generation.llm import LLMClientError

Messages = Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class Completion:
    """One chat completion. ``prompt_tokens``/``completion_tokens`` are the endpoint's own counts (None if absent)."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached: bool
    seconds: float
    #: the seconds the endpoint took when this response was first fetched (a cache hit's ``seconds`` is 0): None for
    #: cache entries written before this was recorded
    recorded_seconds: float | None = None


@dataclass(frozen=True)
class ChatOptions:
    """How a :class:`ChatClient` samples and sends: ``temperature`` and ``max_tokens`` (temperature 0 = greedy, for
    repeatable evaluation); ``timeout`` seconds per HTTP request (connect, read and write each); ``retries`` extra
    attempts after the first on transient failures, ``backoff`` the first wait in seconds; ``concurrency`` worker
    threads in :meth:`ChatClient.complete_many`; ``extra_body`` extra JSON fields (None: llama.cpp's
    ``{"cache_prompt": False}``, for repeatable SmolLM2 outputs)."""

    temperature: float = 0.0
    max_tokens: int = 64
    timeout: float = 60.0
    retries: int = 2
    backoff: float = 0.5
    concurrency: int = 1
    extra_body: Mapping[str, Any] | None = None


class ChatClient:
    """Chat completions with retries, a concurrency limit and a response cache.

    Parameters
    ----------
    base_url : endpoint root, e.g. ``http://127.0.0.1:8080`` (``/v1`` is appended unless already there).
    model : the ``model`` field sent; also part of the cache key.
    options : sampling, timeout, retries, concurrency and extra JSON fields (:class:`ChatOptions`).
    api_key_env, api_key : the name of the environment variable holding the API key (shown in ``repr``) and its
        value, looked up by :meth:`Settings.secret` at the edge (None = no Authorization header).
    cache_dir : response cache folder; None disables the cache.
    """

    def __init__(self, base_url: str, model: str, options: ChatOptions = ChatOptions(), *,
                 api_key_env: str | None = "RAGBENCH_LLM_API_KEY", api_key: str | None = None,
                 cache_dir: str | Path | None = None):
        o = options
        temperature, max_tokens, timeout, retries = o.temperature, o.max_tokens, o.timeout, o.retries
        concurrency, backoff, extra_body = o.concurrency, o.backoff, o.extra_body
        if temperature < 0 or max_tokens <= 0 or timeout <= 0 or retries < 0 or concurrency < 1 or backoff < 0:
            raise ValueError(f"invalid ChatClient settings: temperature={temperature} (>= 0), max_tokens="
                             f"{max_tokens} (> 0), timeout={timeout} (> 0), retries={retries} (>= 0), "
                             f"concurrency={concurrency} (>= 1), backoff={backoff} (>= 0)")
        root = base_url.rstrip("/")
        self.url = root + ("/chat/completions" if root.endswith("/v1") else "/v1/chat/completions")
        self.model, self.temperature, self.max_tokens = model, float(temperature), int(max_tokens)
        self.timeout, self.retries, self.concurrency, self.backoff = float(timeout), int(retries), concurrency, backoff
        self.extra_body = dict({"cache_prompt": False} if extra_body is None else extra_body)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.api_key_env = api_key_env
        self.__api_key = api_key
        self._lock = threading.Lock()
        self.http_calls = 0  # HTTP requests actually sent (retries included); cache hits send none
        self._http = httpx.Client(timeout=httpx.Timeout(self.timeout),
                                  limits=httpx.Limits(max_connections=max(concurrency, 1)))

    def __repr__(self) -> str:  # never the key itself
        key = f"${self.api_key_env} set" if self.__api_key else "no key"
        return (f"ChatClient({self.url!r}, model={self.model!r}, temperature={self.temperature}, "
                f"max_tokens={self.max_tokens}, {key})")

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------ params and cache
    @property
    def params(self) -> dict[str, Any]:
        """What, besides model and messages, decides the response (for the cache key and for logging)."""
        return {"temperature": self.temperature, "max_tokens": self.max_tokens, **self.extra_body}

    def _params(self, max_tokens: int | None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        params = self.params if max_tokens is None else {**self.params, "max_tokens": int(max_tokens)}
        return {**params, **extra} if extra else params

    def cache_key(self, messages: Messages, max_tokens: int | None = None,
                  extra: Mapping[str, Any] | None = None) -> str:
        material = {"model": self.model, "messages": [dict(m) for m in messages],
                    "params": self._params(max_tokens, extra)}
        return hashlib.sha256(json.dumps(material, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _cache_path(self, key: str) -> Path | None:
        return self.cache_dir / key[:2] / f"{key}.json" if self.cache_dir else None

    def cached(self, messages: Messages, max_tokens: int | None = None) -> Completion | None:
        """The cached completion of ``messages`` (as :meth:`complete` would send them), or None; sends nothing."""
        return self._cache_get(self.cache_key(messages, max_tokens))

    def _cache_get(self, key: str) -> Completion | None:
        path = self._cache_path(key)
        if path is None or not path.is_file():
            return None
        try:
            d = json.loads(path.read_text())
            return Completion(d["text"], d.get("finish_reason"), d.get("prompt_tokens"), d.get("completion_tokens"),
                              cached=True, seconds=0.0, recorded_seconds=d.get("seconds"))
        except (OSError, ValueError, KeyError, TypeError):
            return None  # corrupt entry (should not happen with atomic writes): refetch and overwrite

    def _cache_put(self, key: str, c: Completion) -> None:
        path = self._cache_path(key)
        if path is None:
            return
        body = {"model": self.model, "text": c.text, "finish_reason": c.finish_reason,
                "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens, "seconds": c.seconds}
        write_text_atomically(path, json.dumps(body))

    # ------------------------------------------------------------ requests
    def complete(self, messages: Messages, max_tokens: int | None = None,
                 extra: Mapping[str, Any] | None = None) -> Completion:
        """One chat completion (from the cache when present); ``max_tokens`` overrides the client's for this call
        and ``extra`` adds JSON fields to this request only (a ``response_format`` with this prompt's schema); both
        are part of the cache key."""
        if not messages:
            raise ValueError("no messages to send")
        key = self.cache_key(messages, max_tokens, extra)
        hit = self._cache_get(key)
        if hit is not None:
            return hit
        t0 = time.perf_counter()
        body = {"model": self.model, "messages": [dict(m) for m in messages], **self._params(max_tokens, extra)}
        data = self._post(body)
        text, finish, usage = _parse(data, self.url)
        seconds = time.perf_counter() - t0
        c = Completion(text, finish, usage.get("prompt_tokens"), usage.get("completion_tokens"), cached=False,
                       seconds=seconds, recorded_seconds=seconds)
        self._cache_put(key, c)
        return c

    def complete_many(self, batch: Sequence[Messages], progress: Callable[..., Any] | None = None,
                      max_tokens: int | None = None) -> list[Completion]:
        """Completions for many prompts, in input order, on ``concurrency`` threads.

        ``progress`` is called with ``1`` after each prompt (e.g. the ``advance`` of
        :func:`ragbench.core.progress.progress`). The first failure cancels what has not started and is raised.
        """
        def one(m: Messages) -> Completion:
            c = self.complete(m, max_tokens)
            if progress is not None:
                progress(1)
            return c

        if self.concurrency == 1 or len(batch) <= 1:
            return [one(m) for m in batch]
        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="ragbench-llm") as pool:
            futures = [pool.submit(one, m) for m in batch]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def _post(self, body: dict) -> Any:
        headers = {"Authorization": f"Bearer {self.__api_key}"} if self.__api_key else {}
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            with self._lock:
                self.http_calls += 1
            try:
                r = self._http.post(self.url, json=body, headers=headers)
            except httpx.TimeoutException as e:
                last = f"timed out after {self.timeout:g} s ({type(e).__name__})"
                continue
            except httpx.TransportError as e:
                last = f"cannot connect ({type(e).__name__}: {e})"
                continue
            if r.status_code >= 500 or r.status_code == 429:
                last = f"HTTP {r.status_code}: {r.text[:200]!r}"
                continue
            if r.status_code >= 400:
                raise LLMClientError(f"{self.url} rejected the request (model {self.model!r}): HTTP {r.status_code}: "
                                     f"{r.text[:300]!r}")
            try:
                return r.json()
            except ValueError:
                raise LLMClientError(f"{self.url} returned a non-JSON body (HTTP {r.status_code}): "
                                     f"{r.text[:200]!r}") from None
        raise LLMClientError(f"{self.url} failed after {self.retries + 1} attempt(s): {last}")


def _parse(data: Any, url: str) -> tuple[str, str | None, dict]:
    """``choices[0].message.content``, ``finish_reason`` and ``usage`` of a response, or a clear error."""
    try:
        choice = data["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMClientError(f"{url} returned JSON without choices[0].message.content: {str(data)[:200]!r}") from None
    if not isinstance(text, str):
        raise LLMClientError(f"{url} returned a non-text message content: {str(text)[:200]!r}")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return text, choice.get("finish_reason"), usage
