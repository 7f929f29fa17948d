"""The ``ragbench`` command line."""

from __future__ import annotations

import os
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ragbench.cli.dataset_options import with_dataset_options
from ragbench.cli.options import Format, fail
from ragbench.core.errors import RagbenchError, ResultsSpooledError
from ragbench.core.progress import console, stdout
from ragbench.core.redact import redact


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


_BARE_ANGLE = re.compile(r"<([A-Za-z][^<>`\n]*)>")


def _keep_angle_brackets() -> None:
    """Typer renders help texts as Markdown, where ``<home>`` is an HTML tag and vanishes ("finished configs wait
    in /spool"): every ``<word>`` outside backticks is shown as code instead, in every command's help."""
    import typer.rich_utils as rich_utils

    original = rich_utils._make_rich_text
    if getattr(original, "keeps_angle_brackets", False):
        return

    def make_rich_text(*, text: str, style: str = "", markup_mode):
        if markup_mode == rich_utils.MARKUP_MODE_MARKDOWN:
            parts = re.split(r"(`[^`]*`)", text)  # odd parts are code already
            text = "".join(p if i % 2 else _BARE_ANGLE.sub(r"`<\1>`", p) for i, p in enumerate(parts))
        return original(text=text, style=style, markup_mode=markup_mode)

    make_rich_text.keeps_angle_brackets = True
    rich_utils._make_rich_text = make_rich_text


_keep_angle_brackets()
app = _Typer(
    help="Evaluate RAG retrieval configurations (chunking x embedding x retrieval) on your labelled queries.\n\n"
         "Results go to one local folder (--home, else $RAGBENCH_HOME, else a sweep file's output.home, else "
         "./.ragbench: the command line, then the environment, then the sweep file): a DuckDB file with every "
         "per-query result, an MLflow store to browse (`mlflow ui --backend-store-uri sqlite:///.ragbench/mlflow.db`)"
         ", the embedded Qdrant collections and the chunk/vector cache.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False, rich_markup_mode="markdown")
datasets_app = typer.Typer(help="Inspect and validate datasets.", no_args_is_help=True)
app.add_typer(datasets_app, name="datasets")


class TaskRunner(str, Enum):
    local = "local"
    dask = "dask"


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
    home: Annotated[Optional[Path], typer.Option(help="results/cache folder. Precedence: --home, then "
                                                      "$RAGBENCH_HOME, then the sweep file's output.home, then "
                                                      "./.ragbench (the MLflow URI alike: $MLFLOW_TRACKING_URI, "
                                                      "then output.mlflow_tracking_uri)")] = None,
    fail_fast: Annotated[bool, typer.Option(help="stop at the first failing config")] = False,
    task_runner: Annotated[TaskRunner, typer.Option(help="where embedding shards run: local (this process) or "
                                                         "dask (a Dask cluster; the home must be on a volume "
                                                         "every worker sees)")] = TaskRunner.local,
    workers: Annotated[int, typer.Option(help="Dask worker processes of a new local cluster", min=1)] = 2,
    address: Annotated[Optional[str], typer.Option(help="an existing Dask scheduler (tcp://host:8786) instead of "
                                                        "a local cluster")] = None,
    fresh: Annotated[bool, typer.Option(help="evaluate every config anew instead of reusing stored results "
                                             "(and instead of resuming)")] = False,
    report: Annotated[bool, typer.Option(help="write the HTML report and put the answer on the MLflow parent "
                                              "run when the sweep ends")] = True,
    budget: Annotated[Optional[str], typer.Option(help="time budget (8h, 90m, 120s; default: the sweep file's "
                                                       "budget:), counted from this command's start, the "
                                                       "seconds of its report kept: BM25 first, then one config of "
                                                       "every chunker x model pair, cheapest first, then the rest; "
                                                       "no expensive stage starts that would end after it; configs "
                                                       "left are over_budget (exit 0), the next run "
                                                       "continues")] = None,
    again: Annotated[bool, typer.Option(help="record a new sweep even when the newest one of this name already "
                                             "holds everything it would record (same spec, data, labels, models, "
                                             "evaluation and promotions; published): by default such a sweep is "
                                             "up to date, and its leaderboard is printed")] = False,
) -> None:
    """Run (or resume) a sweep and print its leaderboard.

    Re-running a sweep re-embeds nothing and re-evaluates nothing already done: a config evaluated on the same data
    with the same settings and evaluation version reuses its stored results (the log names the sweep they came
    from; `--fresh` forces re-evaluation). When the newest sweep of this name already holds everything (nothing
    changed, its report and MLflow run published), the sweep is up to date: its leaderboard is printed and nothing
    is recorded (`--again` records a new sweep). An interrupted sweep resumes where it stopped. While another process
    holds results.duckdb, finished configs wait in `<home>/spool` and are merged when it frees. Exit code 1 when any
    config failed or results are left in the spool, 2 on invalid input.
    """
    from ragbench.cli.announce import ANNOUNCED, sweep_started

    started = sweep_started()

    if not ANNOUNCED:  # at once: the imports below take seconds
        console.print(f"starting sweep {config} …", highlight=False)
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.core.workers import open_workers
    from ragbench.reporting.terminal import leaderboard_text
    from ragbench.results.store_connection import STORAGE_ERRORS, check_results_file
    from ragbench.sweep import preflight, sweep_settings
    from ragbench.sweep.up_to_date import up_to_date

    fmt = Format.json if json_out else fmt
    published = None
    try:
        cfg = load_config(config)
        if budget is not None:
            from ragbench.sweep.budget import with_budget

            cfg = with_budget(cfg, budget)
        settings = sweep_settings(cfg, Settings.from_env(), home).apply()
        settings.ensure_home()
        check_results_file(settings.home / "results.duckdb")  # damaged: one line now, not a flow's traceback
        address = address or settings.dask_address
        preflight(cfg, settings, address if task_runner is TaskRunner.dask else None)
        n = len(cfg.expand())
        found = None if fresh or again else up_to_date(cfg, settings, settings.home, report=report)
        dask = task_runner is TaskRunner.dask and found is None
        pool = open_workers(task_runner.value, workers, address) if dask else None
        try:
            if found is not None:  # nothing to record: no runner, no MLflow, no report drawn again
                console.print(f"sweep {cfg.name}: {found.sentence()}", highlight=False, soft_wrap=True)
                result, published = found.result, found.published()
            elif orchestrator is Orchestrator.prefect:
                from flows.settings import configure_prefect

                server = settings.prefect_api_url
                console.print(f"sweep {cfg.name}: {n} configs; " + (
                    f"Prefect server {redact(server)}" if server else
                    "Prefect starting, ephemeral (its first start in a home migrates a database: up to a minute)"),
                    highlight=False)
                configure_prefect(settings)  # before Prefect is imported: its home goes under this sweep's home
                from flows.sweep import PUBLISHED, sweep_flow

                result = sweep_flow(str(config), home=str(settings.home), publish=report, fresh=fresh, workers=pool,
                                    budget=cfg.budget, budget_from=started, again=again)
                published = PUBLISHED.pop(result.sweep_id, None)
            else:
                from ragbench.sweep import publish_sweep, run_sweep

                console.print(f"sweep {cfg.name}: {n} configs, plain Python", highlight=False)
                # the home resolved above, passed on: the sweep file must not override it a second time
                result = run_sweep(cfg, settings, home=settings.home, fail_fast=fail_fast, fresh=fresh, workers=pool,
                                   budget_from=started, publish_after=report)
                if report:
                    published = publish_sweep(result.sweep_id, settings, mlflow=cfg.output.mlflow)
        finally:
            if pool is not None:
                pool.close()
    except ResultsSpooledError as e:  # every config evaluated, results safe in the spool: not an input error
        console.print(f"[red]error:[/red] {escape(redact(str(e)))}", soft_wrap=True, markup=True, highlight=False)
        raise typer.Exit(1)
    except RagbenchError as e:
        fail(e)
    except STORAGE_ERRORS as e:  # a full disk, a lost volume: the cause, on one line, not a traceback
        fail(RagbenchError(f"storage error: {str(e).strip().splitlines()[0][:300]}"))
    from ragbench.cli.sweep_output import closing, published_lines

    if fmt is Format.table:
        closing(result, settings, published)
        db = (result.home / "results.duckdb")
        console.print(f"per-query results: duckdb {db}  (e.g. SELECT * FROM query_metrics WHERE sweep_id = "
                      f"'{result.sweep_id}')", highlight=False)
    else:
        typer.echo(leaderboard_text(result, fmt.value))
    if report:
        for line in published_lines(published, settings, cfg.output.mlflow):
            console.print(line, highlight=False, soft_wrap=True)
    if result.n_failed:
        raise typer.Exit(1)


@app.command()
def doctor(
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (default $RAGBENCH_HOME or ./.ragbench)")] = None,
    repair: Annotated[bool, typer.Option(help="quarantine damaged cache entries and delete damaged collections "
                                              "(the next sweep recomputes them); merge results a sweep kept in "
                                              "the spool while results.duckdb was busy; set a damaged "
                                              "results.duckdb or mlflow.db aside (renamed) and rebuild it from "
                                              "what survives")] = False,
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
    for line in report.lost:
        console.print(f"not recovered: {escape(line)}", highlight=False, soft_wrap=True)
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
        fail(e)
    except Exception as e:  # MLflow's own errors (a server that died mid-upload): one line, not a traceback
        if not type(e).__module__.startswith(("mlflow", "requests", "urllib3", "sqlalchemy", "psycopg")):
            raise
        fail(RagbenchError(f"MLflow at {settings.mlflow_tracking_uri}: {str(e).strip().splitlines()[0][:300]}"), 1)
    console.print(f"uploaded {n} config run(s) to MLflow")


def _folder_table(scan) -> Table:
    t = Table(title=f"files in {scan.root}", title_justify="left")
    for c in ("type", "files", "documents", "skipped"):
        t.add_column(c, justify="left" if c == "type" else "right")
    for suffix, n in scan.by_type().items():
        t.add_row(suffix, str(n["files"]), str(n["documents"]), str(n["skipped"]))
    return t


def _spec_for(path: Optional[Path], config: Optional[Path], given: dict):
    """The dataset spec ``datasets validate`` checks: a sweep config's dataset (``--config``, or a YAML given as the
    path), else the format that recognizes the path (:func:`ragbench.data.detect_format`: a SQuAD file, a BEIR
    folder, a folder of documents, ...); ``given`` options override its fields."""
    from ragbench.config import DatasetSpec, load_config
    from ragbench.data import detect_format

    if config is None and path is not None and path.suffix in (".yaml", ".yml") and path.is_file():
        config, path = path, None
    if config is not None:
        base = load_config(config).dataset.model_dump()
        if path is not None:
            base["path"] = path
    elif path is not None:
        base = {"path": path, "format": detect_format(path)}
        if base["format"] != "folder":  # a folder keeps its unlabelled questions anyway: one fingerprint with a sweep
            base["queries"] = "all"
    else:
        raise RagbenchError("give a dataset PATH or --config FILE")
    if given.get("questions") is not None:  # a path on the command line is relative to the working directory
        given["questions"] = _questions_from_cwd(Path(given["questions"]), Path(base["path"]))
    return DatasetSpec(**{**base, **given})


def _questions_from_cwd(given: Path, folder: Path) -> Path:
    """``--questions`` resolved against the working directory; one found only inside the documents folder (where
    it was looked up before) is an error naming the path to give."""
    resolved = given.expanduser().resolve()
    if not resolved.exists() and not given.is_absolute() and (folder / given).exists():
        raise RagbenchError(f"--questions {given}: no such file here (paths on the command line are relative to the "
                            f"working directory); give {folder / given}")
    return resolved


_INCLUDE = typer.Option(help="folder datasets: glob of files to read (repeat it); default every file")
_EXCLUDE = typer.Option(help="folder datasets: glob of files to leave out (repeat it)")


def _detail_table(detail) -> Table:
    """A :class:`~ragbench.data.DetailTable` as a rich table (first column left, the counts right)."""
    t = Table(title=detail.title, title_justify="left")
    for i, c in enumerate(detail.columns):
        t.add_column(c, justify="left" if i == 0 else "right")
    for row in detail.rows:
        t.add_row(*row)
    return t


@datasets_app.command("validate")
@with_dataset_options
def datasets_validate(
    path: Annotated[Optional[Path], typer.Argument(help="a folder of documents, a BEIR folder, a SQuAD JSON file, or "
                                                        "a sweep YAML (its dataset)")] = None,
    config: Annotated[Optional[Path], typer.Option(help="validate the dataset section of this sweep config "
                                                        "(options below then override its fields)")] = None,
    home: Annotated[Optional[Path], typer.Option(help="ragbench home whose cache keeps converted documents")] = None,
    given: dict | None = None,
) -> None:
    """Load a dataset with full validation and print its summary. Every problem is listed at once, each naming its
    file and line; files that cannot be read are skipped with a warning. Exit code 2 when the labels are invalid.

    Takes the same dataset options as a sweep config's `dataset` section (`--squad-documents article`, ...: one
    option per field of the dataset formats' options), or `--config FILE` to validate that config's dataset
    exactly as a sweep would load it (same fingerprint).
    """
    from pydantic import ValidationError

    from ragbench.core.settings import Settings
    from ragbench.data import holdout_split

    details = ()
    try:
        spec = _spec_for(path, config, given or {})
        ds, details = spec.load_with_details(Settings.from_env(home=home).home / "cache")
        split_line = holdout_split(ds.queries, ds.qrels, spec.holdout_fraction, spec.seed).describe() \
            if spec.holdout is not None else None
    except ValidationError as e:
        fail(RagbenchError("invalid dataset options: " + "; ".join(
            f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())))
    except RagbenchError as e:
        fail(e)
    for detail in details:
        console.print(_detail_table(detail))
    t = Table(title=f"{spec.path}")
    t.add_column("property")
    t.add_column("value", justify="right")
    for k, v in ds.summary().items():
        t.add_row(k, str(v))
    console.print(t)
    if split_line:
        console.print(split_line)
    for w in ds.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(w)}")


@datasets_app.command("init")
def datasets_init(
    path: Annotated[Path, typer.Argument(help="the folder of documents")],
    questions: Annotated[str, typer.Option(help="name of the questions template to write in the folder "
                                                "(.csv, .jsonl or .yaml)")] = "questions.csv",
    include: Annotated[list[str], _INCLUDE] = [],  # noqa: B006
    exclude: Annotated[list[str], _EXCLUDE] = [],  # noqa: B006
    tokenizer: Annotated[str, typer.Option(help="tokenizer that counts tokens")] = "all-MiniLM-L6-v2",
    home: Annotated[Optional[Path], typer.Option(help="ragbench home whose cache keeps converted documents")] = None,
) -> None:
    """Scan a folder of documents: convert every file (cached for the sweep), print what was found — files by type,
    files that could not be read and why, total tokens — and write a questions template with two example rows
    (an existing questions file is left as it is)."""
    from ragbench.core.models import count_tokens
    from ragbench.core.settings import Settings
    from ragbench.data.folder import scan_folder
    from ragbench.data.questions import SUFFIXES, find_questions_file, write_template

    if Path(questions).suffix.lower() not in SUFFIXES:
        fail(ValueError(f"--questions {questions}: a questions file is {', '.join(SUFFIXES)}"))
    target = path / questions
    existing = find_questions_file(path) if path.is_dir() else None
    try:
        scan = scan_folder(path, tuple(include), tuple(exclude), cache_root=Settings.from_env(home=home).home /
                           "cache", questions=existing or target)
    except RagbenchError as e:
        fail(e)
    stdout.print(_folder_table(scan))
    for w in scan.warnings():
        stdout.print(f"[yellow]warning:[/yellow] {escape(w)}")
    for line in scan.boilerplate():
        stdout.print(escape(line))
    texts = [d.text for d in scan.documents]
    try:
        tokens, unit = sum(count_tokens(texts, tokenizer)), f"tokens ({tokenizer})"
    except RagbenchError:  # no tokenizer offline: words still say how big the folder is
        tokens, unit = sum(len(t.split()) for t in texts), "words"
    stdout.print(f"{len(scan.documents)} documents, {sum(len(t) for t in texts):,} characters, {tokens:,} {unit}; "
                 f"{len(scan.skipped)} file(s) skipped")
    if existing is not None:
        stdout.print(f"questions file {existing} exists: left as it is")
    else:
        write_template(target, {d.doc_id: d.text for d in scan.documents},
                       {d.doc_id: d.title for d in scan.documents})
        stdout.print(f"wrote {target}: columns question, doc, quote, answer, class (and optional id, relevance); "
                     "replace the two example rows with your questions")
    stdout.print(f"next: fill in the questions, then `ragbench datasets validate {path}`, then sweep with\n"
                 f"  dataset: {{format: folder, path: {path}}}")


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
            splits = ",".join(sorted(p.stem for p in (d / "qrels").glob("*.tsv")
                                     if not p.stem.endswith(".judged")))  # added judgments are no split
            spans = "yes" if (d / "spans").is_dir() or (d / "sentences.jsonl").exists() else "no"
            t.add_row(str(d), str(n_docs), str(n_q), splits, spans)
    console.print(t)


from ragbench.cli.regression_gate import register as _register_gate  # noqa: E402
from ragbench.cli.ops import register as _register_ops  # noqa: E402
from ragbench.cli.diff import register as _register_diff  # noqa: E402
from ragbench.cli.plan import register as _register_plan  # noqa: E402
from ragbench.cli.questions import questions_app  # noqa: E402
from ragbench.cli.judge import judge_app  # noqa: E402

_register_ops(app)
_register_diff(app)
_register_plan(app)
app.add_typer(questions_app, name="questions")
app.add_typer(judge_app, name="judge")
_register_gate(app)

if __name__ == "__main__":  # pragma: no cover
    app()
