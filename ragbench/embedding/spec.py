"""An embedding model in a sweep: the model, its prompts, batch size and the device it runs on."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ragbench.core.spec import Spec


class FinetuneSpec(Spec):
    """Fine-tune the embedder on a training split first (see :mod:`ragbench.embedding.finetune`)."""

    split: str = Field("train", description="the dataset split whose queries and relevant documents are trained on")
    epochs: int = Field(1, gt=0)
    batch_size: int = Field(32, gt=1, description="pairs per step; the other documents of a batch are negatives")
    learning_rate: float = Field(2e-5, gt=0)
    seed: int = 0
    max_pairs: int | None = Field(None, gt=1, description="train on a seeded sample of this many pairs")
    leaks: Literal["refuse", "drop"] = Field(
        "refuse", description="training pairs whose query is an evaluated query or whose document is judged in the "
        "evaluated split: refuse to train (default), or drop them and train on the rest")


class EmbedderSpec(Spec):
    """``device``: ``auto`` runs on CUDA when a GPU is visible (in fp16, with ``batch_size`` x 4), else on the CPU.
    It is not part of the spec's identity: fp16 CUDA vectors match CPU vectors to cosine >= 0.999
    (``benchmarks/gpu_embed.py`` checks), so the cache and collections serve both. ``backend`` and ``quantize``
    are: an ONNX (int8) model is another model (:mod:`ragbench.embedding.onnx_backend`)."""

    name: str | None = None
    model: str
    query_prompt: str = ""
    document_prompt: str = ""
    batch_size: int = Field(64, gt=0)
    max_seq_length: int | None = Field(None, gt=0)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    finetune: FinetuneSpec | None = Field(None, description="fine-tune the model on the dataset's training split "
                                          "before evaluating it")
    backend: Literal["torch", "onnx"] = Field(
        "torch", description="torch (sentence-transformers) or onnx (the model exported once to ONNX and run by "
        "onnxruntime on the CPU; a different model identity, its vectors cached apart)")
    quantize: Literal["none", "int8"] = Field(
        "none", description="with backend onnx: int8 runs a dynamically quantized copy (faster, slightly different "
        "vectors; the sweep measures its quality like any other candidate)")

    # added after specs were first hashed: dumped only when set, so existing ids do not change
    dumped_when_set: ClassVar[tuple[str, ...]] = ("finetune", "backend", "quantize")

    @model_validator(mode="after")
    def _backend_options(self):
        if self.quantize != "none" and self.backend != "onnx":
            raise ValueError(f"quantize: {self.quantize} needs backend: onnx (torch runs the model as published)")
        if self.backend == "onnx" and self.device == "cuda":
            raise ValueError("backend: onnx runs on the CPU; use device: auto or cpu, or backend: torch for CUDA")
        return self

    @property
    def backend_suffix(self) -> str:
        """``""`` for torch, else ``onnx-fp32`` or ``onnx-int8``: what the model key and label add."""
        return "" if self.backend == "torch" else f"onnx-{'fp32' if self.quantize == 'none' else self.quantize}"

    def prompt_for(self, role: str) -> str:
        """The text prepended to each text of ``role`` before encoding: ``query_prompt`` for queries, else
        ``document_prompt``."""
        return self.query_prompt if role == "query" else self.document_prompt

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"name", "device"})

    @property
    def label(self) -> str:
        base = self.model.split("/")[-1]
        return self.name or (f"{base}-{self.backend_suffix}" if self.backend_suffix else base)
