"""What a config's evaluation costs in this home on this machine, measured by each sweep for the next plan.

The plan prices evaluating a config as ``seconds_per_config + seconds_per_query x queries``
(:mod:`ragbench.sweep.estimate`) with defaults measured once on 2 cores; a sweep's own configs may run faster or
slower (a lighter grid, a busier machine). Each sweep's :class:`~ragbench.sweep.budget.StageClock` times every
config it evaluates (retrieval, judging, diagnostics, recording) and :func:`remember_config_rate` keeps the mean, with
the number of queries, in ``<home>/calibration/evaluate-<machine>.json`` (the last sweep wins). :func:`with_config_rate`
scales both default rates by one factor so that a config over the measured sweep's queries costs what was measured:
``k = measured seconds per config / (seconds_per_config + seconds_per_query x queries then)``. Only configs without a
reranker or a query rewrite, in sweeps without answer generation, are measured: those add their own rows to the plan.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ragbench.core.atomic import write_text_atomically
from ragbench.sweep.calibrate import machine_name
from ragbench.sweep.estimate import Rates
from ragbench.sweep.wrap_up import rate_per_config, read_measured


def config_rate_path(home: Path) -> Path:
    """``<home>/calibration/evaluate-<machine>.json``: one file per machine, as the encoders' rates."""
    return Path(home) / "calibration" / f"evaluate-{machine_name()}.json"


def remember_config_rate(home: Path, configs: int, seconds: float, queries: int, generation=None) -> None:
    """Keep the ``seconds`` that ``configs`` configs over ``queries`` queries took to evaluate (atomically); nothing
    from a sweep whose ``generation`` (its :class:`~ragbench.generation.spec.GenerationSpec`) answered the queries:
    the plan prices the answers apart, per LLM call. Never raises: a measurement informs, it never fails a sweep."""
    answered = generation is not None and generation.enabled
    if answered or configs <= 0 or queries <= 0 or not 0 < seconds < float("inf"):
        return
    try:
        write_text_atomically(config_rate_path(home), json.dumps(
            {"configs": configs, "seconds": round(seconds, 3), "queries": queries}, indent=1))
    except OSError:
        pass


def with_config_rate(rates: Rates, home: Path | None) -> Rates:
    """``rates`` with ``seconds_per_config`` and ``seconds_per_query`` scaled by what this home last measured (the
    formula is in the module docstring); unchanged when nothing (readable) was measured here."""
    if home is None:
        return rates
    last = read_measured(config_rate_path(home))
    per_config = rate_per_config(last, None)
    try:
        k = per_config / (rates.seconds_per_config + rates.seconds_per_query * int(last["queries"]))
    except (ValueError, KeyError, TypeError, ZeroDivisionError):  # nothing measured, or a damaged file
        return rates
    if not 0 < k < float("inf"):
        return rates
    return replace(rates, seconds_per_config=rates.seconds_per_config * k,
                   seconds_per_query=rates.seconds_per_query * k)
