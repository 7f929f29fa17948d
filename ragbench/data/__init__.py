"""Datasets: documents, queries and labels that survive re-chunking (:class:`Dataset`), one module per format,
each registering its options model (a :class:`DatasetSpec` subclass that loads it) in :data:`DATASET_FORMATS` on
import."""

from pathlib import Path

from ragbench.core.registry import import_submodules
from ragbench.data.dataset import Dataset, subset, validate_spans
from ragbench.data.holdout import HELDOUT_PREFIX, HoldoutSplit, holdout_split
from ragbench.data.spec import (
    DATASET_FORMATS,
    DatasetOption,
    DatasetSpec,
    DetailTable,
    dataset_options,
    detect_format,
)

import_submodules(__name__)


def load_dataset(spec: DatasetSpec, cache_root: Path | None = None) -> Dataset:
    """Load and validate the dataset ``spec`` names, with its format's :meth:`DatasetSpec.load`.

    ``cache_root`` (a home's ``cache/`` folder) is handed to the format, which may keep a cache there (the folder
    format caches converted documents). A ``holdout`` the labels cannot satisfy fails here, before any heavy work.
    """
    return spec.load_checked(Path(cache_root) if cache_root is not None else None)

__all__ = ["DATASET_FORMATS", "HELDOUT_PREFIX", "Dataset", "DatasetOption", "DatasetSpec", "DetailTable",
           "HoldoutSplit", "dataset_options", "detect_format", "holdout_split", "load_dataset", "subset",
           "validate_spans"]
