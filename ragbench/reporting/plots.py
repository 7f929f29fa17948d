"""Plots people would rather look at than read (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import polars as pl

from ragbench.core.measures import measure_key

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
