"""Labels for people: what a config does, spelled out (``recursive 128 tok, overlap 0`` · ``all-MiniLM-L6-v2`` ·
``hybrid RRF``), one column each for the chunker, the model and the retriever.

The label (:attr:`ConfigLabels.text`, :func:`config_label`) is the one name a person reads: leaderboards, log lines,
``explain``, ``promote``, ``production``, ``gate``, MLflow run names and tags all show it. A config's identity is its
id (the hash of its spec) and its stored ``name`` (``recursive128to0 | all-MiniLM-L6-v2 | hybrid-rrf``): both stay
keys in DuckDB and MLflow (``config_id``, ``config_name``) and never change, and commands accept either as input
besides the label and the rank. Labels are rebuilt from the stored spec whenever they are shown, so improving a label
rewrites nothing. Labels contain ``", "`` and ``" | "``: a list of them is joined by :data:`LABEL_SEPARATOR`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NO_MODEL = "–"  # a BM25 config embeds nothing
#: between the labels of a list of configs (a label holds ", " and " | ", never "; ")
LABEL_SEPARATOR = "; "


def pair_label(chunker: str, model: str) -> str:
    """A chunker x model pair in words, as a config's label begins (``recursive 128 tok, overlap 0 |
    all-MiniLM-L6-v2``)."""
    return f"{chunker} | {model}"


@dataclass(frozen=True)
class ConfigLabels:
    """The chunker, the embedding model (:data:`NO_MODEL` for none) and the retriever, in words."""

    chunker: str
    model: str
    retriever: str

    @property
    def text(self) -> str:
        """``chunker | model | retriever`` (the model left out when there is none)."""
        return " | ".join(p for p in (self.chunker, self.model, self.retriever) if p and p != NO_MODEL)

    def __str__(self) -> str:
        return self.text

    @classmethod
    def of(cls, chunker, embedder, retriever) -> "ConfigLabels":
        """Labels of spec objects; a part the sweep file named (``name:``) keeps that name."""
        return cls(chunker.name or chunker.explain(), embedder.label if embedder is not None else NO_MODEL,
                   retriever.name or retriever.explain())

    @classmethod
    def from_stored(cls, spec: dict[str, Any] | None, name: str | None = None) -> "ConfigLabels":
        """Labels of a stored config (``configs.spec_json`` and ``configs.name``).

        The stored spec has no display names, so a part whose stored name differs from its automatic label was
        named in the sweep file and keeps that name. A kind this process does not know (a chunker registered by
        another program) falls back to the stored name.
        """
        from ragbench.chunking import CHUNKERS
        from ragbench.embedding.spec import EmbedderSpec
        from ragbench.retrieval import RETRIEVERS

        spec = spec or {}
        parts = (name or "").split(" | ")
        has_model = spec.get("embedder") is not None
        named = {"chunker": parts[0] if parts else "", "retriever": parts[-1] if len(parts) > 1 else "",
                 "model": parts[1] if has_model and len(parts) > 2 else ""}

        def part(key: str, registry) -> str:
            try:
                s = registry.parse(spec[key])
            except Exception:  # unknown kind, malformed or absent: the stored name is all we have
                return named[key] or str((spec.get(key) or {}).get("kind", ""))
            return named[key] if named[key] and named[key] != s.label else s.explain()

        model = NO_MODEL
        if has_model:
            try:
                model = EmbedderSpec.model_validate(spec["embedder"]).label
            except Exception:
                model = named["model"] or "?"
            if named["model"] and named["model"] != model:
                model = named["model"]
        return cls(part("chunker", CHUNKERS), model, part("retriever", RETRIEVERS))


def config_label(spec: dict[str, Any] | None, name: str | None = None) -> str:
    """The name people read of a stored config (its spec and stored name): :meth:`ConfigLabels.from_stored`'s
    text, the stored name when nothing better is known."""
    return ConfigLabels.from_stored(spec, name).text or name or ""


def join_labels(labels) -> str:
    """Labels as one unambiguous list (:data:`LABEL_SEPARATOR` between them)."""
    return LABEL_SEPARATOR.join(labels)
