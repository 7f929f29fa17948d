"""Rank fusion: several runs of the same chunks (dense, BM25, ...) -> one run.

Both fusions work on run tables (:data:`ragbench.core.schemas.RUN_SCHEMA`) keyed by ``(query_id, chunk_id)``, so the
lists must rank chunks of the same chunk table. A chunk missing from a list contributes nothing to its fused score.

* :func:`rrf` -- reciprocal rank fusion (Cormack et al. 2009)::

      score(d) = sum_i  w_i / (k + rank_i(d))        rank_i 1-based in run i's canonical order; k = 60 by default

  ``rank_i`` is the position in run ``i`` sorted by trec_eval's rule (score descending, ties by ``doc_id`` then
  ``chunk_id`` descending: :func:`~ragbench.core.schemas.canonical_order`), never the rank the producer wrote:
  bm25s, Qdrant and the like list tied hits in their own order, and a fused run must follow from its component
  runs as stored (which are in that order) alone.

* :func:`convex` -- convex combination of per-query min-max normalised scores::

      score(d) = sum_i  w_i * (s_i(d) - min_i) / (max_i - min_i)      (0 when d is missing from list i)

  A list whose scores for a query are all equal (one hit, or ties only) normalises to 1.0 for each of its hits.

Ties of the fused score are broken deterministically: best (smallest) individual rank first, then ``chunk_id``.
This order is the fusion's own; :func:`ragbench.retrieval.pipeline.retrieve` (and the hybrid retriever, before its
depth cut) re-sorts every run into :func:`~ragbench.core.schemas.canonical_order`, trec_eval's rule, which is the
order that is judged and served.

**Zero-score BM25 hits.** :class:`ragbench.retrieval.bm25.BM25Index` already drops hits scoring 0 (no query term
matched), and fusion expects that: a zero-score hit carries no evidence but would still earn ``w / (k + rank)``.
For lists from elsewhere, pass ``drop_nonpositive`` to drop rows with ``score <= 0`` before fusing.

**Qdrant's RRF.** Qdrant's ``Fusion.Rrf(k=K)`` scores ``1 / (K + position)`` with 0-based positions, i.e.
``1 / ((K - 1) + rank)``. So ``rrf(runs, k=60)`` gives exactly the scores of ``Fusion.Rrf(k=61)``:
use :func:`qdrant_rrf_k`. Qdrant's *weighted* RRF scales the rank instead (``1 / (K - 1 + rank / w)``, measured
on qdrant-edge-py 0.9.0), which is not ``w / (k + rank)``; only unweighted fusions agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from ragbench.core.schemas import RUN_SCHEMA, canonical_order, check_run

DEFAULT_RRF_K = 60


def qdrant_rrf_k(k: int = DEFAULT_RRF_K) -> int:
    """The ``k`` of Qdrant's ``Fusion.Rrf`` that reproduces ``rrf(..., k=k)`` (Qdrant ranks from 0)."""
    return k + 1


def _weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if weights is None:
        return [1.0] * n
    w = [float(x) for x in weights]
    if len(w) != n:
        raise ValueError(f"fusion: {len(w)} weights for {n} runs; give one weight per run")
    if any(x < 0 for x in w):
        raise ValueError(f"fusion: weights must be non-negative, got {w}")
    return w


def _flags(flags: bool | Sequence[bool], n: int) -> list[bool]:
    if isinstance(flags, bool):
        return [flags] * n
    f = list(flags)
    if len(f) != n:
        raise ValueError(f"fusion: {len(f)} drop_nonpositive flags for {n} runs")
    return f


def _long(runs: Sequence[pl.DataFrame], drop_nonpositive: bool | Sequence[bool]) -> pl.DataFrame:
    """All runs stacked with a ``list`` column (the run's position in ``runs``), each ranked ``1..n`` in the
    canonical order first (:func:`~ragbench.core.schemas.canonical_order`), so a rank never depends on the order in
    which the producer listed tied hits."""
    if not runs:
        raise ValueError("fusion: no runs to fuse")
    flags = _flags(drop_nonpositive, len(runs))
    parts = []
    for i, run in enumerate(runs):
        run = check_run(run, f"fusion input {i}")
        if flags[i]:
            run = run.filter(pl.col("score") > 0)
        run = canonical_order(run)  # keeps check_run's columns, types and their order
        parts.append(run.with_columns(pl.lit(i, dtype=pl.Int32).alias("list")))
    long = pl.concat(parts)
    clash = long.group_by("query_id", "chunk_id").agg(pl.col("doc_id").n_unique().alias("n")).filter(pl.col("n") > 1)
    if clash.height:
        raise ValueError(f"fusion: chunk {clash['chunk_id'][0]!r} has different doc_ids in different runs; the runs "
                         f"must rank the same chunk table")
    return long


def _fuse(long: pl.DataFrame, contrib: pl.Expr, n_lists: int, depth: int | None) -> pl.DataFrame:
    """Sum per-list contributions in list order (a left fold, so float sums are reproducible), rank, truncate."""
    long = long.with_columns(contrib.alias("c"))
    per_list = [pl.col("c").filter(pl.col("list") == i).sum().alias(f"c{i}") for i in range(n_lists)]
    g = long.group_by("query_id", "chunk_id").agg(pl.col("doc_id").first(), pl.col("rank").min().alias("best"),
                                                  *per_list)
    total = pl.col("c0")
    for i in range(1, n_lists):
        total = total + pl.col(f"c{i}")  # a missing chunk adds 0.0, which leaves a float sum unchanged
    out = (g.with_columns(total.alias("score"))
           .sort(["query_id", "score", "best", "chunk_id"], descending=[False, True, False, False]))
    out = out.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("query_id").alias("rank"))
    if depth is not None:
        if depth < 1:
            raise ValueError(f"fusion: depth must be >= 1, got {depth}")
        out = out.filter(pl.col("rank") <= depth)
    return out.select([pl.col(c).cast(t) for c, t in RUN_SCHEMA.items()])


def rrf(runs: Sequence[pl.DataFrame], weights: Sequence[float] | None = None, k: float = DEFAULT_RRF_K,
        depth: int | None = 100, drop_nonpositive: bool | Sequence[bool] = False) -> pl.DataFrame:
    """Reciprocal rank fusion of ``runs``.

    Parameters
    ----------
    runs
        Run tables (``RUN_SCHEMA``) over the same chunk table.
    weights
        One non-negative weight per run (default: all 1).
    k
        The RRF constant: ``score(d) = sum_i w_i / (k + rank_i(d))`` with 1-based ranks. Must be >= 0.
    depth
        Keep the best ``depth`` fused chunks per query (``None``: keep all).
    drop_nonpositive
        One flag for all runs, or one per run: drop that run's rows with ``score <= 0`` before fusing (BM25 lists
        not produced by :class:`~ragbench.retrieval.base.BM25Index`, which drops them already).

    Returns
    -------
    A run ranked by fused score, ties broken by best individual rank, then ``chunk_id``.
    """
    if k < 0:
        raise ValueError(f"rrf: k must be >= 0, got {k}")
    w = _weights(weights, len(runs))
    long = _long(runs, drop_nonpositive)
    weight = pl.col("list").replace_strict(list(range(len(w))), w, return_dtype=pl.Float64)
    return _fuse(long, weight / (float(k) + pl.col("rank").cast(pl.Float64)), len(runs), depth)


def convex(runs: Sequence[pl.DataFrame], weights: Sequence[float] | None = None, depth: int | None = 100,
           normalization: str = "minmax", drop_nonpositive: bool | Sequence[bool] = False) -> pl.DataFrame:
    """Convex combination of normalised scores: ``score(d) = sum_i w_i * norm_i(s_i(d))``, 0 when d is missing.

    ``normalization="minmax"``: per query and per list, ``(s - min) / (max - min)`` over that list's returned
    scores; a list whose scores are all equal for the query normalises to 1.0. ``"none"`` uses raw scores (only
    meaningful when the lists share a scale). Ties as in :func:`rrf`.
    """
    if normalization not in ("minmax", "none"):
        raise ValueError(f"convex: normalization must be 'minmax' or 'none', got {normalization!r}")
    w = _weights(weights, len(runs))
    long = _long(runs, drop_nonpositive)
    s = pl.col("score")
    if normalization == "minmax":
        lo, hi = s.min().over("query_id", "list"), s.max().over("query_id", "list")
        s = pl.when(hi > lo).then((s - lo) / (hi - lo)).otherwise(1.0)
    weight = pl.col("list").replace_strict(list(range(len(w))), w, return_dtype=pl.Float64)
    return _fuse(long, weight * s, len(runs), depth)
