"""``ragbench questions generate``: synthetic questions for a folder that has none (see
:mod:`ragbench.generation.synthetic`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

questions_app = typer.Typer(help="Questions for a folder of documents.", no_args_is_help=True)


@questions_app.command("generate")
def generate(
    path: Annotated[Path, typer.Argument(help="the folder of documents")],
    n: Annotated[int, typer.Option("--n", help="questions wanted (up to 3 n passages are asked)", min=1)] = 50,
    out: Annotated[Optional[Path], typer.Option(help="CSV to write, relative to the current directory (default: "
                                                     "DIR/questions.synthetic.csv)")] = None,
    force: Annotated[bool, typer.Option(help="overwrite an existing file")] = False,
    seed: Annotated[int, typer.Option(help="seed of the passage sample")] = 0,
    model: Annotated[Optional[str], typer.Option(help="packaged model name or .gguf path (default: "
                                                      "$RAGBENCH_LLM_MODEL, else qwen2.5-coder-1.5b, about 12 s a "
                                                      "question on 2 cores; smollm2-135m is 4x faster but most of "
                                                      "its questions are not answered by their quote)")] = None,
    threads: Annotated[int, typer.Option(help="llama-server CPU threads", min=1)] = 1,
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (conversion and LLM caches)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object (file, model, yields by stage, "
                                                          "drops by reason, overlap, LLM seconds, next command) "
                                                          "instead of the summary")] = False,
) -> None:
    """Let the local LLM write questions with quotes from a seeded sample of passages. Each reply is constrained
    to JSON whose quote is one of the passage's sentences (code-only passages are skipped); a question is kept when
    its quote is located once in its document, it is a question (not the quote copied), it does not copy the
    prompt's example and is no duplicate (the others are dropped and counted by reason: the yields by stage are
    printed with the LLM's seconds per question). Every row is marked synthetic with its lexical overlap with the
    passage. Sweep on the file with `dataset: {format: folder, path: DIR, questions:
    questions.synthetic.csv}`; LLM answers are cached, so a rerun (--force) asks nothing new."""
    import json

    from ragbench.cli.options import fail
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import stdout
    from ragbench.core.settings import Settings
    from ragbench.data.labels import synthetic_warnings
    from ragbench.generation.synthetic import QuestionsRequest, generate_for_folder, next_command

    try:
        settings = Settings.from_env(home=home)
        request = QuestionsRequest(n, out=out, force=force, seed=seed, model=model, threads=threads)
        written, gen = generate_for_folder(path, settings, request)
    except RagbenchError as e:
        fail(e)
    warnings = synthetic_warnings({"synthetic_lexical_overlap": gen.mean_overlap if gen.questions else None})
    command = next_command(path, written) if gen.questions else None
    if json_out:
        typer.echo(json.dumps({"file": str(written.resolve()), "model": gen.model, "kept": len(gen.questions),
                               "yields": gen.yields(), "dropped": dict(sorted(gen.dropped.items())),
                               "answered_from_cache": gen.cached, "skipped_code_only": gen.skipped,
                               "mean_lexical_overlap": round(gen.mean_overlap, 3) if gen.questions else None,
                               "llm_seconds": round(gen.llm_seconds, 1),
                               "seconds_per_question": (round(gen.seconds_per_question, 1)
                                                        if gen.questions else None),
                               "warnings": warnings, "next": command}, ensure_ascii=False))
    else:
        stdout.print(f"wrote {written}: {gen.describe()}", highlight=False)
        for w in warnings:
            stdout.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    if not gen.questions:
        fail(RagbenchError("no question kept (see the yields above); try a larger --n or another --model"))
    if not json_out:
        stdout.print(f"next: `{command}`", highlight=False)
