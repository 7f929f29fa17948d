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
    out: Annotated[Optional[Path], typer.Option(help="CSV to write (default: DIR/questions.synthetic.csv)")] = None,
    force: Annotated[bool, typer.Option(help="overwrite an existing file")] = False,
    seed: Annotated[int, typer.Option(help="seed of the passage sample")] = 0,
    model: Annotated[Optional[str], typer.Option(help="packaged model name or .gguf path (default: "
                                                      "$RAGBENCH_LLM_MODEL, else smollm2-135m; "
                                                      "qwen2.5-coder-1.5b writes far better questions)")] = None,
    threads: Annotated[int, typer.Option(help="llama-server CPU threads", min=1)] = 1,
    home: Annotated[Optional[Path], typer.Option(help="ragbench home (conversion and LLM caches)")] = None,
) -> None:
    """Let the local LLM write questions with quotes from a seeded sample of passages. Each kept question's quote
    is located in its document (the others are dropped and counted), and every row is marked synthetic with its
    lexical overlap with the passage. Sweep on the file with `dataset: {format: folder, path: DIR, questions:
    questions.synthetic.csv}`; LLM answers are cached, so a rerun (--force) asks nothing new."""
    from ragbench.cli.options import fail
    from ragbench.core.errors import RagbenchError
    from ragbench.core.progress import stdout
    from ragbench.core.settings import Settings
    from ragbench.data.labels import synthetic_warnings
    from ragbench.generation.synthetic import QuestionsRequest, generate_for_folder

    try:
        settings = Settings.from_env(home=home)
        request = QuestionsRequest(n, out=out, force=force, seed=seed, model=model, threads=threads)
        written, gen = generate_for_folder(path, settings, request)
    except RagbenchError as e:
        fail(e)
    stdout.print(f"wrote {written}: {gen.describe()}", highlight=False)
    for w in synthetic_warnings({"synthetic_lexical_overlap": gen.mean_overlap if gen.questions else None}):
        stdout.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    if not gen.questions:
        fail(RagbenchError("no question kept: the model's quotes were not found in the documents; try --model "
                            "qwen2.5-coder-1.5b or a larger --n"))
    stdout.print(f"next: `ragbench datasets validate {path} --questions {written.name}`", highlight=False)
