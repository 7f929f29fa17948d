"""``ragbench gate``: a candidate config against production on a probe set, for CI (see
:mod:`ragbench.promotion.regression_gate`). Exit codes: 0 no regression, 1 regression (the regressed probes are listed),
2 invalid input (a bad config or probes file, nothing in production, a candidate on other data)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table


def register(app: typer.Typer) -> None:
    """Add ``gate`` to ``app``."""

    @app.command()
    def gate(
        config: Annotated[Path, typer.Argument(help="sweep YAML describing the candidate (one config, or pick one "
                                                    "with --config)")],
        against: Annotated[str, typer.Option(help="what the candidate is compared with: 'production' (the live "
                                                  "promoted config)")] = "production",
        choice: Annotated[Optional[str], typer.Option("--config", help="the candidate among the file's configs: "
                                                                       "position (1-based), id, id prefix, name "
                                                                       "or stored name")]
        = None,
        probes: Annotated[Optional[Path], typer.Option(help="questions file (CSV/JSONL/YAML: question, doc, quote, "
                                                            "...) labelled on production's documents; default: a "
                                                            "seeded sample of production's labelled queries")] = None,
        n: Annotated[int, typer.Option(help="labelled probes sampled when no --probes file is given", min=1)] = 30,
        seed: Annotated[int, typer.Option(help="seed of the probe sample and of the paired test")] = 0,
        k: Annotated[int, typer.Option(help="a probe passes when a relevant document is in the top k", min=1)] = 10,
        primary: Annotated[Optional[str], typer.Option(help="document measure of the paired test (default: the "
                                                            "one production was promoted on)")] = None,
        alpha: Annotated[float, typer.Option(help="significance level of the paired test")] = 0.05,
        oracle: Annotated[bool, typer.Option(help="add oracle probes: each labelled probe's evidence text as a "
                                                  "query, which must find its own document")] = True,
        home: Annotated[Optional[Path], typer.Option(help="ragbench home. Precedence: --home, then "
                                                          "$RAGBENCH_HOME, then the config's output.home")] = None,
    ) -> None:
        """Exit non-zero when CONFIG is worse than production: significantly worse on the primary measure over the
        probes (paired randomization test), or a probe production passes (a relevant document in the top k) fails.

        Exit codes: 0 no regression, 1 regression (regressed probes listed: id, text, production and candidate
        values), 2 invalid input.
        """
        from ragbench.cli.options import fail
        from ragbench.core.errors import RagbenchError
        from ragbench.core.progress import console, stdout

        try:
            result = _run(_GateRequest(config, against, choice, probes, n, seed, k, primary, alpha, oracle, home))
        except (RagbenchError, ValueError) as e:
            fail(e, 2)
        from ragbench.promotion.regression_gate import regression_lines

        for line in regression_lines(result):
            console.print(line, highlight=False, soft_wrap=True)
        if not result.regressed:
            stdout.print(f"gate passed: {result.candidate} is not worse than production", highlight=False,
                         soft_wrap=True)
            return
        probes = failing_first(result.regressed_probes)
        failing = int(probes["fails"].sum())
        t = Table(title=f"regressed probes: {failing} fail (passed in production), {probes.height - failing} "
                        "scored lower", title_justify="left")
        for c in ("query", "text", f"production {result.primary}", f"candidate {result.primary}",
                  f"hit@{result.k} prod → cand"):
            t.add_column(c, overflow="fold")
        for r in probes.iter_rows(named=True):
            text = r["text"] if len(r["text"]) <= 70 else r["text"][:67] + "..."
            t.add_row(r["query_id"], text, f"{r['production']:.4f}", f"{r['candidate']:.4f}",
                      f"{'pass' if r['production_hit'] else 'fail'} → {'pass' if r['candidate_hit'] else 'fail'}")
        stdout.print(t)
        stdout.print("gate failed: regressed " + ", ".join(probes["query_id"].to_list()),
                     highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def failing_first(probes):
    """The regressed probes with ``fails`` (production had a relevant document in the top k, the candidate has
    none): those that fail first, then those that only scored lower, each by the largest drop first."""
    import polars as pl

    return (probes.with_columns((pl.col("production_hit") & ~pl.col("candidate_hit")).alias("fails"),
                                (pl.col("candidate") - pl.col("production")).alias("_drop"))
            .sort(["fails", "_drop", "query_id"], descending=[True, False, False]).drop("_drop"))


@dataclass(frozen=True)
class _GateRequest:
    """The options of one ``ragbench gate`` run (see the command's help)."""

    config: Path
    against: str
    choice: str | None
    probes: Path | None
    n: int
    seed: int
    k: int
    primary: str | None
    alpha: float
    oracle: bool
    home: Path | None


def _run(req: _GateRequest):
    import json

    from ragbench.config import RunConfig, load_config
    from ragbench.core.settings import Settings
    from ragbench.data import load_dataset
    from ragbench.index.qdrant import open_index
    from ragbench.promotion.regression_gate import (GateInputError, RegressionRules, probe_set, run_regression_gate,
                                                    select_candidate)
    from ragbench.promotion.production import production
    from ragbench.promotion.serving import load_dataset_checked, parse_config
    from ragbench.results.completion import sweep_completion
    from ragbench.results.store import ResultStore
    from ragbench.sweep.orchestrator import sweep_settings
    from ragbench.sweep.stages import preflight

    config, against, choice, home = req.config, req.against, req.choice, req.home
    if against != "production":
        raise GateInputError(f"--against {against!r}: only 'production' (the live promoted config) is supported")
    cfg = load_config(config)
    settings = sweep_settings(cfg, Settings.from_env(), home).apply()
    db = Path(settings.home) / "results.duckdb"
    if not db.is_file():
        raise GateInputError(f"no results at {db}: nothing is in production; `ragbench promote` a config first")
    live = production(ResultStore(db))
    if live is None:
        raise GateInputError(f"nothing is in production in {settings.home}: `ragbench promote SWEEP CONFIG` first")
    candidate = select_candidate(cfg.expand(), choice, str(config))
    preflight(cfg, settings)
    sweep_spec = json.loads(ResultStore(db).sweep(live.sweep_id)["spec_json"])
    ds = load_dataset_checked(sweep_spec["dataset"], live.dataset_fingerprint, home=settings.home)
    mine = load_dataset(cfg.dataset, Path(settings.home) / "cache")
    if mine.fingerprint != ds.fingerprint:
        raise GateInputError(f"{config}: the candidate's dataset (fingerprint {mine.fingerprint}) is not the one "
                             f"production was promoted on ({ds.fingerprint}, sweep {live.sweep_id}); the gate "
                             "compares both configs on the same documents")
    parsed = parse_config(live.spec)
    prod = RunConfig(parsed.chunker, parsed.embedder, parsed.retriever, parsed.index)
    probe_ds = probe_set(ds, probes_file=req.probes, n=req.n, seed=req.seed, oracle=req.oracle)
    index = open_index(settings)
    try:
        rules = RegressionRules(req.primary or live.primary_measure, k=req.k, alpha=req.alpha, seed=req.seed,
                                gain=sweep_spec.get("metrics", {}).get("gain", "exponential"))
        result = run_regression_gate(prod, candidate, probe_ds, settings, index, rules, production_name=live.label)
    finally:
        index.close()
    done = sweep_completion(ResultStore(db), live.sweep_id)
    if done is not None and not done.finished:  # production's sweep never compared it with the configs left
        result = replace(result, notes=(f"warning: production {live.label} comes from sweep {live.sweep_id}, "
                                        f"{done.text} ({done.why}); it was promoted with --force: {live.reason}",))
    return result
