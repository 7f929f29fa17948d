"""One table, several outputs: a rich table that fits the terminal, markdown, CSV and JSON lines.

A table is a list of :class:`Column` and rows of raw values (dicts). The rich table keeps the required columns and
as many optional ones, in order, as fit the width without wrapping a row; the other formats carry every column.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

FORMATS = ("table", "markdown", "csv", "json")


def number(digits: int = 4) -> Callable[[Any], str]:
    """A formatter: floats with ``digits`` decimals, integers as integers, missing values as ``–``."""
    def fmt(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return "–"
        if isinstance(v, (bool, int)):
            return str(int(v))
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    return fmt


def text(v: Any) -> str:
    return "–" if v is None else str(v)


@dataclass(frozen=True)
class Column:
    """``header`` over the values of ``key``; ``fmt`` renders a value for the table and markdown (CSV and JSON get
    the raw value). Required columns are always shown; optional ones only when they fit."""

    header: str
    key: str
    fmt: Callable[[Any], str] = text
    numeric: bool = False
    required: bool = False
    style: str | None = None


def _rich(columns: Sequence[Column], rows: Sequence[dict], title: str | None, caption: str | None,
          row_styles: Sequence[str | None], wrap: bool = False) -> Table:
    t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
              title_justify="left", caption_justify="left")
    for c in columns:
        t.add_column(c.header, justify="right" if c.numeric else "left", style=c.style,
                     no_wrap=c.numeric or not wrap, overflow="fold")
    for row, style in zip(rows, row_styles):
        t.add_row(*[escape(c.fmt(row.get(c.key))) for c in columns], style=style)
    return t


def fit_table(columns: Sequence[Column], rows: Sequence[dict], width: int, *, title: str | None = None,
              caption: str | None = None, row_styles: Sequence[str | None] | None = None,
              every_column: str = "--format markdown|csv|json") -> Table:
    """A rich table of the required columns and the optional ones (in order) that fit ``width`` with every row
    on one line; the caption says which columns were left out and the option that shows them (``every_column``:
    the command's own, e.g. ``--json`` for ``compare``)."""
    styles = list(row_styles) if row_styles is not None else [None] * len(rows)
    probe = Console(width=10_000, file=io.StringIO())
    shown = list(columns)
    while True:
        t = _rich(shown, rows, None, None, styles)
        if probe.measure(t).maximum <= width or all(c.required for c in shown):
            break
        drop = max(i for i, c in enumerate(shown) if not c.required)
        shown.pop(drop)
    hidden = [c.header for c in columns if c not in shown]
    if hidden:
        more = f"not shown at {width} columns: {', '.join(hidden)} ({every_column} shows every column)"
        caption = f"{caption}\n{more}" if caption else more
    # too narrow even for the required columns: wrap the text cells rather than cut them
    wrap = probe.measure(_rich(shown, rows, None, None, styles)).maximum > width
    return _rich(shown, rows, title, caption, styles, wrap=wrap)


def markdown_cell(s: str) -> str:
    """Text safe in one markdown table cell: ``|`` escaped (config labels hold ``a | b | c``), newlines as spaces,
    and ``& < >`` as entities, so an error text such as ``<b>boom</b>`` reads as written instead of as HTML (MLflow
    and Prefect render raw HTML inside markdown)."""
    return html.escape(s, quote=False).replace("|", "\\|").replace("\n", " ")


def to_markdown(columns: Sequence[Column], rows: Sequence[dict]) -> str:
    """A GitHub-flavoured markdown table of every column."""
    lines = ["| " + " | ".join(markdown_cell(c.header) for c in columns) + " |",
             "|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|"]
    lines += ["| " + " | ".join(markdown_cell(c.fmt(r.get(c.key))) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _raw(v: Any) -> Any:
    return None if isinstance(v, float) and math.isnan(v) else v


def to_csv(columns: Sequence[Column], rows: Sequence[dict]) -> str:
    """CSV of every column, raw values (full precision; empty for missing)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.key for c in columns])
    for r in rows:
        w.writerow(["" if _raw(r.get(c.key)) is None else r.get(c.key) for c in columns])
    return buf.getvalue().rstrip("\n")


def to_json_lines(rows: Sequence[dict]) -> list[str]:
    """One JSON object per row (NaN as null), keys sorted."""
    def clean(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return _raw(v)

    return [json.dumps(clean(dict(r)), sort_keys=True) for r in rows]
