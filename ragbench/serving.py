"""Compatibility path: promoted MLflow models pickle ``ragbench.serving.RetrieverModel`` by this module path, so
it must stay importable. The code lives in :mod:`ragbench.promotion.serving`."""

from ragbench.promotion.serving import *  # noqa: F401,F403
from ragbench.promotion.serving import ProductionRetriever, RetrieverModel  # noqa: F401
