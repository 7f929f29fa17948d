"""Every plot ragbench draws (matplotlib, Agg backend: no display needed), in one module.

matplotlib is imported only when a plot is drawn (:func:`_pyplot`): a warm rerun, whose report plots all come from
the :class:`~ragbench.core.cache.PlotCache`, imports no matplotlib. The report's plots (:func:`report_plots`) are
cached by the data they draw; so are, through :func:`cached_plot`, the sweep's measure curves
(:func:`metric_curve`) and each config's plot on its MLflow run (:func:`config_plot`), which a warm rerun logs again
under its new parent run. The k-sweep plot (:func:`plot_k_sweep`) is drawn when asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from ragbench.core.measure_keys import measure_key

if TYPE_CHECKING:
    from ragbench.reporting.model import SweepReport


def _pyplot():
    """matplotlib.pyplot on the Agg backend, imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt



def line_plot(series: Mapping[str, Sequence[tuple[float, float]]], path: Path, *, title: str, xlabel: str,
              ylabel: str, logx: bool = False) -> Path:
    """One line per series name over (x, y) points; saved as PNG."""
    plt = _pyplot()
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
    plt = _pyplot()
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


# ---------------------------------------------------------------- the report's plots
#: bump when a report plot's drawing changes: plots cached under the old drawing are then drawn again
PLOT_VERSION = 1


def report_plots(report: "SweepReport", out_dir: Path, cache_root: Path | None = None) -> dict[str, Path]:
    """The report's PNG plots in ``out_dir``: each is described by the data it draws, and a plot whose data (and
    :data:`PLOT_VERSION`) a :class:`~ragbench.core.cache.PlotCache` under ``cache_root`` already holds is copied,
    not drawn (a warm rerun's report imports no matplotlib)."""
    from ragbench.core.cache import PlotCache
    from ragbench.core.hashing import stable_hash

    cache = PlotCache(cache_root) if cache_root is not None else None
    out: dict[str, Path] = {}
    for name, data in _plot_data(report).items():
        path = out_dir / f"{name}.png"
        key = stable_hash({"plot": name, "version": PLOT_VERSION, "data": data}, length=32)
        cached = cache.get(key) if cache is not None else None
        if cached is not None:
            path.write_bytes(cached)
        else:
            _DRAW[name](data, path)
            if cache is not None:
                cache.put_bytes(key, path.read_bytes())
        out[name] = path
    return out


def cached_plot(cache_root: Path | None, path: Path, draw: Callable[..., Path], **kwargs) -> Path:
    """``draw(path=path, **kwargs)`` (a plot function of this module), unless the
    :class:`~ragbench.core.cache.PlotCache` under ``cache_root`` holds the PNG of the same function, arguments and
    :data:`PLOT_VERSION`: then that PNG is copied to ``path`` and matplotlib is not imported. No ``cache_root``:
    drawn."""
    if cache_root is None:
        return draw(path=path, **kwargs)
    from ragbench.core.cache import PlotCache
    from ragbench.core.hashing import stable_hash

    cache = PlotCache(cache_root)
    key = stable_hash({"plot": draw.__name__, "version": PLOT_VERSION, "args": kwargs}, length=32)
    cached = cache.get(key)
    if cached is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cached)
        return path
    draw(path=path, **kwargs)
    cache.put_bytes(key, path.read_bytes())
    return path


def _plot_data(report: "SweepReport") -> dict[str, dict]:
    """What each plot draws, as plain data (its cache key): the leaderboard always, recall@k curves and the
    per-class heatmap when the sweep has them."""
    board = report.leaderboard()
    cids = board["config_id"].to_list()
    out = {"leaderboard": {
        "labels": [_short(report.label_of(c), 60) for c in cids], "means": board["mean"].to_list(),
        "ci_low": board["ci_low"].to_list(), "ci_high": board["ci_high"].to_list(), "primary": report.primary,
        # colour = significance against the best
        "colours": ["#2e7d32" if r["is_best"] else ("#9e9e9e" if r["worse_than_best"] else "#1976d2")
                    for r in board.iter_rows(named=True)]}}
    top = cids[:MAX_CURVES]  # the best configs only, so the lines stay readable
    if report.recall_curves.height:
        curves = []
        for cid in top:
            c = report.recall_curves.filter(pl.col("config_id") == cid).sort("k")
            if c.height:
                curves.append([_short(report.label_of(cid), 60), c["k"].to_list(), c["recall"].to_list()])
        out["recall_curves"] = {"curves": curves, "ks": sorted(report.recall_curves["k"].unique().to_list()),
                                "more": f" (best {len(top)} of {len(cids)} by {report.primary})"
                                        if len(cids) > len(top) else ""}
    classes = sorted(report.per_class["query_class"].unique().to_list())
    if report.per_class.height and classes:
        grid = [[float("nan")] * len(classes) for _ in cids]
        for r in report.per_class.iter_rows(named=True):
            if r["config_id"] in cids and r["query_class"] in classes:
                grid[cids.index(r["config_id"])][classes.index(r["query_class"])] = r["mean"]
        out["per_class"] = {"grid": grid, "classes": classes, "primary": report.primary,
                            "labels": [_short(report.label_of(c), 60) for c in cids]}
    return out


def _draw_leaderboard(d: dict, path: Path) -> None:
    """The primary measure per config with its 95 % CI; green: best, blue: tied with best, grey: worse."""
    plt = _pyplot()
    n, means = len(d["means"]), d["means"]
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.45 * n))
    y = list(range(n))[::-1]
    err = [[m - lo for m, lo in zip(means, d["ci_low"])], [hi - m for m, hi in zip(means, d["ci_high"])]]
    ax.barh(y, means, xerr=err, color=d["colours"], capsize=3)
    ax.set_yticks(y, d["labels"], fontsize=8)
    ax.set_xlabel(f"{d['primary']} (mean, 95 % bootstrap CI)")
    ax.set_xlim(0, 1.0 if max([h for h in d["ci_high"] if not math.isnan(h)] + [0]) <= 1 else None)
    ax.set_title("green: best · blue: tied with best · grey: significantly worse", fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _draw_recall_curves(d: dict, path: Path) -> None:
    """Mean recall@k against k, one line per config."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for label, ks, recall in d["curves"]:
        ax.plot(ks, recall, marker="o", label=label)
    ax.set_xlabel("k (documents)")
    ax.set_ylabel("mean recall@k")
    ax.set_ylim(0, 1.02)
    ks = d["ks"]
    if ks and ks[-1] / max(ks[0], 1) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(f"recall@k per config{d['more']}")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _draw_per_class(d: dict, path: Path) -> None:
    """The primary measure per config (rows) and query class (columns); the best of each class boxed in red."""
    plt = _pyplot()
    grid, classes, labels = d["grid"], d["classes"], d["labels"]
    fig, ax = plt.subplots(figsize=(3 + 1.3 * len(classes) + 3, 1.2 + 0.38 * len(labels)))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for j in range(len(classes)):
        column = [row[j] for row in grid]
        best = max((v for v in column if v == v), default=None)
        for i, v in enumerate(column):
            if v == v:
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if v > 0.6 else "white", fontweight="bold" if v == best else None)
                if v == best:
                    ax.add_patch(plt.Rectangle((j - .5, i - .5), 1, 1, fill=False, edgecolor="red", lw=1.5))
    ax.set_xticks(range(len(classes)), classes, fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_title(f"{d['primary']} per query class (red box: best in the class)", fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


_DRAW = {"leaderboard": _draw_leaderboard, "recall_curves": _draw_recall_curves, "per_class": _draw_per_class}


MAX_CURVES = 8


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    return path
