"""Datasets: documents, queries and labels that survive re-chunking (:class:`Dataset`), one module per format,
each registering its loader in :data:`LOADERS` on import."""

import inspect
from pathlib import Path

from ragbench.core.progress import log
from ragbench.core.registry import import_submodules
from ragbench.data.dataset import Dataset, subset, validate_spans
from ragbench.data.holdout import HELDOUT_PREFIX, HoldoutSplit, holdout_split
from ragbench.data.spec import LOADERS, DatasetSpec, register_loader

import_submodules(__name__)


def load_dataset(spec: DatasetSpec, cache_root: Path | None = None) -> Dataset:
    """Load and validate the dataset ``spec`` names, with the loader of its ``format``.

    ``cache_root`` (a home's ``cache/`` folder) is handed to loaders that keep a cache (the folder format caches
    converted documents there). A ``holdout`` the labels cannot satisfy fails here, before any heavy work.
    """
    loader = LOADERS[spec.format]
    if cache_root is not None and "cache_root" in inspect.signature(loader).parameters:
        ds = loader(spec, cache_root=Path(cache_root))
    else:
        ds = loader(spec)
    if spec.holdout is not None:
        split = holdout_split(ds.queries, ds.qrels, spec.holdout, spec.seed)
        log.info("dataset %s: %s", ds.name, split.describe())
    return ds


__all__ = ["HELDOUT_PREFIX", "LOADERS", "Dataset", "DatasetSpec", "HoldoutSplit", "holdout_split", "load_dataset",
           "register_loader", "subset", "validate_spans"]
