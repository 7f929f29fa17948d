"""An embedding model in a sweep: the model, its prompts and batch size."""

from __future__ import annotations

from pydantic import Field

from ragbench.core.spec import Spec


class EmbedderSpec(Spec):
    name: str | None = None
    model: str
    query_prompt: str = ""
    document_prompt: str = ""
    batch_size: int = Field(64, gt=0)
    max_seq_length: int | None = Field(None, gt=0)

    @property
    def label(self) -> str:
        return self.name or self.model.split("/")[-1]
