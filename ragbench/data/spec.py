"""The dataset section of a sweep config: one options model per dataset format, registered in
:data:`DATASET_FORMATS` by the format's own module (:mod:`.beir`, :mod:`.squad`, :mod:`.folder`).

A format is one class: a :class:`DatasetSpec` subclass whose ``format`` is a ``Literal`` with a default, whose
extra fields are the options only it reads, and whose :meth:`DatasetSpec.load` reads the files::

    @DATASET_FORMATS.register
    class TsvDataset(DatasetSpec):
        format: Literal["tsv"] = "tsv"
        delimiter: str = Field("\\t", description="tsv format: the column separator")

        def load(self, cache_root=None) -> Dataset: ...

``DatasetSpec(...)`` and ``DatasetSpec.model_validate(...)`` build the class of the ``format`` they name (``beir``
when none), so a sweep file's ``dataset:`` mapping, the CLI and the library all get the format's own model, and
``datasets validate`` takes its options from these fields (:func:`dataset_options`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.fields import FieldInfo

from ragbench.core.progress import log
from ragbench.core.registry import Registry
from ragbench.core.spec import Spec
from ragbench.data.dataset import Dataset
from ragbench.data.holdout import HoldoutOptions, holdout_fraction, holdout_split


@dataclass(frozen=True)
class DetailTable:
    """A table of what loading found besides the dataset (e.g. a folder's files by type), for ``datasets
    validate``: a title, column names and rows of strings."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class DatasetSpec(Spec):
    """Where the labelled data is, and the options every format reads. Relative paths are resolved against the
    config file's folder. Subclasses (one per format) set ``format``, add their own options, implement
    :meth:`load`, and register with ``@DATASET_FORMATS.register``."""

    # added after configs were first hashed (they keep their dataset fingerprints)
    dumped_when_set: ClassVar[tuple[str, ...]] = ("questions", "include", "exclude", "holdout", "labels")

    name: str | None = Field(None, description="the dataset's display name (default: the folder or file name)")
    format: str = Field("beir", description="a registered dataset format (beir, squad, folder, ...)")
    path: Path
    split: str = Field("test", description="the qrels split: qrels/SPLIT.tsv of a BEIR folder, SPLIT.json of a "
                       "SQuAD folder")
    queries: Literal["in_qrels", "all"] = Field(
        "in_qrels", description="in_qrels: only queries judged in this split (BEIR convention; one judged only "
        "non-relevant is kept and counted as unlabelled); all: every query, unjudged ones counted as unlabelled. "
        "The folder format keeps every question unless in_qrels is set")
    spans: bool = Field(True, description="load span labels when the dataset has them")
    # read by the squad format only, but accepted by every format and part of every dataset fingerprint since
    # before formats had their own options: moving it would change every stored fingerprint
    squad_documents: Literal["paragraph", "article"] = Field(
        "paragraph", description="squad format: documents are paragraphs or whole articles")
    max_queries: int | None = Field(None, gt=0, description="evaluate a seeded sample of this many queries")
    max_docs: int | None = Field(None, gt=0, description="keep all judged docs plus seeded distractors up to this many")
    seed: int = Field(0, description="seed of the query and document samples and of the held-out split")
    holdout: float | HoldoutOptions | None = Field(
        None, description="hold out this share of the labelled queries (seeded by seed, stratified by class): the "
        "sweep ranks on the rest and measures every config on the held-out set as heldout/<measure>; "
        "{fraction: 0.3, repeats: 20} also reports how stable the pick is over 20 seeded splits")
    labels: Literal["human", "human+assessor"] = Field(
        "human", description="which added judgments (ragbench judge merge: judgments.csv of a folder, "
        "qrels/SPLIT.judged.tsv of BEIR) count besides the dataset's own labels: human = a person's, "
        "human+assessor = also an LLM assessor's; changing it re-judges stored rankings, nothing is re-embedded")

    def __new__(cls, *args: Any, **data: Any):
        # DatasetSpec(format="squad", ...) builds the squad format's own model (its __init__ then validates)
        if cls is DatasetSpec and data:
            cls = _format_class(data.get("format", DATASET_FORMATS.default))
        return super().__new__(cls)

    @model_validator(mode="wrap")
    @classmethod
    def _as_format_class(cls, data: Any, handler):
        """A mapping validated as DatasetSpec becomes the model of its format (errors keep their field)."""
        if cls is DatasetSpec and isinstance(data, dict):
            sub = _format_class(data.get("format", DATASET_FORMATS.default))
            if sub is not cls:
                return sub.model_validate(data)
        return handler(data)

    @model_validator(mode="before")
    @classmethod
    def _options_of_other_formats(cls, data: Any) -> Any:
        """An option only other formats read is an error naming it and them (at its default it is dropped: it
        says nothing)."""
        if not isinstance(data, dict) or cls is DatasetSpec:  # an unknown format: its own error says enough
            return data
        foreign: dict[str, list[str]] = {}
        for key in [k for k in data if k not in cls.model_fields]:
            owners = [f for f in DATASET_FORMATS.kinds if key in DATASET_FORMATS.get(f).model_fields]
            if not owners:
                continue  # unknown everywhere: extra="forbid" names it
            default = DATASET_FORMATS.get(owners[0]).model_fields[key].default
            if data[key] == default or (isinstance(data[key], list) and tuple(data[key]) == default):
                data = {k: v for k, v in data.items() if k != key}
            else:
                foreign.setdefault(" or ".join(owners), []).append(key)
        for owners, keys in foreign.items():
            order = list(DATASET_FORMATS.get(owners.split(" or ")[0]).model_fields)
            keys.sort(key=order.index)
            raise ValueError(f"{', '.join(keys)}: only the {owners} format reads {'it' if len(keys) == 1 else 'them'} "
                             f"(format is {data.get('format', DATASET_FORMATS.default)!r})")
        return data

    @field_validator("holdout")
    @classmethod
    def _holdout(cls, v):
        """A float strictly between 0 and 1; the mapping form with one repeat is that float (the same keys)."""
        if isinstance(v, HoldoutOptions):
            return v.fraction if v.repeats == 1 else v
        if v is not None and not 0 < v < 1:
            raise ValueError(f"holdout must lie strictly between 0 and 1, got {v:g}")
        return v

    @property
    def holdout_fraction(self) -> float | None:
        """The held-out share of either form of ``holdout`` (None: no held-out set)."""
        return holdout_fraction(self.holdout)

    @field_validator("format")
    @classmethod
    def _registered(cls, v):
        if DATASET_FORMATS.kinds and v not in DATASET_FORMATS.kinds:
            raise ValueError(f"unknown dataset format {v!r}; known: {', '.join(DATASET_FORMATS.kinds)}")
        return v

    @classmethod
    def recognizes(cls, path: Path) -> int:
        """How surely ``path``, given without a format (``ragbench datasets validate PATH``), is one of this
        format: 0 not at all (the default), higher wins (:func:`detect_format`)."""
        return 0

    def load(self, cache_root: Path | None = None) -> Dataset:
        """Read and validate the dataset (``cache_root``: a home's ``cache/`` folder, for formats that cache what
        they convert). Use :func:`ragbench.data.load_dataset`, which also checks the holdout."""
        raise NotImplementedError(f"dataset format {self.format!r} does not implement load")

    def load_checked(self, cache_root: Path | None = None) -> Dataset:
        """:meth:`load`, then the ``holdout`` checked (a split the labels cannot satisfy fails here, before any
        heavy work) and logged: what :func:`ragbench.data.load_dataset` does."""
        ds = self.load(cache_root)
        if self.holdout is not None:
            split = holdout_split(ds.queries, ds.qrels, self.holdout_fraction, self.seed)
            log.info("dataset %s: %s", ds.name, split.describe())
        return ds

    def load_with_details(self, cache_root: Path | None = None) -> tuple[Dataset, tuple[DetailTable, ...]]:
        """:meth:`load_checked`, plus tables of what loading found (``datasets validate`` prints them); default
        none."""
        return self.load_checked(cache_root), ()


DATASET_FORMATS: Registry[DatasetSpec] = Registry("dataset format", DatasetSpec, default="beir", key="format")


def _format_class(fmt: Any) -> type[DatasetSpec]:
    """The registered class of ``fmt``; DatasetSpec itself for an unknown one (its validator names the formats)."""
    return DATASET_FORMATS.get(fmt) if isinstance(fmt, str) and fmt in DATASET_FORMATS.kinds else DatasetSpec


def detect_format(path: Path) -> str:
    """The registered format that recognizes ``path`` most surely (:meth:`DatasetSpec.recognizes`; a tie goes to
    the first in name order), else the default format."""
    scores = {fmt: DATASET_FORMATS.get(fmt).recognizes(Path(path)) for fmt in DATASET_FORMATS.kinds}
    best = max(scores, key=scores.get, default=None)
    return best if best is not None and scores[best] > 0 else DATASET_FORMATS.default


@dataclass(frozen=True)
class DatasetOption:
    """One field of the dataset section as a command-line option: the field and the formats that read it."""

    name: str
    field: FieldInfo
    formats: tuple[str, ...]


def dataset_options() -> list[DatasetOption]:
    """Every field of every registered format's options model (common fields first, then each format's own in
    format order), each once, with the formats that read it; a format's own declaration of a shared field wins
    (its description is the specific one)."""
    out: dict[str, DatasetOption] = {}
    for fmt in DATASET_FORMATS.kinds:
        cls = DATASET_FORMATS.get(fmt)
        declared = vars(cls).get("__annotations__", {})
        for name, info in cls.model_fields.items():
            own = name in declared and name != "format"  # each format narrows format to itself: not an option
            field = info if own else DatasetSpec.model_fields.get(name, info)
            prev = out.get(name)
            formats = (prev.formats if prev else ()) + (fmt,)
            out[name] = DatasetOption(name, field if own or prev is None else prev.field, formats)
    return list(out.values())
