"""The ``ragbench`` command line."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from ragbench.core.errors import RagbenchError
from ragbench.core.progress import console, stdout

app = typer.Typer(
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


def _fail(e: Exception) -> None:
    console.print(f"[red]error:[/red] {e}", soft_wrap=True, markup=True, highlight=False)
    raise typer.Exit(2)


@app.command()
def sweep(
    config: Annotated[Path, typer.Argument(help="sweep YAML (see configs/)")],
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object per config on stdout instead of "
                                                          "the leaderboard")] = False,
    orchestrator: Annotated[Orchestrator, typer.Option(help="prefect: run stages as Prefect tasks (ephemeral "
                                                            "server unless PREFECT_API_URL is set); local: plain "
                                                            "Python")] = Orchestrator.prefect,
    home: Annotated[Optional[Path], typer.Option(help="results/cache folder (overrides the config and "
                                                      "$RAGBENCH_HOME)")] = None,
    fail_fast: Annotated[bool, typer.Option(help="stop at the first failing config")] = False,
    fresh: Annotated[bool, typer.Option(help="evaluate every config anew instead of reusing stored results "
                                             "(and instead of resuming)")] = False,
) -> None:
    """Run (or resume) a sweep and print its leaderboard.

    Re-running an unchanged sweep re-embeds nothing and re-evaluates nothing: a config already evaluated on the same
    data with the same settings and evaluation version reuses its stored results (the log names the sweep they
    came from; `--fresh` forces re-evaluation). An interrupted sweep resumes where it stopped. Exit code 1 when any
    config failed, 2 on invalid input.
    """
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.reporting.terminal import json_lines, leaderboard_table
    from ragbench.sweep import preflight, sweep_settings

    try:
        cfg = load_config(config)
        settings = sweep_settings(cfg, Settings.from_env(), home).apply()
        preflight(cfg, settings)
        if orchestrator is Orchestrator.prefect:
            from flows.settings import configure_prefect

            configure_prefect(settings)  # before Prefect is imported: its home goes under this sweep's home
            from flows.sweep import sweep_flow

            result = sweep_flow(str(config), home=str(settings.home), fresh=fresh)
        else:
            from ragbench.sweep import run_sweep

            result = run_sweep(cfg, settings, fail_fast=fail_fast, fresh=fresh)
    except RagbenchError as e:
        _fail(e)
    if json_out:
        for line in json_lines(result):
            typer.echo(line)
    else:
        stdout.print(leaderboard_table(result))
        db = (result.home / "results.duckdb")
        console.print(f"per-query results: duckdb {db}  (e.g. SELECT * FROM query_metrics WHERE sweep_id = "
                      f"'{result.sweep_id}')")
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


class QueriesOption(str, Enum):
    in_qrels = "in_qrels"
    all = "all"


class SquadDocuments(str, Enum):
    paragraph = "paragraph"
    article = "article"


@datasets_app.command("validate")
def datasets_validate(
    path: Annotated[Optional[Path], typer.Argument(help="dataset folder (BEIR layout) or SQuAD JSON file")] = None,
    config: Annotated[Optional[Path], typer.Option(help="validate the dataset section of this sweep config "
                                                        "(options below then override its fields)")] = None,
    format: Annotated[Optional[str], typer.Option(help="dataset format (beir, squad, ...); default: squad for a "
                                                       ".json file, else beir")] = None,
    split: Annotated[Optional[str], typer.Option(help="qrels split (default test)")] = None,
    queries: Annotated[Optional[QueriesOption], typer.Option(help="in_qrels or all (default: all without "
                                                                  "--config, to check every query)")] = None,
    spans: Annotated[Optional[bool], typer.Option("--spans/--no-spans", help="load span labels")] = None,
    squad_documents: Annotated[Optional[SquadDocuments], typer.Option(help="SQuAD documents: paragraph or "
                                                                           "article")] = None,
    max_queries: Annotated[Optional[int], typer.Option(help="seeded sample of this many queries")] = None,
    max_docs: Annotated[Optional[int], typer.Option(help="judged docs plus seeded distractors up to this many")] = None,
    seed: Annotated[Optional[int], typer.Option(help="sampling seed")] = None,
) -> None:
    """Load a dataset with full validation and print its summary (errors name file and line).

    Takes the same dataset options as a sweep config's `dataset` section (`--squad-documents article`, ...), or
    `--config FILE` to validate that config's dataset exactly as a sweep would load it (same fingerprint).
    """
    from pydantic import ValidationError

    from ragbench.config import DatasetSpec, load_config
    from ragbench.data import load_dataset

    given = {"format": format, "split": split, "queries": queries.value if queries else None, "spans": spans,
             "squad_documents": squad_documents.value if squad_documents else None, "max_queries": max_queries,
             "max_docs": max_docs, "seed": seed}
    given = {k: v for k, v in given.items() if v is not None}
    try:
        if config is not None:
            base = load_config(config).dataset.model_dump()
            if path is not None:
                base["path"] = path
        elif path is not None:
            base = {"path": path, "queries": "all", "format": "squad" if path.suffix == ".json" else "beir"}
        else:
            raise typer.BadParameter("give a dataset PATH or --config FILE")
        spec = DatasetSpec(**{**base, **given})
        ds = load_dataset(spec)
    except ValidationError as e:
        _fail(RagbenchError("invalid dataset options: " + "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())))
    except RagbenchError as e:
        _fail(e)
    t = Table(title=f"{spec.path}")
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
