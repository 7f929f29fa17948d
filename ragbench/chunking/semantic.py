"""Semantic chunks: cut between consecutive sentences whose embeddings diverge.

The rule is the one of LangChain's ``SemanticChunker`` and chonkie's ``SemanticChunker`` in their simplest form
(compare each sentence with the next; no percentile or smoothing), written here on top of the project's own
sentence splitter (:func:`~ragbench.chunking.sentences.sentence_spans`) and its offline packaged embedders, because
both libraries re-split the text with their own sentence rules and resolve models by hub name (a download), while
here breakpoints must fall exactly on the sentence boundaries the ``sentences`` chunker uses and offsets must be
kept (``text[start:end]`` is the chunk), so span labels judge it like any other chunker.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from ragbench.chunking.base import CHUNKERS, ChunkerSpec, Span
from ragbench.chunking.sentences import sentence_spans
from ragbench.core.models import load_sentence_transformer, resolve_model


def semantic_breakpoints(vectors: np.ndarray, threshold: float) -> list[int]:
    """Indices ``i`` such that a chunk ends after sentence ``i``: the cosine distance ``1 - cos(v_i, v_{i+1})``
    between consecutive (L2-normalised) sentence vectors exceeds ``threshold``. A lower threshold keeps every cut
    of a higher one (monotone: more chunks, never fewer)."""
    if len(vectors) < 2:
        return []
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1.0, norms)
    distance = 1.0 - np.sum(unit[:-1] * unit[1:], axis=1)
    return [int(i) for i in np.flatnonzero(distance > threshold)]


@CHUNKERS.register
class SemanticChunker(ChunkerSpec):
    """``{kind: semantic, model: static-retrieval-m2v, threshold: 0.5}``: sentences (the ``sentences`` chunker's
    boundaries) grouped into chunks, a new chunk starting wherever the next sentence's embedding under ``model``
    is further than ``threshold`` (cosine distance, 0..2) from the previous one's.

    ``revision`` is the model's weights revision (filled in from the packaged model when not given): it is part
    of the spec, hence of the chunk cache key and config id, so new weights never reuse chunks cut by old ones;
    a stored spec whose revision no longer matches the installed weights is refused."""

    kind: Literal["semantic"] = "semantic"
    model: str = Field("static-retrieval-m2v", description="embedder of the sentences (a packaged model name)")
    threshold: float = Field(0.5, ge=0, le=2, description="cosine distance between consecutive sentences above "
                             "which a new chunk starts (lower: more, smaller chunks)")
    revision: str | None = Field(None, description="weights revision of model (default: the installed one)")

    @model_validator(mode="before")
    @classmethod
    def _fill_revision(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("revision") is None:
            data = {**data, "revision": resolve_model(data.get("model") or "static-retrieval-m2v").revision}
        return data

    @model_validator(mode="after")
    def _revision_installed(self):
        installed = resolve_model(self.model).revision
        if self.revision != installed:
            raise ValueError(f"semantic chunker: model {self.model!r} is at revision {installed}, but the spec "
                             f"names revision {self.revision}: its chunks were cut by other weights")
        return self

    def spans(self, text: str) -> list[Span]:
        sentences = sentence_spans(text)
        if len(sentences) < 2:
            return sentences
        model = load_sentence_transformer(self.model)
        vectors = model.encode([text[s:e] for s, e in sentences], convert_to_numpy=True, show_progress_bar=False)
        starts = [0] + [i + 1 for i in semantic_breakpoints(vectors, self.threshold)]
        ends = starts[1:] + [len(sentences)]
        return [(sentences[a][0], sentences[b - 1][1]) for a, b in zip(starts, ends)]

    def describe(self) -> str:
        return f"semantic{self.threshold:g}"

    def explain_cut(self) -> str:
        return f"semantic, {self.model} cosine distance > {self.threshold:g}"
