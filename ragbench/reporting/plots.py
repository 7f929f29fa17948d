"""Plots people would rather look at than read (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import polars as pl

from ragbench.core.measure_keys import measure_key

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def line_plot(series: Mapping[str, Sequence[tuple[float, float]]], path: Path, *, title: str, xlabel: str,
              ylabel: str, logx: bool = False) -> Path:
    """One line per series name over (x, y) points; saved as PNG."""
    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=110)
    for name, points in series.items():
        pts = sorted((x, y) for x, y in points if y == y)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def metric_curve(metrics_by_config: Mapping[str, Mapping[str, float]], prefix: str, suffix: str, path: Path, *,
                 title: str, xlabel: str, logx: bool = False) -> Path:
    """Plot ``{prefix}{x}{suffix}`` means against x, one line per config (e.g. ``evidence_recall_at_512tok``; a
    prefix may be spelled ``evidence_recall@``)."""
    prefix = measure_key(prefix)
    series = {}
    for name, metrics in metrics_by_config.items():
        pts = []
        for key, value in metrics.items():
            if key.startswith(prefix) and key.endswith(suffix):
                x = key[len(prefix):len(key) - len(suffix)]
                if x.isdigit():
                    pts.append((int(x), value))
        series[name] = pts
    return line_plot(series, path, title=title, xlabel=xlabel, ylabel=prefix.removesuffix("_at_"), logx=logx)


def plot_k_sweep(table: pl.DataFrame, path: str | Path, *, title: str = "Answer accuracy vs retrieval recall") -> Path:
    """PNG with answer accuracy, answer-in-context and retrieval recall over k (log2 x axis)."""
    if not table.height:
        raise ValueError("empty k-sweep table")
    measure = table["recall_measure"][0]
    pts = lambda col: [(float(k), float(v)) for k, v in zip(table["k"], table[col])]  # noqa: E731
    return line_plot({"answer accuracy (LLM)": pts("accuracy"), "answer in context (no LLM)": pts("answer_in_context"),
                      f"retrieval {measure}@k": pts("recall")}, Path(path), title=title, xlabel="k (chunks in context)",
                     ylabel="share of queries", logx=True)


def config_plot(curve: Sequence[tuple[int, float]], best_curve: Sequence[tuple[int, float]] | None,
                classes: Mapping[str, float], best_classes: Mapping[str, float] | None, path: Path, *, title: str,
                measure: str) -> Path:
    """One config at a glance, as PNG: its recall@k curve (and the sweep's best, dashed) and its ``measure`` per
    query class as bars (the best's as outlines)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=100,
                                      gridspec_kw={"width_ratios": [1, max(1, min(len(classes), 6) / 3)]})
    for pts, style, label in ((curve, "-o", "this config"), (best_curve, "--", "best config of the sweep")):
        if pts:
            pts = sorted(pts)
            left.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    ks = sorted(k for k, _ in curve)
    if ks and ks[-1] / max(ks[0], 1) >= 8:
        left.set_xscale("log", base=2)
    if ks:
        left.set_xticks(ks, [str(k) for k in ks])
    left.set(title="document recall@k", xlabel="k", ylabel="mean recall", ylim=(0, 1.02))
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="lower right")
    names = sorted(classes)
    x = range(len(names))
    right.bar(x, [classes[c] for c in names], color="#1976d2", label="this config")
    if best_classes:
        right.bar(x, [best_classes.get(c, float("nan")) for c in names], fill=False, edgecolor="#2e7d32", lw=1.5,
                  label="best config")
    right.set_xticks(list(x), names, rotation=20 if len(names) > 4 else 0, fontsize=8)
    right.set(title=f"{measure} per query class", ylim=(0, 1.02))
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
