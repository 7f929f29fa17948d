"""The base of every spec: a frozen pydantic model whose canonical dict is its identity.

A spec's id (``spec_id``) is the hash of :meth:`Spec.canonical`: the content-addressed cache keys, collection names
and config ids are all built from it, so a spec's fields are part of the cache format — add a field with care.

A spec class's :attr:`Spec.version` is the version of its *behaviour* (what a chunker cuts, what a retriever
ranks): bump it when a code change alters what the component produces. It is folded into the keys that depend on
that behaviour (the chunk-cache key, a config's evaluation key) only when it is above 1, so keys made before
versions existed stay byte-identical; it never enters ``spec_id`` (a new version is the same config, evaluated
again, not a new one).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_serializer

from ragbench.core.hashing import stable_hash


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: fields added after specs were first hashed: dumped only when set (not at their default), so existing
    #: specs keep their ids, config ids and sweep spec hashes (tests/integration/test_golden_keys.py)
    dumped_when_set: ClassVar[tuple[str, ...]] = ()
    #: the behaviour version of this component (see the module docstring); inherited, overridden per class
    version: ClassVar[int] = 1

    @model_serializer(mode="wrap")
    def _drop_unset_new_fields(self, handler):
        data = handler(self)
        for f in self.dumped_when_set:
            if f in data and getattr(self, f) == type(self).model_fields[f].default:
                del data[f]
        return data

    @property
    def behaviour_version(self) -> int:
        """The version this instance's output is made with: the class's :attr:`version` (a class whose output also
        depends on a field, such as a chunker's contextual prefix, adds that part's version)."""
        return type(self).version

    def canonical(self) -> dict[str, Any]:
        """The spec as a plain dict without its display name: what identifies it."""
        return self.model_dump(mode="json", exclude={"name"})

    @property
    def spec_id(self) -> str:
        return stable_hash(self.canonical())


def versions_above_one(components: dict[str, "Spec | None"]) -> dict[str, int]:
    """``label -> version`` of the ``components`` whose :attr:`Spec.behaviour_version` is above 1 (None entries
    skipped): what a key folds in, empty while every version is 1 (so the key is the one made before versions
    existed)."""
    return {label: c.behaviour_version for label, c in components.items() if c is not None and c.behaviour_version > 1}
