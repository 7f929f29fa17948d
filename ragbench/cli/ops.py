"""Commands that act on finished sweeps (report, compare, explain, promote, production, rollback), registered on
the CLI by :func:`register`.

Every command reads the DuckDB store of the ragbench home (``--home``, else ``$RAGBENCH_HOME``, else ``./.ragbench``).
SWEEP is a sweep id, a unique prefix of one, or ``latest``; CONFIG is the config's rank on the leaderboard (``1``
is the best), its label (the name every output shows), its id, a unique id prefix or its stored name. A measure
may be written ``ndcg@10`` or ``ndcg_at_10``. Exit codes: 0 ok, 1 promotion/rollback refused, 2 invalid input.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ragbench.cli.options import Format, fail, home_store

HomeOpt = Annotated[Optional[Path], typer.Option("--home", help="ragbench home holding results.duckdb (default: "
                                                                 "$RAGBENCH_HOME, else ./.ragbench)")]
SweepArg = Annotated[str, typer.Argument(help="sweep id (or a unique prefix), or 'latest'")]
ConfigArg = Annotated[str, typer.Argument(help="leaderboard rank (1 = best), the config's name as the leaderboard "
                                               "shows it, config id, unique id prefix, or stored name")]


class Test(str, Enum):
    randomization = "randomization"
    student = "student"


def _promotion_table(rows, title: str) -> Table:
    """One promotion as a key/value table; several as a compact history."""
    def pv(p) -> str:
        return "–" if p.p_value is None or p.p_value != p.p_value else f"{p.p_value:.4g}"

    def state(p) -> str:
        return "[green]live[/green]" if p.active else ("rolled back" if p.rolled_back_at else "superseded")

    t = Table(title=title, title_justify="left", show_header=len(rows) != 1)
    if len(rows) == 1:
        p = rows[0]
        t.add_column("")
        t.add_column("")
        for k, v in (("config", f"{p.label}  ({p.config_id})"), ("sweep", p.sweep_id),
                     ("dataset fingerprint", p.dataset_fingerprint),
                     ("primary", f"{p.primary_measure} = {p.primary_value:.4f}"), ("p-value (gate)", pv(p)),
                     ("forced", f"yes: {p.reason}" if p.forced else "no"), ("who", p.who),
                     ("promoted at", f"{p.promoted_at:%Y-%m-%d %H:%M:%S %Z}"),
                     ("MLflow model", f"models:/{p.model_name}/{p.mlflow_model_version} (alias production)"),
                     ("Qdrant collection", p.collection or "– (BM25: no collection)"), ("state", state(p))):
            t.add_row(k, v)
        return t
    for c in ("promoted", "config", "primary", "p-value", "forced", "version", "state"):
        t.add_column(c)
    for p in rows:
        t.add_row(f"{p.promoted_at:%Y-%m-%d %H:%M:%S}", p.label, f"{p.primary_measure} {p.primary_value:.4f}", pv(p),
                  f"yes: {p.reason}" if p.forced else "no", f"v{p.mlflow_model_version}", state(p))
    return t


def register(app: typer.Typer) -> None:
    """Add the sweep-inspection and promotion commands to ``app``."""

    @app.command()
    def report(
        sweep: SweepArg = "latest",
        out: Annotated[Optional[Path], typer.Option(help="folder for report.html and the PNG plots (default: "
                                                         "`<home>/reports/<sweep id>`)")] = None,
        open_: Annotated[bool, typer.Option("--open", help="open the HTML report in a browser")] = False,
        measure: Annotated[Optional[str], typer.Option(help="primary measure (default: the sweep's)")] = None,
        test: Annotated[Test, typer.Option(help="paired significance test")] = Test.randomization,
        alpha: Annotated[float, typer.Option(help="significance level (Holm-corrected over all pairs)")] = 0.05,
        mlflow: Annotated[bool, typer.Option(help="log the report as artifacts of the sweep's MLflow run")] = True,
        since: Annotated[Optional[str], typer.Option(help="the sweep the section 'since the previous sweep' "
                                                          "compares with (default: the previous finished sweep of "
                                                          "the same name and dataset)")] = None,
        fmt: Annotated[Format, typer.Option("--format", help="leaderboard on stdout: a table fitting the terminal, "
                                                             "markdown, csv or json (one object per config)")]
        = Format.table,
        home: HomeOpt = None,
    ) -> None:
        """Print the leaderboard (means with 95 % bootstrap CIs, significance against the best) and write a
        self-contained HTML report with recall@k curves, per-query-class results and chunk statistics.

        The HTML and its PNG plots are also logged under report/ of the sweep's MLflow parent run.
        """
        from ragbench.core.errors import RagbenchError
        from ragbench.core.measure_keys import measure_key
        from ragbench.core.paths import home_path
        from ragbench.core.progress import console, stdout
        from ragbench.reporting.render_terminal import report_rich
        from ragbench.reporting.report import build_report, report_text, write_html_report
        from ragbench.results.lookup import resolve_sweep_id
        from ragbench.sweep.publish import restamp_report

        try:
            store, settings = home_store(home)
            sid = resolve_sweep_id(store, sweep)
            rep = build_report(store, sid, primary=measure_key(measure) if measure else None, test=test.value,
                               alpha=alpha, since=resolve_sweep_id(store, since) if since else None)
            folder = out or home_path(settings.home, "reports", sid, what="the report folder")
            path = write_html_report(store, sid, folder, settings=settings, log_to_mlflow=mlflow, report=rep)
            restamp_report(path)  # a sweep that was up to date stays so
        except (RagbenchError, ValueError) as e:
            fail(e)
        if fmt is Format.table:
            for part in report_rich(rep, width=stdout.width):  # leaderboard, sections, the verdict box
                stdout.print(part)
        else:
            typer.echo(report_text(rep, fmt.value))
        console.print(f"report: {path}")
        if open_:
            import webbrowser

            webbrowser.open(path.resolve().as_uri())

    @app.command()
    def compare(
        sweep: SweepArg = "latest",
        measure: Annotated[Optional[str], typer.Option(help="measure to compare (default: the sweep's primary)")]
        = None,
        test: Annotated[Test, typer.Option(help="paired test: randomization (sign-flip permutation) or student "
                                                "(paired t-test, as ranx)")] = Test.randomization,
        alpha: Annotated[float, typer.Option(help="family-wise significance level (Holm over all pairs)")] = 0.05,
        all_pairs: Annotated[bool, typer.Option("--all/--vs-best", help="every pair of configs, or (default) "
                                                                        "each config against the best")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="print the pairs as JSON lines")] = False,
        home: HomeOpt = None,
    ) -> None:
        """Paired significance tests on the same queries: by default each config against the best (mean
        difference, Holm-adjusted p-value, win/tie/loss per query); --all prints every pair. Holm's correction
        is over all pairs either way, so the p-values match the report's."""
        from ragbench.core.errors import RagbenchError
        from ragbench.core.measure_keys import measure_key
        from ragbench.core.progress import stdout
        from ragbench.reporting.report import build_report, comparison_rich, vs_best_rich, vs_best_rows
        from ragbench.results.lookup import resolve_sweep_id, sweep_primary

        try:
            store, _ = home_store(home)
            sid = resolve_sweep_id(store, sweep)
            m = measure_key(measure) if measure else sweep_primary(store, sid)
            rep = build_report(store, sid, primary=m, measures=(m,), test=test.value, alpha=alpha,
                               pairs="all" if all_pairs else "vs_best")
        except (RagbenchError, ValueError) as e:
            fail(e)
        comp = rep.comparisons[rep.primary]
        names = dict(rep.configs.select("config_id", "name").iter_rows())
        if json_out:
            if all_pairs:
                for row in comp.to_polars().iter_rows(named=True):
                    typer.echo(json.dumps({**row, "name_a": names.get(row["config_a"]),
                                           "name_b": names.get(row["config_b"])}, sort_keys=True))
            else:
                for row in vs_best_rows(rep):
                    typer.echo(json.dumps({**row, "best": comp.best, "measure": rep.primary}, sort_keys=True))
            return
        if all_pairs:
            labels = dict(rep.configs.select("config_id", "label").iter_rows())
            stdout.print(comparison_rich(comp, labels, width=stdout.width))
        else:
            stdout.print(vs_best_rich(rep, width=stdout.width))

    @app.command()
    def explain(
        sweep: SweepArg,
        config: ConfigArg,
        query_id: Annotated[str, typer.Argument(help="query id from the dataset, or a unique part of the question's "
                                                "text (case-insensitive), e.g. \"stash\"")],
        deep: Annotated[int, typer.Option(help="size of the deep pool searched for the first relevant chunk")] = 100,
        show: Annotated[int, typer.Option(help="chunks shown in the ranking and near-miss tables")] = 10,
        home: HomeOpt = None,
    ) -> None:
        """Show what one config retrieved for one query: ranked chunks with scores (★ = relevant document), the
        rank of the first relevant chunk in a deep pool, and the near misses that ranked above it (◆ = not labelled
        relevant but holds one of the row's answer strings: a likely label hole to judge)."""
        from ragbench.core.errors import RagbenchError
        from ragbench.core.progress import stdout
        from ragbench.reporting.explain import explain as _explain
        from ragbench.reporting.explain import render_explanation

        try:
            store, settings = home_store(home)
            e = _explain(store, sweep, config, query_id, deep=deep, settings=settings)
        except (RagbenchError, ValueError) as err:
            fail(err)
        stdout.print(render_explanation(e, show=show, width=stdout.width))

    @app.command()
    def promote(
        sweep: SweepArg,
        config: ConfigArg,
        force: Annotated[bool, typer.Option(help="promote even if the gate refuses (needs --reason)")] = False,
        reason: Annotated[Optional[str], typer.Option(help="why the gate is overridden (recorded)")] = None,
        primary: Annotated[Optional[str], typer.Option(help="measure the gate compares (default: the sweep's "
                                                            "primary)")] = None,
        alpha: Annotated[float, typer.Option(help="significance level of the gate")] = 0.05,
        who: Annotated[Optional[str], typer.Option(help="recorded as the promoter (default: OS user)")] = None,
        home: HomeOpt = None,
    ) -> None:
        """Promote a config to production, on evidence.

        Refused unless the config beats the current production config on the same dataset by a significant
        margin on the primary measure (paired randomization test, p < alpha), or --force --reason TEXT. The first
        promotion needs the best config of its sweep or one tied with it. On success: a new version of the MLflow
        model 'ragbench-retriever' (a loadable retriever) gets the alias 'production', the Qdrant alias
        'production' points at the config's collection, and DuckDB records it (table promotions).
        """
        from ragbench.core.errors import RagbenchError
        from ragbench.core.progress import console, stdout
        from ragbench.promotion.production import PromotionRequest
        from ragbench.promotion.production import promote as _promote
        from ragbench.promotion.promotion_gate import PromotionRefused

        try:
            store, settings = home_store(home)
            p = _promote(store, PromotionRequest(sweep, config, primary=primary, alpha=alpha, force=force,
                                                 reason=reason, who=who), settings=settings)
        except PromotionRefused as e:
            fail(e, 1)
        except (RagbenchError, ValueError) as e:
            fail(e)
        stdout.print(_promotion_table([p], "now in production"))
        console.print(f"evidence: {p.evidence}", highlight=False)

    @app.command()
    def production(
        json_out: Annotated[bool, typer.Option("--json", help="print the live record as JSON")] = False,
        history: Annotated[bool, typer.Option("--history", help="also list earlier promotions")] = False,
        home: HomeOpt = None,
    ) -> None:
        """Show what is live: config, sweep, dataset fingerprint, metric, p-value, who, when, model version and
        Qdrant collection."""
        from ragbench.core.errors import RagbenchError
        from ragbench.core.progress import console, stdout
        from ragbench.promotion.production import history as _history
        from ragbench.promotion.production import production as _production

        try:
            store, _ = home_store(home)
            live = _production(store)
            rows = _history(store) if history else ([live] if live else [])
        except RagbenchError as e:
            fail(e)
        if json_out:
            if live is None:
                typer.echo("null")
                return
            d = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in live.__dict__.items()}
            d["label"] = live.label  # the name every surface shows; "name" stays the stored key
            typer.echo(json.dumps(d, sort_keys=True))
            return
        if live is None:
            console.print("nothing is in production yet: `ragbench promote SWEEP CONFIG`")
            if not rows:
                return
        stdout.print(_promotion_table(rows, "production" + (" (history, newest first)" if history else "")))
        if live is not None:
            console.print(f"evidence: {live.evidence}", highlight=False)

    @app.command()
    def rollback(home: HomeOpt = None) -> None:
        """Restore the promotion before the live one: MLflow alias, Qdrant alias and the DuckDB record."""
        from ragbench.core.errors import RagbenchError
        from ragbench.core.progress import console, stdout
        from ragbench.promotion.production import rollback as _rollback
        from ragbench.promotion.promotion_gate import PromotionRefused

        try:
            store, settings = home_store(home)
            p = _rollback(store, settings=settings)
        except PromotionRefused as e:
            fail(e, 1)
        except RagbenchError as e:
            fail(e)
        stdout.print(_promotion_table([p], "restored to production"))
        console.print(f"production is {p.label} again")
