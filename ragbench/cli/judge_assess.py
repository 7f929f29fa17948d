"""``ragbench judge assess``: an LLM assessor fills a pool file's blank relevance, after grading pairs people judged
(:mod:`ragbench.judgments.assess`). Registered on ``judge_app`` by :func:`register`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def assess(
    file: Annotated[Path, typer.Argument(help="a pool file of `ragbench judge pool` (CSV or JSON Lines)")],
    sweep: Annotated[str, typer.Option(help="the sweep whose dataset the pool is of (id, prefix or 'latest')")]
    = "latest",
    model: Annotated[Optional[str], typer.Option(help="packaged model name or .gguf path served by a local "
                                                      "llama-server (default: $RAGBENCH_LLM_MODEL, else "
                                                      "smollm2-135m; neither packaged model agreed with people on "
                                                      "the demo, see docs/diagnosis.md), or the model name of "
                                                      "--endpoint")] = None,
    endpoint: Annotated[Optional[str], typer.Option(help="an OpenAI-compatible endpoint (e.g. "
                                                         "http://host:8080) instead of the local server; its key in "
                                                         "$RAGBENCH_LLM_API_KEY")] = None,
    out: Annotated[Optional[Path], typer.Option(help="file to write (default: FILE.assessed.csv or .jsonl beside it)")]
    = None,
    sample: Annotated[int, typer.Option(help="pairs people judged that the assessor grades first", min=1)] = 60,
    seed: Annotated[int, typer.Option(help="seed of that sample")] = 0,
    force: Annotated[bool, typer.Option(help="overwrite an existing --out file")] = False,
    threads: Annotated[int, typer.Option(help="llama-server CPU threads", min=1)] = 2,
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (default: $RAGBENCH_HOME, else ./.ragbench)")]
    = None,
) -> None:
    """Grade the blank rows of a pool file 0-3 with an LLM (UMBRELA's levels: 0 nothing to do with the question,
    1 related but does not answer, 2 answers in part or among other text, 3 dedicated to it and answers it; the
    reply constrained to a JSON schema, grades cached under the home). First it grades a seeded sample of pairs
    people judged (the dataset's labels, merged person judgments, rows a person filled in FILE) and stores Cohen's
    kappa and the confusion matrix; below kappa 0.4 its grades are written but `judge merge` refuses them without
    --force. Rows keep source = assessor:<model>, judge and judged_at."""
    import json

    from ragbench.cli.options import fail
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import stdout
    from ragbench.core.settings import Settings
    from ragbench.data import DatasetSpec
    from ragbench.data.judged import read_judgments
    from ragbench.judgments.assess import AssessRequest, assess_pool
    from ragbench.judgments.assessor import AssessorChoice, open_assessor
    from ragbench.judgments.merge import target_path
    from ragbench.judgments.pool import sweep_dataset
    from ragbench.results.lookup import resolve_sweep_id
    from ragbench.results.store import ResultStore

    try:
        if not file.is_file():
            raise RagbenchError(f"{file}: pool file not found (write one with `ragbench judge pool SWEEP`)")
        settings = Settings.from_env(home=home).apply()
        h = Path(settings.home)
        if not (h / "results.duckdb").is_file():
            raise RagbenchError(f"no results at {h / 'results.duckdb'}; run `ragbench sweep CONFIG` first or pass "
                                "--home")
        store = ResultStore(h / "results.duckdb")
        sid = resolve_sweep_id(store, sweep)
        ds = sweep_dataset(store, sid, h)
        spec = DatasetSpec.model_validate(json.loads(store.sweep(sid)["spec_json"])["dataset"])
        judged = [j for _, j in read_judgments(target_path(spec))]  # merged before: the person rows calibrate
        request = AssessRequest(file, out=out, sample=sample, seed=seed, force=force)
        with open_assessor(settings, AssessorChoice(model=model, endpoint=endpoint, threads=threads)) as assessor:
            result = assess_pool(assessor, ds, request, store, judgments=judged)
    except (RagbenchError, OSError) as e:
        fail(e)
    a = result.agreement
    stdout.print(result.describe(), highlight=False)
    stdout.print(f"agreement with people: {a.describe()}", highlight=False)
    stdout.print("person grade (rows) x assessor grade (columns) 0-3:", highlight=False)
    for grade, row in enumerate(a.confusion):
        stdout.print(f"  {grade}: " + " ".join(f"{c:4d}" for c in row), highlight=False)
    if a.seconds_per_pair is not None:
        stdout.print(f"{a.seconds_per_pair:.2f} s per pair", highlight=False)
    stdout.print(next_command(result.out, sid, a.trusted), highlight=False)


def next_command(out: Path, sweep_id: str, trusted: bool) -> str:
    """The line that says what to run next: ``judge merge`` of the written file, with ``--force`` inside the
    backticks when the assessor's κ is below 0.4 (merge refuses it otherwise)."""
    force = "" if trusted else " --force"
    return (f"next: `ragbench judge merge {out} --sweep {sweep_id}{force}`"
            + ("" if trusted else " (κ below 0.4: check its grades first)"))


def register(app: typer.Typer) -> None:
    """Add ``assess`` to the ``judge`` command group."""
    app.command("assess")(assess)
