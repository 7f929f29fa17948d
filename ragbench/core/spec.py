"""The base of every spec: a frozen pydantic model whose canonical dict is its identity.

A spec's id (``spec_id``) is the hash of :meth:`Spec.canonical`: the content-addressed cache keys, collection names
and config ids are all built from it, so a spec's fields are part of the cache format — add a field with care.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ragbench.core.hashing import stable_hash


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def canonical(self) -> dict[str, Any]:
        """The spec as a plain dict without its display name: what identifies it."""
        return self.model_dump(mode="json", exclude={"name"})

    @property
    def spec_id(self) -> str:
        return stable_hash(self.canonical())
