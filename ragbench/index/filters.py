"""Metadata filters: one small spec -> a Qdrant Edge filter, a qdrant-client filter, and an allowed-doc set for BM25.

The spec is a mapping ``{field: condition}``; all fields must hold (AND). A condition is

* a scalar (``str``, ``int``, ``bool``): equality (``{"tenant": "public"}``);
* a non-empty list of strings or of integers: any of them (``{"doc_type": ["api", "reference"]}``);
* a range ``{"gte"|"gt"|"lte"|"lt": bound}``: numeric bounds compare numbers, string bounds are ISO-8601
  dates/datetimes compared as datetimes (naive ones are UTC), as Qdrant's ``RangeDateTime`` does
  (``{"date": {"gte": "2024-04-01"}}``).

A document metadata value that is a list matches when any element matches (Qdrant's array semantics). Dotted field
names address nested metadata objects.

**Payload keys.** Each point carries the document's ``metadata`` JSON object under the payload key ``meta``
(:data:`META_KEY`), so the filter on field ``doc_type`` reads the payload path ``meta.doc_type``; ``chunk_id`` and
``doc_id`` stay at the top level and can never collide with a metadata field. :func:`chunk_payloads` builds them.

**BM25.** bm25s has no payload filter: either post-filter a run deep enough to still hold ``k`` allowed hits
(:func:`post_filter`; exact when the list covers the whole corpus), or pass :func:`bm25_weight_mask` as bm25s'
``retrieve(..., weight_mask=...)`` (masked chunks score 0 and are dropped as non-matching).

**The silent failure.** A filtered search can return fewer than ``k`` results (few points match, or an ANN graph
cut by the filter); :func:`filtered_shortfall` counts the queries that came back short.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import numpy as np
import polars as pl

from ragbench.core.schemas import check_run, texts_at

META_KEY = "meta"
_RANGE_OPS = ("gte", "gt", "lte", "lt")


@dataclass(frozen=True)
class Condition:
    """One field's condition: ``kind`` is ``"value"``, ``"any"`` or ``"range"``."""

    field: str
    kind: str
    value: Any = None                      # the scalar for "value", a tuple for "any"
    bounds: tuple[tuple[str, Any], ...] = ()  # (op, bound) pairs for "range"
    dates: bool = False                    # range bounds are datetimes

    @property
    def key(self) -> str:
        """The payload path this condition reads."""
        return f"{META_KEY}.{self.field}"


def _scalar_ok(v) -> bool:
    return isinstance(v, (str, bool, int))


def _parse_dt(v: str, where: str) -> datetime:
    try:
        d = datetime.fromisoformat(v)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {v!r} is not an ISO-8601 date or datetime") from None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def parse_filter(spec: Mapping[str, Any]) -> tuple[Condition, ...]:
    """Validate a filter spec; errors name the field and what is wrong. An empty spec means no filter."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"filter: expected a mapping {{field: condition}}, got {type(spec).__name__}")
    out = []
    for field, cond in spec.items():
        where = f"filter field {field!r}"
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"filter: field names must be non-empty strings, got {field!r}")
        if isinstance(cond, Mapping):
            bad = [op for op in cond if op not in _RANGE_OPS]
            if bad or not cond:
                raise ValueError(f"{where}: a range takes {', '.join(_RANGE_OPS)}; got {sorted(map(str, cond))}")
            values = list(cond.values())
            if all(isinstance(v, str) for v in values):
                for v in values:
                    _parse_dt(v, where)  # validate now; Qdrant takes the strings as they are
                out.append(Condition(field, "range", bounds=tuple(cond.items()), dates=True))
            elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                out.append(Condition(field, "range", bounds=tuple((op, float(v)) for op, v in cond.items())))
            else:
                raise ValueError(f"{where}: range bounds must be all numbers or all ISO dates, got {values}")
        elif isinstance(cond, (list, tuple)):
            if not cond:
                raise ValueError(f"{where}: an empty list matches nothing; remove the field or give values")
            if not (all(isinstance(v, str) for v in cond)
                    or all(isinstance(v, int) and not isinstance(v, bool) for v in cond)):
                raise ValueError(f"{where}: a list must hold only strings or only integers (Qdrant MatchAny), "
                                 f"got {list(cond)}")
            out.append(Condition(field, "any", value=tuple(cond)))
        elif _scalar_ok(cond):
            out.append(Condition(field, "value", value=cond))
        else:
            raise ValueError(f"{where}: expected a string, integer, boolean, list or range, got "
                             f"{type(cond).__name__} {cond!r} (floats cannot be matched exactly; use a range)")
    return tuple(out)


# ---------------------------------------------------------------- engines
def edge_filter(spec: Mapping[str, Any]):
    """The spec as a ``qdrant_edge.Filter`` over ``meta.<field>`` payload keys (``None`` for an empty spec)."""
    from qdrant_edge import FieldCondition, Filter, MatchAny, MatchValue, RangeDateTime, RangeFloat

    must = []
    for c in parse_filter(spec):
        if c.kind == "value":
            must.append(FieldCondition(key=c.key, match=MatchValue(c.value)))
        elif c.kind == "any":
            must.append(FieldCondition(key=c.key, match=MatchAny(list(c.value))))
        else:
            rng = (RangeDateTime if c.dates else RangeFloat)(**dict(c.bounds))
            must.append(FieldCondition(key=c.key, range=rng))
    return Filter(must=must) if must else None


def client_filter(spec: Mapping[str, Any]):
    """The spec as a ``qdrant_client.models.Filter`` (``None`` for an empty spec)."""
    from qdrant_client import models

    must = []
    for c in parse_filter(spec):
        if c.kind == "value":
            must.append(models.FieldCondition(key=c.key, match=models.MatchValue(value=c.value)))
        elif c.kind == "any":
            must.append(models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.value))))
        else:
            rng = (models.DatetimeRange if c.dates else models.Range)(**dict(c.bounds))
            must.append(models.FieldCondition(key=c.key, range=rng))
    return models.Filter(must=must) if must else None


def index_filter(index, spec: Mapping[str, Any]):
    """The filter object ``index.search(..., query_filter=...)`` expects for this engine (Edge or client)."""
    from ragbench.index.qdrant import ClientIndex

    return client_filter(spec) if isinstance(index, ClientIndex) else edge_filter(spec)


# ---------------------------------------------------------------- payloads and the Python-side matcher
def doc_metadata(corpus: pl.DataFrame) -> dict[str, dict]:
    """``doc_id -> metadata dict`` parsed from the corpus ``metadata`` JSON column."""
    out = {}
    for doc_id, meta in corpus.select("doc_id", "metadata").iter_rows():
        obj = json.loads(meta) if meta else {}
        if not isinstance(obj, dict):
            raise ValueError(f"document {doc_id!r}: metadata must be a JSON object, got {type(obj).__name__}")
        out[doc_id] = obj
    return out


class ChunkPayloads:
    """Qdrant payloads of rows of ``chunks``: ``{"chunk_id", "doc_id", "meta": <doc metadata>}``, made for the rows
    a batch asks for (payload dicts for a whole table held ~400 bytes per chunk)."""

    def __init__(self, chunks: pl.DataFrame, corpus: pl.DataFrame):
        self._chunk_ids, self._doc_ids = chunks["chunk_id"], chunks["doc_id"]
        self._meta = {d: m for d, m in doc_metadata(corpus).items() if m}  # only documents that have metadata

    def at(self, rows: list[int]) -> list[dict]:
        return [{"chunk_id": c, "doc_id": d, META_KEY: self._meta.get(d, {})}
                for c, d in zip(texts_at(self._chunk_ids, rows), texts_at(self._doc_ids, rows))]


def chunk_payloads(chunks: pl.DataFrame, corpus: pl.DataFrame) -> list[dict]:
    """Qdrant payloads for every row of ``chunks``, in row order (:class:`ChunkPayloads`)."""
    return ChunkPayloads(chunks, corpus).at(list(range(chunks.height)))


def _lookup(meta: dict, field: str):
    cur: Any = meta
    for part in field.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _matches_one(c: Condition, v) -> bool:
    if v is None:
        return False
    if c.kind == "value":
        return v == c.value
    if c.kind == "any":
        return v in c.value
    if c.dates:
        if not isinstance(v, str):
            return False
        try:
            x = _parse_dt(v, "")
        except ValueError:
            return False
        bounds = [(op, _parse_dt(b, "")) for op, b in c.bounds]
    else:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return False
        x, bounds = float(v), list(c.bounds)
    return all({"gte": x >= b, "gt": x > b, "lte": x <= b, "lt": x < b}[op] for op, b in bounds)


def matches(meta: dict, conditions: Iterable[Condition]) -> bool:
    """Whether one document's metadata satisfies every condition (list values: any element)."""
    for c in conditions:
        v = _lookup(meta, c.field)
        values = v if isinstance(v, list) else [v]
        if not any(_matches_one(c, x) for x in values):
            return False
    return True


def check_fields(corpus: pl.DataFrame, spec: Mapping[str, Any]) -> None:
    """Refuse a filter on a field no document has (a typo would otherwise silently match nothing)."""
    meta = doc_metadata(corpus)
    known = sorted({k for m in meta.values() for k in m})
    for c in parse_filter(spec):
        if not any(_lookup(m, c.field) is not None for m in meta.values()):
            raise ValueError(f"filter field {c.field!r}: no document has it in its metadata; known fields: "
                             f"{', '.join(known) or '(none)'}")


def allowed_doc_ids(corpus: pl.DataFrame, spec: Mapping[str, Any]) -> set[str]:
    """Documents whose metadata satisfies the spec (the same semantics as the Qdrant filters)."""
    conditions = parse_filter(spec)
    return {d for d, m in doc_metadata(corpus).items() if matches(m, conditions)}


def bm25_weight_mask(chunks: pl.DataFrame, allowed: set[str]) -> np.ndarray:
    """A bm25s ``weight_mask`` (1.0 for chunks of allowed documents, else 0.0) in chunk-table row order."""
    return chunks["doc_id"].is_in(list(allowed)).cast(pl.Float64).to_numpy()


def post_filter(run: pl.DataFrame, allowed: set[str], depth: int | None = None) -> pl.DataFrame:
    """Keep the rows of allowed documents, re-ranked 1..n per query, truncated to ``depth``."""
    run = check_run(run, "post_filter")
    out = (run.filter(pl.col("doc_id").is_in(list(allowed))).sort("query_id", "rank")
           .with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int32).over("query_id").alias("rank")))
    return out.filter(pl.col("rank") <= depth) if depth is not None else out


SHORTFALL_SCHEMA = {"query_id": pl.String, "returned": pl.Int64, "shortfall": pl.Boolean}


def filtered_shortfall(run: pl.DataFrame, k: int, query_ids: list[str] | None = None) -> pl.DataFrame:
    """Per query: how many results (of the top ``k``) came back, and whether that is fewer than ``k``.

    Pass ``query_ids`` so that a query with *no* result at all (absent from the run) is counted, with 0.
    """
    if k < 1:
        raise ValueError(f"filtered_shortfall: k must be >= 1, got {k}")
    counts = run.filter(pl.col("rank") <= k).group_by("query_id").len("returned")
    ids = query_ids if query_ids is not None else sorted(set(run["query_id"].to_list()))
    base = pl.DataFrame({"query_id": list(ids)}, schema={"query_id": pl.String})
    return (base.join(counts, on="query_id", how="left")
            .with_columns(pl.col("returned").fill_null(0).cast(pl.Int64))
            .with_columns((pl.col("returned") < k).alias("shortfall"))
            .select([pl.col(c).cast(t) for c, t in SHORTFALL_SCHEMA.items()]))
