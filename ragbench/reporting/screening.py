"""The "Screening" section of a screened sweep's report (``search: {strategy: screen}``): each chunker x model
pair's score on the pooled sub-corpus, its difference from the screen's leader, the paired test's p-value and its
Holm-adjusted one (against the leader + the screen's margin when it has one), what its full embed was priced at when
the leader was chosen, and whether it was kept (embedded and evaluated in full) or screened out. Every format
renders :func:`screening_rows` and :func:`screening_sentence`; a sweep without a screen has no section."""

from __future__ import annotations

import polars as pl

from ragbench.config.labels import pair_label
from ragbench.core.progress import rough_duration
from ragbench.reporting.tables import Column

#: the section's columns, in every format
SCREENING_COLUMNS = [Column("pair", "pair"), Column("screen score", "score", numeric=True),
                     Column("Δ vs leader", "delta", numeric=True), Column("p", "p", numeric=True),
                     Column("Holm p", "p_holm", numeric=True), Column("full embed, priced", "cost", numeric=True),
                     Column("decision", "decision")]


def _num(value, spec: str) -> str:
    return "—" if value is None or value != value else format(value, spec)


def priced(value, unit: str | None) -> str:
    """A pair's full embed as priced: ``~7.9 min`` (seconds), ``17,126 chunks``, or ``—`` (not priced: a file
    written before the price was kept)."""
    if value is None or value != value or unit is None:
        return "—"
    return f"~{rough_duration(value)}" if unit == "seconds" else f"{value:,.0f} {unit}"


def screening_rows(table: pl.DataFrame | None) -> list[dict]:
    """One display row per pair (the leader first): ``pair, score, delta, p, p_holm, cost, decision`` as text, the
    decision ``leader``, ``kept`` or ``screened out``."""
    if table is None or table.is_empty():
        return []
    return [{"pair": pair_label(r["chunker"], r["model"]), "score": _num(r["mean"], ".4f"),
             "delta": _num(r["delta"], "+.4f"), "p": _num(r["p"], ".3g"), "p_holm": _num(r["p_holm"], ".3g"),
             "cost": priced(r.get("full_embed_cost"), r.get("cost_unit")),
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
    test = f"{_sided(r)} paired randomization test"
    rule = (f"significantly short of the leader + {margin:g} (they cannot beat it by {margin:g}: {test} of their "
            f"scores less {margin:g}" if margin else f"significantly worse than the leader ({test}")
    cheapest = (f" The leader is the cheapest pair (its full embed priced in {r['cost_unit']}) whose screen score is "
                f"within {margin:g} of the best." if margin and r.get("cost_unit") else "")
    return (f"Screening: {table.height} chunker x model pairs were first evaluated on a pooled sub-corpus of "
            f"{r['n_docs']:,} documents ({r['n_chunks']:,} chunks over the chunkers) with {r['n_queries']} queries; "
            f"{out} pair(s) {rule}, Holm, α = {r['alpha']:g}) were not embedded in full (their configs: NOT RUN, "
            f"screened out).{cheapest}")


def _sided(row: dict) -> str:
    """The screen's test in words: one-sided (``alternative`` less) or two-sided (NULL: written before the screen
    tested one side)."""
    return "one-sided" if row.get("alternative") == "less" else "two-sided"


def _margin(row: dict) -> float:
    """The screen's margin (NULL in files written before it: 0)."""
    return row.get("margin") or 0.0


def screening_json(table: pl.DataFrame | None) -> dict | None:
    """The ``screening`` key of the JSON report: the pool's size, the unit the pairs' full embeds were priced in
    (``cost_unit``: seconds, chunks, or null in older files), the paired test (``test``: one-sided, or two-sided in
    files written before it was) and one object per pair (null without a screen)."""
    if table is None or table.is_empty():
        return None
    r = table.row(0, named=True)
    pairs = [{"chunker": p["chunker"], "model": p["model"], "screen_score": p["mean"], "delta_vs_leader": p["delta"],
              "p": p["p"], "p_holm": p["p_holm"], "full_embed_cost": p.get("full_embed_cost"), "kept": p["kept"],
              "leader": p["leader"]}
             for p in table.iter_rows(named=True)]
    return {"documents": r["n_docs"], "chunks": r["n_chunks"], "queries": r["n_queries"], "alpha": r["alpha"],
            "margin": _margin(r), "cost_unit": r.get("cost_unit"), "test": _sided(r), "pairs": pairs}
