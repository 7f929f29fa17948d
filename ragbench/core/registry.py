"""Registries: the open seams of the pipeline.

A strategy (a chunker, a first-stage retriever, a reranker, a dataset format, a rank measure) is added by writing
one module that defines its spec and implementation side by side and registers itself::

    @CHUNKERS.register
    class Paragraphs(ChunkerSpec):
        kind: Literal["paragraphs"] = "paragraphs"
        def spans(self, text): ...

Nothing central lists the kinds: a config field typed ``CHUNKERS.field`` accepts any registered kind and validates
the entry with that kind's own spec class (errors keep their location, e.g. ``chunkers.1.size``).

Each registered class declares the version of its behaviour (``version: ClassVar[int] = 1``, inherited from
:class:`~ragbench.core.spec.Spec`; a rank measure: ``@rank_measure("name", version=1)``). Bump it when a change
alters what the component produces: the keys that depend on it change (chunks, a config's evaluation key, one
measure's stored values) and only those results are computed again. tests/integration/test_golden_values.py fails
on a change of the demo's values without a bump.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Annotated, Any, Generic, TypeVar

from pydantic import SerializeAsAny, WrapValidator

T = TypeVar("T")


class Registry(Generic[T]):
    """Kinds -> spec classes (subclasses of ``base``), keyed by each class's default of the field ``key``
    (``kind``; ``format`` for dataset formats). ``default`` is the kind of an entry that names none (None: the
    field is required)."""

    def __init__(self, what: str, base: type[T], default: str | None = None, key: str = "kind"):
        self.what, self.base, self.default, self.key = what, base, default, key
        self._kinds: dict[str, type[T]] = {}

    def register(self, cls: type[T]) -> type[T]:
        """Class decorator: make ``cls`` the implementation of its ``kind`` (a later registration replaces it)."""
        kind = cls.model_fields[self.key].default  # type: ignore[attr-defined]
        if not isinstance(kind, str):
            raise TypeError(f"{cls.__name__} needs a string default for {self.key!r} to register as a {self.what}")
        self._kinds[kind] = cls
        return cls

    def unregister(self, kind: str) -> None:
        self._kinds.pop(kind, None)

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted(self._kinds))

    def get(self, kind: str) -> type[T]:
        if kind not in self._kinds:
            raise KeyError(f"unknown {self.what} kind {kind!r}; known: {', '.join(self.kinds)}")
        return self._kinds[kind]

    def parse(self, value: Any) -> T:
        """Validate a mapping with its kind's spec class (an instance of ``base`` passes unchanged)."""
        if isinstance(value, self.base):
            return value
        if not isinstance(value, dict):
            raise ValueError(f"a {self.what} is a mapping with a {self.key!r} ({', '.join(self.kinds)})")
        kind = value.get(self.key, self.default)
        if kind not in self._kinds:
            raise ValueError(f"unknown {self.what} kind {kind!r}; expected one of: {', '.join(self.kinds)}")
        return self._kinds[kind].model_validate(value)  # type: ignore[attr-defined]

    @property
    def field(self) -> Any:
        """The annotation of a config field holding one of these specs (serialised with its own fields)."""
        return SerializeAsAny[Annotated[self.base, WrapValidator(lambda v, _handler: self.parse(v))]]


def import_submodules(package: str) -> None:
    """Import every module of ``package`` so that the strategies in it register themselves."""
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")
