"""The ``ragbench`` command line."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ragbench.cli.options import Format
from ragbench.core.errors import RagbenchError
from ragbench.core.progress import console, stdout


class _Typer(typer.Typer):
    """A closed pipe (``ragbench sweep ... --json | head -1``) ends the command quietly with status 0 (Click
    would exit 1)."""

    def __call__(self, *args, **kwargs):
        try:
            return super().__call__(*args, **kwargs)
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(0)
        except SystemExit as e:
            # Click answers EPIPE by wrapping stdout to pacify the final flush, then exit(1): the reader left
            if e.code == 1 and type(sys.stdout).__name__.lstrip("_") == "PacifyFlushWrapper":
                _quiet_stdout()
                sys.exit(0)
            raise


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush does not fail again on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test runner's capture): nothing to flush
        pass


app = _Typer(
    help="Evaluate RAG retrieval configurations (chunking x embedding x retrieval) on your labelled queries.\n\n"
         "Results go to one local folder (--home, $RAGBENCH_HOME, default ./.ragbench): a DuckDB file with every "
         "per-query result, an MLflow store to browse (`mlflow ui --backend-store-uri sqlite:///.ragbench/mlflow.db`)"
         ", the embedded Qdrant collections and the chunk/vector cache.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False, rich_markup_mode="markdown")
datasets_app = typer.Typer(help="Inspect and validate datasets.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


class Orchestrator(str, Enum):
    prefect = "prefect"
    local = "local"


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        import ragbench

        try:
            installed = version("ragbench")
        except PackageNotFoundError:
            installed = ragbench.__version__
        typer.echo(f"ragbench {ragbench.__version__}" + ("" if installed == ragbench.__version__ else
                                                          f" (installed metadata: {installed})"))
        raise typer.Exit()


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="print the version and exit")] = False) -> None:
    """Evaluate RAG retrieval configurations (chunking x embedding x retrieval) on your labelled queries."""


def _fail(e: Exception) -> None:
    console.print(f"[red]error:[/red] {e}", soft_wrap=True, markup=True, highlight=False)
    raise typer.Exit(2)


@app.command()
def sweep(
    config: Annotated[Path, typer.Argument(help="sweep YAML (see configs/)")],
    json_out: Annotated[bool, typer.Option("--json", help="same as --format json: one JSON object per config on "
                                                          "stdout, best first, with its rank")] = False,
    fmt: Annotated[Format, typer.Option("--format", help="leaderboard on stdout: a table fitting the terminal, "
                                                         "markdown, csv or json")] = Format.table,
    orchestrator: Annotated[Orchestrator, typer.Option(help="prefect: run stages as Prefect tasks (ephemeral "
                                                            "server unless PREFECT_API_URL is set); local: plain "
                                                            "Python")] = Orchestrator.prefect,
    home: Annotated[Optional[Path], typer.Option(help="results/cache folder (overrides the config and "
                                                      "$RAGBENCH_HOME)")] = None,
    fail_fast: Annotated[bool, typer.Option(help="stop at the first failing config")] = False,
    report: Annotated[bool, typer.Option(help="write the HTML report and put the answer on the MLflow parent "
                                              "run when the sweep ends")] = True,
) -> None:
    """Run (or resume) a sweep and print its leaderboard.

    Re-running an unchanged sweep re-embeds nothing; an interrupted sweep resumes where it stopped. Exit code 1
    when any config failed, 2 on invalid input.
    """
    console.print(f"starting sweep {config} …", highlight=False)  # at once: the imports below take seconds
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.reporting.terminal import leaderboard_table, leaderboard_text
    from ragbench.sweep import preflight, sweep_settings

    fmt = Format.json if json_out else fmt
    published = None
    try:
        cfg = load_config(config)
        settings = sweep_settings(cfg, Settings.from_env(), home).apply()
        preflight(cfg, settings)
        n = len(cfg.expand())
        if orchestrator is Orchestrator.prefect:
            from flows.settings import configure_prefect

            console.print(f"sweep {cfg.name}: {n} configs; Prefect starting (its first start in a home migrates "
                          "a database: up to a minute)", highlight=False)
            configure_prefect(settings)  # before Prefect is imported: its home goes under this sweep's home
            from flows.sweep import sweep_flow

            result = sweep_flow(str(config), home=str(settings.home), publish=report)
        else:
            from ragbench.sweep import publish_sweep, run_sweep

            console.print(f"sweep {cfg.name}: {n} configs, plain Python", highlight=False)
            result = run_sweep(cfg, settings, fail_fast=fail_fast)
            if report:
                published = publish_sweep(result.sweep_id, settings, mlflow=cfg.output.mlflow)
    except RagbenchError as e:
        _fail(e)
    if fmt is Format.table:
        stdout.print(leaderboard_table(result, width=stdout.width))
        db = (result.home / "results.duckdb")
        console.print(f"per-query results: duckdb {db}  (e.g. SELECT * FROM query_metrics WHERE sweep_id = "
                      f"'{result.sweep_id}')", highlight=False)
        if published and published.html:
            console.print(f"report: {published.html}", highlight=False)
        if published and published.mlflow_url:
            console.print(f"MLflow: {published.mlflow_url}", highlight=False)
    else:
        typer.echo(leaderboard_text(result, fmt.value))
    if result.n_failed:
        raise typer.Exit(1)


@app.command()
def doctor(
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (default $RAGBENCH_HOME or ./.ragbench)")] = None,
    repair: Annotated[bool, typer.Option(help="quarantine damaged cache entries and delete damaged collections; "
                                              "the next sweep recomputes them")] = False,
) -> None:
    """Check a home: every cache entry against its checksum, every embedded Qdrant collection against the vector
    cache, the DuckDB results and the MLflow store. Exit code 0 when healthy (or repaired), 1 when problems remain.
    """
    from ragbench.core.settings import Settings
    from ragbench.results.doctor import examine

    settings = Settings.from_env(home=home).apply()
    report = examine(settings, repair=repair)
    summary = Table(title=f"ragbench doctor: {settings.home}", title_justify="left")
    for c in ("checked", "count"):
        summary.add_column(c, justify="right" if c == "count" else "left")
    for what, n in report.checked.items():
        summary.add_row(what, str(n))
    stdout.print(summary)
    if report.findings:
        t = Table(title="problems", title_justify="left")
        for c in ("component", "item", "problem", "action"):
            t.add_column(c, overflow="fold")
        for f in report.findings:
            t.add_row(f.component, f.item, f.problem, f.action)
        stdout.print(t)
    console.print("healthy" if not report.findings else ("repaired" if report.healthy else
                                                         f"{len(report.findings)} problem(s) found"))
    if not report.healthy:
        raise typer.Exit(1)


@app.command("sync-mlflow")
def sync_mlflow_cmd(
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (default $RAGBENCH_HOME or ./.ragbench)")] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow URI (default $MLFLOW_TRACKING_URI or the "
                                                             "SQLite store under home)")] = None,
    sweep: Annotated[Optional[str], typer.Option(help="only this sweep id")] = None,
) -> None:
    """Upload to MLflow the results that reached only DuckDB (MLflow was unreachable during the sweep)."""
    from ragbench.core.settings import Settings
    from ragbench.results.sync import sync_mlflow

    settings = Settings.from_env(home=home).apply()
    if tracking_uri:
        settings = settings.replace(mlflow_tracking_uri=tracking_uri)
    try:
        n = sync_mlflow(settings, sweep)
    except RagbenchError as e:
        _fail(e)
    console.print(f"uploaded {n} config run(s) to MLflow")


@datasets_app.command("validate")
def datasets_validate(
    path: Annotated[Path, typer.Argument(help="dataset folder (BEIR layout) or SQuAD JSON file")],
    split: Annotated[str, typer.Option(help="qrels split")] = "test",
) -> None:
    """Load a dataset with full validation and print its summary (errors name file and line)."""
    from ragbench.config import DatasetSpec
    from ragbench.data import load_dataset

    fmt = "squad" if path.suffix == ".json" else "beir"
    try:
        ds = load_dataset(DatasetSpec(path=path, split=split, format=fmt, queries="all"))
    except RagbenchError as e:
        _fail(e)
    t = Table(title=f"{path}")
    t.add_column("property")
    t.add_column("value", justify="right")
    for k, v in ds.summary().items():
        t.add_row(k, str(v))
    console.print(t)
    for w in ds.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


@datasets_app.command("list")
def datasets_list(
    root: Annotated[list[Path], typer.Argument(help="folders to scan")] = None,
) -> None:
    """List dataset folders (BEIR layout) under the bundled ``datasets/`` and any folders given."""
    roots = root or [Path("datasets"), Path("../shared/datasets")]
    t = Table(title="datasets")
    for c in ("path", "documents", "queries", "splits", "span labels"):
        t.add_column(c)
    for r in roots:
        for corpus in sorted(Path(r).glob("*/corpus.jsonl")):
            d = corpus.parent
            n_docs = sum(1 for _ in open(corpus, encoding="utf-8"))
            n_q = sum(1 for _ in open(d / "queries.jsonl", encoding="utf-8")) if (d / "queries.jsonl").exists() \
                else 0
            splits = ",".join(sorted(p.stem for p in (d / "qrels").glob("*.tsv")))
            spans = "yes" if (d / "spans").is_dir() or (d / "sentences.jsonl").exists() else "no"
            t.add_row(str(d), str(n_docs), str(n_q), splits, spans)
    console.print(t)


from ragbench.cli.ops import register as _register_ops  # noqa: E402

_register_ops(app)

if __name__ == "__main__":  # pragma: no cover
    app()
