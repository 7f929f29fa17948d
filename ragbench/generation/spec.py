"""The generation section of a sweep config: end-to-end answers, the oracle test and the k sweep."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ragbench.core.spec import Spec


class ContextAssemblySpec(Spec):
    """How retrieved chunks become the prompt's context (see :mod:`ragbench.generation.llm.context`)."""

    k: int = Field(5, gt=0)
    ordering: Literal["score", "edges", "best_last"] = "score"
    dedupe: bool = True
    dedupe_threshold: float = Field(0.8, gt=0, le=1)
    token_budget: int | None = Field(1500, gt=0)
    tokenizer: str = "all-MiniLM-L6-v2"
    instruction: str | None = Field(None, description="default: answer using ONLY the context, else reply "
                                                      "exactly INSUFFICIENT_CONTEXT")
    overflow: Literal["cut", "drop"] = Field("cut", description="a chunk longer than the budget left: cut it to "
                                                               "fit (then stop), or drop it and try the next")


class LocalServerSpec(Spec):
    ctx: int = Field(4096, gt=0)
    parallel: int = Field(1, gt=0)
    threads: int = Field(1, gt=0, description="1 is fastest on a shared 2-core machine")
    startup_timeout: float = Field(120, gt=0)


class KSweepSpec(Spec):
    ks: tuple[int, ...] = (1, 3, 5, 10, 20)
    token_budget: int | None = Field(3000, gt=0)


class GenerationSpec(Spec):
    """End-to-end answer accuracy and the oracle test with an LLM.

    ``endpoint: local`` starts llama.cpp's ``llama-server`` on 127.0.0.1 (built by ``make llm``) with ``model`` from
    the packaged registry (or a .gguf path); otherwise ``endpoint`` is an OpenAI-compatible base URL and ``model``
    its model name. The API key is read from ``api_key_env`` and never logged or stored.
    """

    enabled: bool = True
    endpoint: str = "local"
    model: str = "smollm2-135m"
    server: LocalServerSpec = LocalServerSpec()
    api_key_env: str = "RAGBENCH_LLM_API_KEY"
    temperature: float = Field(0.0, ge=0)
    max_tokens: int = Field(64, gt=0)
    timeout: float = Field(60, gt=0)
    retries: int = Field(2, ge=0)
    concurrency: int = Field(1, gt=0)
    extra_body: dict[str, Any] = Field(default_factory=lambda: {"cache_prompt": False},
                                       description="extra request fields; {} for hosted APIs")
    sample: int | None = Field(30, gt=0, description="seeded sample of queries to answer; null = all")
    seed: int = 0
    context: ContextAssemblySpec = ContextAssemblySpec()
    oracle: bool = True
    pool_depth: int = Field(50, gt=0)
    k_sweep: KSweepSpec | None = KSweepSpec()

    @model_validator(mode="after")
    def _pool_covers_context(self):
        if self.pool_depth < self.context.k:
            raise ValueError(f"pool_depth ({self.pool_depth}) must be >= context.k ({self.context.k})")
        return self
