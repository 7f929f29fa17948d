"""``ragbench judge``: fill the label holes of a sweep's dataset (:mod:`ragbench.judgments`).

``judge pool`` writes what the sweep's configs retrieved that nobody judged; people fill its ``relevance`` column;
``judge merge`` stores the filled rows beside the dataset's own labels; a rerun of the sweep re-judges every
config from its stored rankings. Other ``judge`` commands register on :data:`judge_app`.
"""

from __future__ import annotations

import getpass
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragbench.cli.options import home_store

judge_app = typer.Typer(help="Judge what a sweep retrieved that the labels do not cover: pool, fill, merge, rerun.",
                        no_args_is_help=True)

SweepArg = Annotated[str, typer.Argument(help="sweep id, unique id prefix, or 'latest'")]
HomeOpt = Annotated[Optional[Path], typer.Option(help="ragbench home (default: $RAGBENCH_HOME, else ./.ragbench)")]


class PoolFormat(str, Enum):
    csv = "csv"
    jsonl = "jsonl"


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "unknown"


@judge_app.command("pool")
def pool(
    sweep: SweepArg = "latest",
    depth: Annotated[int, typer.Option(help="pool the top DEPTH documents of every config", min=1)] = 10,
    out: Annotated[Optional[Path], typer.Option(help="file to write (default: HOME/pools/<sweep>-depth<D>.<fmt>)")]
    = None,
    fmt: Annotated[PoolFormat, typer.Option("--format", help="csv (opens in a spreadsheet) or jsonl")]
    = PoolFormat.csv,
    home: HomeOpt = None,
) -> None:
    """Write the judgment pool of SWEEP (TREC pooling): for every labelled query, each document in the top DEPTH of
    any finished config that the labels do not judge, one row each with the question, the passage that ranked
    best, how many configs ranked it (votes), its best rank and the answer strings found in it. Fill `relevance`
    (blank: not judged, 0: not relevant, 1-3: graded), then `ragbench judge merge FILE`."""
    from ragbench.cli.options import fail
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import stdout
    from ragbench.judgments.pool import build_pool
    from ragbench.judgments.pool_file import write_pool
    from ragbench.results.lookup import resolve_sweep_id

    try:
        store, settings = home_store(home)
        h = Path(settings.home)
        sid = resolve_sweep_id(store, sweep)
        rows = build_pool(store, sid, h, depth)
        path = out if out is not None else h / "pools" / f"{sid}-depth{depth}.{fmt.value}"
        write_pool(rows, path, fmt.value)
    except (RagbenchError, OSError) as e:
        fail(e)
    queries = len({r.query_id for r in rows})
    hints = sum(bool(r.answer_in_passage) for r in rows)
    stdout.print(f"wrote {path}: {len(rows)} unjudged document(s) of {queries} question(s) (top {depth} of every "
                 f"config; {hints} passage(s) contain the answer)", highlight=False)
    stdout.print(f"next: fill the relevance column, then `ragbench judge merge {path} --sweep {sid}`", highlight=False)


@judge_app.command("merge")
def merge(
    file: Annotated[Path, typer.Argument(help="a filled pool file (CSV or JSON Lines)")],
    sweep: Annotated[str, typer.Option(help="the sweep whose dataset the pool is of (id, prefix or 'latest')")]
    = "latest",
    judge: Annotated[Optional[str], typer.Option(help="who judged the rows (default: your login name)")] = None,
    fmt: Annotated[Optional[PoolFormat], typer.Option("--format", help="the file's format (default: by suffix)")]
    = None,
    force: Annotated[bool, typer.Option(help="merge an assessor's grades even when its kappa with people is below "
                                             "0.4 (or was never measured)")] = False,
    home: HomeOpt = None,
) -> None:
    """Store the filled rows of FILE as the dataset's second label source (judgments.csv beside a folder's
    questions, qrels/<split>.judged.tsv of BEIR), each with its source (person, or assessor:<model>), judge and
    time. Every row is checked first (relevance blank or 0-3, a query and document of the dataset, not already
    labelled); merging a row again updates it. Then rerun the sweep: it re-judges every config from its stored
    rankings, computing no vectors. An assessor's rows (`judge assess`) are refused while its kappa with people is
    below 0.4, unless --force."""
    import json

    from ragbench.cli.options import fail
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import stdout
    from ragbench.data import DatasetSpec
    from ragbench.judgments.merge import merge_pool
    from ragbench.judgments.pool import sweep_dataset
    from ragbench.results.lookup import resolve_sweep_id

    try:
        store, settings = home_store(home)
        h = Path(settings.home)
        sid = resolve_sweep_id(store, sweep)
        spec = DatasetSpec.model_validate(json.loads(store.sweep(sid)["spec_json"])["dataset"])
        ds = sweep_dataset(store, sid, h)
        result = merge_pool(file, ds, spec, judge or _login(), fmt=fmt.value if fmt else None, store=store,
                            force=force)
    except (RagbenchError, OSError) as e:
        fail(e)
    stdout.print(f"merged {file} into {result.describe()}", highlight=False)
    if result.added or result.updated:
        stdout.print("next: rerun the sweep; it re-judges every config from its stored rankings", highlight=False)


from ragbench.cli.judge_assess import register as _register_assess  # noqa: E402

_register_assess(judge_app)
