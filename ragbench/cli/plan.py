"""``ragbench plan CONFIG``: what a sweep of CONFIG will compute after its caches and how long it will take on this
machine, before anything runs (:mod:`ragbench.sweep.forecast`). Registered on the CLI by :func:`register`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragbench.cli.options import fail


def register(app: typer.Typer) -> None:
    """Add the ``plan`` command to ``app``."""

    @app.command()
    def plan(
        config: Annotated[Path, typer.Argument(help="sweep YAML (see configs/)")],
        json_out: Annotated[bool, typer.Option("--json", help="print the plan as one JSON object (rows, "
                                                              "total_seconds, wrap_up_seconds after it, "
                                                              "disk_bytes, peak_memory_bytes and its parts "
                                                              "memory_bytes, configs, texts_to_embed)")] = False,
        home: Annotated[Optional[Path], typer.Option(help="results/cache folder, as for `ragbench sweep` (--home, "
                                                          "then $RAGBENCH_HOME, then output.home)")] = None,
        recalibrate: Annotated[bool, typer.Option("--recalibrate", help="measure each model with texts to embed "
                                                  "afresh on a sample, replacing its stored rate (say, one "
                                                  "taken while the machine was busy)")] = False,
        budget: Annotated[Optional[str], typer.Option(help="a time budget to check the plan against, as `ragbench "
                                                           "sweep --budget` takes it (8h, 90m, 120s; else the sweep "
                                                           "file's budget:): whether it fits, and if not which "
                                                           "configs would finish and which be over_budget")] = None,
        report: Annotated[bool, typer.Option(help="say whether the sweep is up to date as `ragbench sweep` would "
                                                  "with this flag (--no-report: a sweep run without its report "
                                                  "stands too)")] = True,
    ) -> None:
        """Per stage, what a sweep would compute now: chunks per chunker (cached or to cut), texts to embed per
        model (cached and new, looked up in the vector cache), collections to index, configs to evaluate or reuse,
        LLM calls; with estimated seconds from a calibration of each model on this machine (a seeded sample encoded
        once, kept under <home>/calibration until the model's weights change, its rate then replaced by what each
        sweep measures on this machine), disk, peak memory (the sweep process's resident memory: the process, the
        data, the model runtime, each model as its calibration measured it, the largest collection), and the total.
        Chunks not yet cached are cut now (into the chunk cache, where the sweep finds them). With a budget (--budget
        or the file's budget:), whether the sweep fits it, and if not which configs would finish in the budget's
        order and which be marked over_budget (in the JSON: ``budget``). When the sweep is up to date (nothing changed
        since the newest sweep of its name), a last line says so (in the JSON: ``up_to_date``, that sweep's id)."""
        from ragbench.config import load_config
        from ragbench.core.errors import RagbenchError
        from ragbench.core.models import configure_model_store, configure_revision_memo
        from ragbench.core.progress import console, stdout
        from ragbench.core.settings import Settings
        from ragbench.data import load_dataset
        from ragbench.sweep import sweep_settings
        from ragbench.sweep.budget import parse_budget, with_budget
        from ragbench.sweep.budget_fit import budget_fit
        from ragbench.sweep.forecast import decide_now, forecast, plan_json, plan_lines
        from ragbench.sweep.screen import ScreenEncoder, screen_pool, screens
        from ragbench.sweep.up_to_date import up_to_date

        try:
            cfg = with_budget(load_config(config), budget)
            settings = sweep_settings(cfg, Settings.from_env(), home).apply()
            root = settings.ensure_home()
            configure_revision_memo(root / "cache" / "revisions.json")
            configure_model_store(root / "models")
            ds = load_dataset(cfg.dataset, root / "cache")
            decided = decide_now(cfg, ds, root, settings.results_busy_wait_s)
            # a screened sweep: its pool is cut as the sweep cuts it (BM25 and static models only), and priced
            pool = screen_pool(cfg, ds, ScreenEncoder.standalone(settings)) if screens(cfg, decided.todo) else None
            f = forecast(cfg, ds, root / "cache", decided, root, pool, recalibrate)
            fit = budget_fit(f, decided.todo, parse_budget(cfg.budget)) if cfg.budget else None
            found = up_to_date(cfg, settings, root, report=report)  # then `ragbench sweep` records nothing
        except RagbenchError as e:
            fail(e)
        if json_out:
            typer.echo(json.dumps({**plan_json(f), **({"budget": fit.json()} if fit else {}),
                                   "up_to_date": found.sweep_id if found else None}))
            return
        console.print(f"plan of sweep {cfg.name} on {ds.name} ({ds.corpus.height} docs, {ds.queries.height} "
                      f"queries), home {root}:", highlight=False)
        for line in plan_lines(f) + (fit.lines() if fit else []) + ([found.sentence()] if found else []):
            stdout.print(line, highlight=False, markup=False, soft_wrap=True)
