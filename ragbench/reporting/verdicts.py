"""The verdicts of a :class:`ragbench.reporting.model.SweepReport` in words and rows: the test's resolution, the
legend of the marks, the evidence notes, the leaderboard's flat rows (:func:`report_rows`) and every config against
the best (:func:`vs_best_rows`). The leaderboard itself is built by
:func:`ragbench.reporting.model.report_leaderboard`."""

from __future__ import annotations

import polars as pl

from ragbench.evaluation.comparison import Comparison
from ragbench.reporting.columns import shallow_notes
from ragbench.reporting.model import SweepReport



def resolution(comp: Comparison) -> str:
    """How fine the test's p-values are: comparisons (Holm), resamples per pair or exact enumeration, and the
    smallest attainable p before and after the correction."""
    m = comp.n_comparisons
    if comp.test != "randomization":
        return f"Holm over {m} comparison(s), α = {comp.alpha:g}"
    how = "exact sign-flip enumeration" if comp.exact else (
        f"R = {comp.n_resamples:,} sign flips per pair ({comp.n_exact} of {m} exact)")
    return (f"Holm over {m} comparison(s), {how}, smallest p = {comp.p_floor:.1e} × {m} = "
            f"{comp.p_floor_adjusted:.1e} ‹ α = {comp.alpha:g}")


def legend(report: SweepReport) -> str:
    """What the marks and brackets mean, and why a lower mean can be ≈ while a higher one is ▼."""
    return (f"★ best · ≈ not significantly different from the best · ▼ significantly worse than the best "
            f"(paired {report.test} test on the same queries, {resolution(report.comparisons[report.primary])}). "
            f"CI: 95 % bootstrap interval of the mean. The marks come from per-query "
            f"differences, not from the means: a config whose wins and losses against the best are mixed stays ≈ "
            f"even below a ▼ one that loses consistently." + "".join(f" {n}" for n in shallow_notes(report.shallow))
            + "".join(f" {n}" for n in evidence_notes(report)))


def evidence_notes(report: SweepReport) -> list[str]:
    """"Span measures: N scored, M without evidence." from the ``configs`` table's ``n_without_evidence`` (the
    span family's one unlabelled count, :func:`ragbench.evaluation.spans.without_evidence`); one sentence per
    distinct count among the finished configs, none without span measures."""
    if "n_without_evidence" not in report.configs.columns:  # a report table built by hand
        return []
    done = report.configs.filter((pl.col("status") == "finished") & pl.col("n_without_evidence").is_not_null())
    counts = sorted(set(done.select("n_queries", "n_without_evidence").iter_rows()))
    return [f"Span measures: {q - m} scored, {m} without evidence." for q, m in counts]


def report_rows(report: SweepReport) -> list[dict]:
    """One dict per config, best first on the primary measure (failed configs last, rank None): ``rank,
    config_id, name, chunker, model, retriever, status, error``, for every measure ``m``: ``m`` (mean),
    ``m_ci_low, m_ci_high, m_mark``; ``tied_with_best, worse_than_best, p_vs_best, wins, ties, losses`` (on the
    primary), ``ms_per_query, queries, unlabelled`` and the cost cells (:func:`report_leaderboard`)."""
    return report.board.dicts()


def vs_best_rows(report: SweepReport) -> list[dict]:
    """Every other finished config against the best on the primary measure: ``rank, config_id, name, label,
    mean, mean_diff`` (config − best), ``p_vs_best`` (Holm), ``significant``, ``wins, ties, losses, n``."""
    comp = report.comparisons[report.primary]
    rows = []
    for r in report_rows(report):
        if r["rank"] is None or r["config_id"] == comp.best:
            continue
        pair = comp.pair(r["config_id"], comp.best)
        rows.append({"rank": r["rank"], "config_id": r["config_id"], "name": r["name"],
                     "label": report.label_of(r["config_id"]), "chunker": r["chunker"], "model": r["model"],
                     "retriever": r["retriever"], "mean": r[report.primary], "mean_diff": pair.mean_diff,
                     "p_vs_best": pair.p_adjusted, "significant": pair.significant, "mark": r[f"{report.primary}_mark"],
                     "wins": pair.wins, "ties": pair.ties, "losses": pair.losses, "n": pair.n})
    return rows
