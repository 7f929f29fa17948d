"""Rank measures: one module per measure, each registering itself in :data:`RANK_MEASURES` on import."""

from ragbench.core.registry import import_submodules
from ragbench.evaluation.measures.base import (MEASURE_VERSIONS, RANK_MEASURES, UNJUDGED, Measure, gain,
                                               measure_version, rank_measure)

import_submodules(__name__)

__all__ = ["MEASURE_VERSIONS", "RANK_MEASURES", "UNJUDGED", "Measure", "gain", "measure_version", "rank_measure"]
