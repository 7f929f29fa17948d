"""The "Screening" section of a screened sweep's report (``search: {strategy: screen}``): each chunker x model pair's
score on the pooled sub-corpus, its difference from the screen's leader, the paired test's p-value and its
Holm-adjusted one (against the leader + the screen's margin when it has one), and whether it was kept (embedded
and evaluated in full) or screened out. Every format renders :func:`screening_rows` and
:func:`screening_sentence`; a sweep without a screen has no section."""

from __future__ import annotations

import polars as pl

from ragbench.config.labels import pair_label
from ragbench.reporting.tables import Column

#: the section's columns, in every format
SCREENING_COLUMNS = [Column("pair", "pair"), Column("screen score", "score", numeric=True),
                     Column("Δ vs leader", "delta", numeric=True), Column("p", "p", numeric=True),
                     Column("Holm p", "p_holm", numeric=True), Column("decision", "decision")]


def _num(value, spec: str) -> str:
    return "—" if value is None or value != value else format(value, spec)


def screening_rows(table: pl.DataFrame | None) -> list[dict]:
    """One display row per pair (the leader first): ``pair, score, delta, p, p_holm, decision`` as text, the
    decision ``leader``, ``kept`` or ``screened out``."""
    if table is None or table.is_empty():
        return []
    return [{"pair": pair_label(r["chunker"], r["model"]), "score": _num(r["mean"], ".4f"),
             "delta": _num(r["delta"], "+.4f"), "p": _num(r["p"], ".3g"), "p_holm": _num(r["p_holm"], ".3g"),
             "decision": ("leader" if r["leader"] else "kept (not compared: too shallow)" if r["p"] is None
                          else "kept" if r["kept"] else "screened out")}
            for r in table.iter_rows(named=True)]


def screening_sentence(table: pl.DataFrame | None) -> str | None:
    """What the screen was, in one sentence (None without a screen)."""
    if table is None or table.is_empty():
        return None
    r = table.row(0, named=True)
    out = int((~table["kept"]).sum())
    margin = _margin(r)
    rule = (f"significantly short of the leader + {margin:g} (they cannot beat it by {margin:g}: paired "
            f"randomization test of their scores less {margin:g}" if margin else
            "significantly worse than the leader (paired randomization test")
    return (f"Screening: {table.height} chunker x model pairs were first evaluated on a pooled sub-corpus of "
            f"{r['n_docs']:,} documents ({r['n_chunks']:,} chunks over the chunkers) with {r['n_queries']} queries; "
            f"{out} pair(s) {rule}, Holm, α = {r['alpha']:g}) were not embedded in full (their configs: NOT RUN, "
            f"screened out).")


def _margin(row: dict) -> float:
    """The screen's margin (NULL in files written before it: 0)."""
    return row.get("margin") or 0.0


def screening_json(table: pl.DataFrame | None) -> dict | None:
    """The ``screening`` key of the JSON report: the pool's size and one object per pair (null without a screen)."""
    if table is None or table.is_empty():
        return None
    r = table.row(0, named=True)
    pairs = [{"chunker": p["chunker"], "model": p["model"], "screen_score": p["mean"], "delta_vs_leader": p["delta"],
              "p": p["p"], "p_holm": p["p_holm"], "kept": p["kept"], "leader": p["leader"]}
             for p in table.iter_rows(named=True)]
    return {"documents": r["n_docs"], "chunks": r["n_chunks"], "queries": r["n_queries"], "alpha": r["alpha"],
            "margin": _margin(r), "pairs": pairs}
