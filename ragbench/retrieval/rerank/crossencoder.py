"""A sentence-transformers ``CrossEncoder`` scoring ``(query, chunk)`` pairs, for users whose cross-encoder weights
are reachable (none can be installed offline on this project's machines)."""

from __future__ import annotations

from typing import ClassVar, Literal

import numpy as np

from ragbench.retrieval.rerank.base import RERANKERS, RerankSpec


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``; ``model_name`` resolves like an embedder name (packaged, local
    folder, or local Hugging Face cache). Extra keyword arguments go to ``CrossEncoder`` (e.g. ``num_labels=1``)."""

    def __init__(self, model_name: str, batch_size: int = 32, max_length: int | None = None, **kwargs):
        from sentence_transformers import CrossEncoder

        from ragbench.core.errors import ModelError
        from ragbench.core.models import resolve_model

        m = resolve_model(model_name)
        try:
            self.model = CrossEncoder(str(m.path) if m.path else m.name, max_length=max_length, **kwargs)
        except Exception as e:
            raise ModelError(f"cross-encoder {model_name!r} failed to load from {m.path or m.name}: {e}") from e
        self.batch_size = batch_size
        self.name = f"crossencoder:{model_name}"

    def prepare(self, query_texts: list[str], chunk_texts: list[str]) -> None:
        return None

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        out = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size, convert_to_numpy=True,
                                 show_progress_bar=False)
        out = np.asarray(out, dtype=np.float64)
        if out.ndim != 1:
            raise ValueError(f"{self.name}: expected one score per pair, got shape {out.shape} (a cross-encoder "
                             f"with several labels cannot rank; load it with num_labels=1)")
        return out



@RERANKERS.register
class CrossEncoderRerank(RerankSpec):
    kind: Literal["crossencoder"] = "crossencoder"
    #: the common MS MARCO cross-encoder (a local folder or Hugging Face cache; no package ships it)
    default_model: ClassVar[str] = "cross-encoder/ms-marco-MiniLM-L-6-v2"

    def build(self, vector_cache) -> CrossEncoderReranker:
        return CrossEncoderReranker(self.model)
