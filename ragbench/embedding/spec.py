"""An embedding model in a sweep: the model, its prompts, batch size and the device it runs on."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ragbench.core.spec import Spec


class EmbedderSpec(Spec):
    """``device``: ``auto`` runs on CUDA when a GPU is visible (in fp16, with ``batch_size`` x 4), else on the CPU.
    It is not part of the spec's identity: fp16 CUDA vectors match CPU vectors to cosine >= 0.999
    (``benchmarks/gpu_embed.py`` checks), so the cache and collections serve both."""

    name: str | None = None
    model: str
    query_prompt: str = ""
    document_prompt: str = ""
    batch_size: int = Field(64, gt=0)
    max_seq_length: int | None = Field(None, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"name", "device"})

    @property
    def label(self) -> str:
        return self.name or self.model.split("/")[-1]
