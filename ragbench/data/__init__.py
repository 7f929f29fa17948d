"""Datasets: documents, queries and labels that survive re-chunking (:class:`Dataset`), one module per format,
each registering its loader in :data:`LOADERS` on import."""

from ragbench.core.registry import import_submodules
from ragbench.data.dataset import Dataset, subset, validate_spans
from ragbench.data.spec import LOADERS, DatasetSpec, register_loader

import_submodules(__name__)


def load_dataset(spec: DatasetSpec) -> Dataset:
    """Load and validate the dataset ``spec`` names, with the loader of its ``format``."""
    return LOADERS[spec.format](spec)


__all__ = ["LOADERS", "Dataset", "DatasetSpec", "load_dataset", "register_loader", "subset", "validate_spans"]
