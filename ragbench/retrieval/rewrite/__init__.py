"""Query rewriting by an LLM before the first stage: one module per kind, each registering its spec in
:data:`REWRITERS` on import. The search itself (embed each variant, run the first stage, fuse) is composed in
:func:`ragbench.retrieval.pipeline.first_stage`."""

from ragbench.core.registry import import_submodules
from ragbench.retrieval.rewrite.base import REWRITERS, QueryLLM, RewriteSpec, Variant

import_submodules(__name__)

from ragbench.retrieval.rewrite.hyde import HydeRewrite  # noqa: E402
from ragbench.retrieval.rewrite.multi_query import MultiQueryRewrite  # noqa: E402

__all__ = ["REWRITERS", "QueryLLM", "RewriteSpec", "Variant", "HydeRewrite", "MultiQueryRewrite"]
