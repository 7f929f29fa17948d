"""The base of every spec: a frozen pydantic model whose canonical dict is its identity.

A spec's id (``spec_id``) is the hash of :meth:`Spec.canonical`: the content-addressed cache keys, collection names
and config ids are all built from it, so a spec's fields are part of the cache format — add a field with care.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_serializer

from ragbench.core.hashing import stable_hash


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: fields added after specs were first hashed: dumped only when set (not at their default), so existing
    #: specs keep their ids, config ids and sweep spec hashes (tests/test_golden_keys.py)
    dumped_when_set: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _drop_unset_new_fields(self, handler):
        data = handler(self)
        for f in self.dumped_when_set:
            if f in data and getattr(self, f) == type(self).model_fields[f].default:
                del data[f]
        return data

    def canonical(self) -> dict[str, Any]:
        """The spec as a plain dict without its display name: what identifies it."""
        return self.model_dump(mode="json", exclude={"name"})

    @property
    def spec_id(self) -> str:
        return stable_hash(self.canonical())
