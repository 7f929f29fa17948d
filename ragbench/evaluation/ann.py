"""ANN fidelity: how much of a dense config's top k is lost to the HNSW index rather than to the model or chunker.

For each ``hnsw_ef`` the same queries are searched twice, approximately (HNSW) and exactly (brute force), and::

    recall_vs_exact@k = mean over queries of |ANN top-k  ∩  exact top-k| / min(k, |exact top-k|)

(ids compared, not scores). Searches use ``limit = depth`` (default ``k``) and the top ``k`` is compared, because
Qdrant explores ``max(hnsw_ef, limit)`` candidates: a retriever fetching 100 chunks gets ef >= 100 whatever it asks
for, so measure at the depth the config really searches with. Latency is wall time of the batched search divided by
the number of queries, after one warm-up search.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from pydantic import Field

from ragbench.core.spec import Spec


class AnnFidelitySpec(Spec):
    """For every dense config, recall@k of HNSW results against exact search, over a sweep of ``hnsw_ef``."""

    enabled: bool = True
    k: int = Field(10, gt=0)
    ef_values: tuple[int, ...] = (16, 32, 64, 128, 256)

ANN_SCHEMA = {"hnsw_ef": pl.Int64, "configured": pl.Boolean, "k": pl.Int64, "depth": pl.Int64,
              "recall_vs_exact": pl.Float64, "ms_per_query_ann": pl.Float64, "ms_per_query_exact": pl.Float64}
DEFAULT_EF_VALUES = (16, 32, 64, 128, 256)


def recall_vs_exact(ann_ids: Sequence[np.ndarray], exact_ids: Sequence[np.ndarray], k: int) -> np.ndarray:
    """Per query ``|ANN top-k ∩ exact top-k| / min(k, |exact top-k|)`` (1.0 when the exact list is empty)."""
    if len(ann_ids) != len(exact_ids):
        raise ValueError(f"recall_vs_exact: {len(ann_ids)} ANN result lists for {len(exact_ids)} exact ones")
    out = np.empty(len(exact_ids))
    for i, (a, e) in enumerate(zip(ann_ids, exact_ids)):
        truth = set(np.asarray(e)[:k].tolist())
        out[i] = len(truth & set(np.asarray(a)[:k].tolist())) / len(truth) if truth else 1.0
    return out


def _timed_search(index, collection, queries, model_key, limit, **kw):
    t0 = time.perf_counter()
    hits = index.search(collection, queries, model_key, limit, **kw)
    return hits, 1000 * (time.perf_counter() - t0) / max(len(queries), 1)


@dataclass(frozen=True)
class EfSweep:
    """What :func:`ann_fidelity` measures.

    Attributes
    ----------
    k, depth
        Compare the top ``k`` of searches with ``limit = depth`` (``None``: ``k``; must be >= ``k``).
    ef_values
        The ``hnsw_ef`` values swept.
    configured_ef, include_configured
        Also measure the config's own ``hnsw_ef`` (``None`` = the engine default), flagged ``configured=True``;
        ``hnsw_ef`` is null for the default.
    """

    k: int = 10
    ef_values: Sequence[int] = DEFAULT_EF_VALUES
    depth: int | None = None
    configured_ef: int | None = None
    include_configured: bool = True


def ann_fidelity(index, collection: str, query_vectors: np.ndarray, model_key: str,
                 sweep: EfSweep = EfSweep()) -> pl.DataFrame:
    """The ``hnsw_ef`` sweep table of one collection (see the module docstring).

    Parameters
    ----------
    index, collection, model_key
        An :class:`~ragbench.index.qdrant.EdgeIndex` or :class:`~ragbench.index.qdrant.ClientIndex` and a complete
        collection in it (searched through their public ``search``; the model key is checked as for any search).
    query_vectors
        ``(n_queries, dim)`` query embeddings of the collection's model.
    sweep
        The cutoff ``k``, search depth and ``hnsw_ef`` values measured (:class:`EfSweep`).

    Returns
    -------
    :data:`ANN_SCHEMA` rows, the swept values in order, then the configured one.
    """
    k, ef_values, configured_ef = sweep.k, sweep.ef_values, sweep.configured_ef
    depth = k if sweep.depth is None else sweep.depth
    if k < 1 or depth < k:
        raise ValueError(f"ann_fidelity: need 1 <= k <= depth, got k={k}, depth={depth}")
    if any(int(e) < 1 for e in ef_values):
        raise ValueError(f"ann_fidelity: hnsw_ef values must be positive, got {list(ef_values)}")
    q = np.asarray(query_vectors, dtype=np.float32)
    if q.ndim != 2 or len(q) == 0:
        raise ValueError(f"ann_fidelity: query_vectors must be a non-empty 2-D array, got shape {q.shape}")
    index.search(collection, q[:1], model_key, depth)  # warm-up: open the shard, fault the graph into memory
    exact, ms_exact = _timed_search(index, collection, q, model_key, depth, exact=True)
    settings = [(int(e), False) for e in ef_values] + ([(configured_ef, True)] if sweep.include_configured else [])
    rows = []
    for ef, configured in settings:
        ann, ms = _timed_search(index, collection, q, model_key, depth, hnsw_ef=ef)
        rows.append((ef, configured, k, depth, float(recall_vs_exact(ann.ids, exact.ids, k).mean()), ms, ms_exact))
    return pl.DataFrame(rows, schema=ANN_SCHEMA, orient="row")


def format_table(table: pl.DataFrame) -> str:
    """A plain-text rendering of an :func:`ann_fidelity` table."""
    lines = [f"{'hnsw_ef':>10}  {'recall@k':>8}  {'ms/q ANN':>9}  {'ms/q exact':>10}"]
    for r in table.iter_rows(named=True):
        ef = "default" if r["hnsw_ef"] is None else str(r["hnsw_ef"])
        ef += "*" if r["configured"] else ""
        lines.append(f"{ef:>10}  {r['recall_vs_exact']:8.4f}  {r['ms_per_query_ann']:9.3f}  "
                     f"{r['ms_per_query_exact']:10.3f}")
    return "\n".join(lines)
