"""Query classes: the dataset's own class wins; otherwise the first matching rule assigns one.

A rule is a ``(class_name, regex)`` pair, tried in order with ``re.search``; a query matching no rule gets the
``default`` class. The default rule set has one rule, ``identifier``: the query contains a token a user copies
verbatim from logs, configs or docs (BM25's strength; a dense model tends to blur it), e.g.

=====================  =================================================
``NMB-4013``           error codes: capitals, a dash, digits
``v3.4.1``, ``3.4.1``  versions (a leading ``v``, or three numeric parts)
``queue.max_inflight`` dotted config keys (segments of 2+ characters)
``max_inflight_bytes`` snake_case, ``ERR_CONN_RESET`` CONSTANT_CASE
``--drain-timeout``    command-line flags
``maxRetries``         camelCase
``/v2/cluster/tenants`` URL / file paths with two or more segments
``0x1f``, ``9f86d081`` hex: ``0x...``, or 8+ hex chars mixing digits and letters
```` `anything` ````    text in backticks
=====================  =================================================
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import polars as pl
from pydantic import Field

from ragbench.core.spec import Spec


class QueryClassSpec(Spec):
    """Classes for queries the dataset leaves unclassified: first matching ``(class, regex)`` rule wins."""

    rules: tuple[tuple[str, str], ...] | None = Field(None, description="default: identifier-like tokens")
    default: str = "natural"
    override: bool = False

IDENTIFIER_PATTERN = "|".join([
    r"\b[A-Z][A-Z0-9]+-\d{2,}\b",                               # NMB-4013, HTTP-429
    r"\bv\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+\b",                   # v3.4, v3.4.1, 3.4.1
    r"\b[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+\b",  # queue.max_inflight_bytes
    r"\b[A-Za-z0-9]+_[A-Za-z0-9_]+\b",                          # snake_case, ERR_CONN_RESET
    r"(?<![\w-])--[A-Za-z][A-Za-z0-9-]*",                       # --drain-timeout
    r"\b[a-z]+[A-Z][A-Za-z0-9]*\b",                              # camelCase
    r"(?<![\w/])/[\w{}.-]+(?:/[\w{}.-]+)+",                      # /v2/cluster/tenants
    r"\b0x[0-9A-Fa-f]+\b|\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b",  # hex ids
    r"`[^`\n]+`",                                                # `code`
])

DEFAULT_RULES: tuple[tuple[str, str], ...] = (("identifier", IDENTIFIER_PATTERN),)
DEFAULT_CLASS = "natural"


def compile_rules(rules: Sequence[tuple[str, str]]) -> list[tuple[str, re.Pattern]]:
    """Compile ``(class_name, regex)`` pairs; a bad pair raises ``ValueError`` naming it."""
    out = []
    for i, rule in enumerate(rules):
        if not (isinstance(rule, (tuple, list)) and len(rule) == 2 and all(isinstance(x, str) for x in rule)):
            raise ValueError(f"query class rule {i}: expected a (class_name, regex) pair of strings, got {rule!r}")
        name, pattern = rule
        if not name.strip():
            raise ValueError(f"query class rule {i}: empty class name")
        try:
            out.append((name, re.compile(pattern)))
        except re.error as e:
            raise ValueError(f"query class rule {i} ({name!r}): invalid regex {pattern!r}: {e}") from None
    return out


def classify(text: str, rules: Sequence[tuple[str, str]] | None = None, default: str = DEFAULT_CLASS) -> str:
    """The class of one query text under ``rules`` (first match wins; ``default`` when none matches)."""
    for name, rx in compile_rules(DEFAULT_RULES if rules is None else rules):
        if rx.search(text):
            return name
    return default


def assign_classes(queries: pl.DataFrame, rules: Sequence[tuple[str, str]] | None = None,
                   default: str = DEFAULT_CLASS, override: bool = False) -> pl.DataFrame:
    """Fill ``query_class`` where the dataset left it empty (null or blank).

    Parameters
    ----------
    queries
        A table with ``text`` and (optionally) ``query_class`` columns, e.g. ``Dataset.queries``.
    rules
        ``(class_name, regex)`` pairs tried in order (default :data:`DEFAULT_RULES`).
    default
        Class of a query no rule matches.
    override
        Classify every query by the rules, ignoring the dataset's classes.

    Returns
    -------
    ``queries`` with ``query_class`` filled and a ``class_source`` column: ``"dataset"`` or ``"rule"``.
    """
    if "text" not in queries.columns:
        raise ValueError("assign_classes: queries table has no 'text' column")
    compiled = compile_rules(DEFAULT_RULES if rules is None else rules)

    def by_rule(text: str) -> str:
        return next((name for name, rx in compiled if rx.search(text)), default)

    given = queries["query_class"] if "query_class" in queries.columns else pl.Series([None] * queries.height,
                                                                                       dtype=pl.String)
    ruled = [by_rule(t) for t in queries["text"].to_list()]
    keep = [not override and g is not None and str(g).strip() != "" for g in given.to_list()]
    return queries.with_columns(
        pl.Series("query_class", [g if k else r for g, r, k in zip(given.to_list(), ruled, keep)], dtype=pl.String),
        pl.Series("class_source", ["dataset" if k else "rule" for k in keep], dtype=pl.String))
