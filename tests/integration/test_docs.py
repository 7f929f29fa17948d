"""The README and the manual under docs/ as written: the site builds with ``mkdocs build --strict``, the reference
pages follow the code, README.md stays a front page, and every fenced shell block runs or parses.

Each ```bash block carries an HTML comment just before it, which a reader of the docs does not see:
``<!-- docs-test: run -->`` blocks run line by line, as written, in a scratch copy of the checkout (the top-level
entries linked, its own ``.ragbench``: a copy of the session's demo home when a block sweeps the demo);
``<!-- docs-test: check -->`` blocks (long sweeps, make targets, servers) are parsed: a ragbench command must parse
with its subcommand's options (and ``--help`` of it succeed), ``make`` targets must exist, ``prefect``/``mlflow``
subcommands must take the options given, ``docker compose`` must name services of docker-compose.yml, and every
repository path a command names must exist.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import yaml
from conftest import clean_env

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
HOOK = ROOT / "docs" / "hooks" / "reference.py"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARK = re.compile(r"<!--\s*docs-test:\s*(run|check)\s*-->")
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL = {"bash", "sh", "shell", "console"}
#: top-level entries of the checkout left out of a scratch copy (state a run makes, or none of the docs' business)
NOT_LINKED = {".git", ".ragbench", "site", "my-docs"}


@dataclass(frozen=True)
class Block:
    """A fenced shell block of a page: ``mode`` is 'run', 'check' or None (unmarked); ``line`` its first line."""

    page: Path
    line: int
    mode: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def shell_blocks(page: Path) -> list[Block]:
    """The page's fenced shell blocks with the docs-test mark on the line before each (if any)."""
    text = page.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        if m.group(1) not in SHELL:
            continue
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        out.append(Block(page, text[: m.start()].count("\n") + 1, mark.group(1) if mark else None, m.group(2)))
    return out


def commands(block_text: str) -> list[str]:
    """The block's commands, one per logical line: continuations joined, comments and heredoc bodies left out."""
    out, pending, heredoc = [], "", None
    for raw in block_text.splitlines():
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        line = pending + raw
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            out.append(stripped)
            here = re.search(r"<<-?\s*'?\"?(\w+)", stripped)
            heredoc = here.group(1) if here else None
    return out


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in shell_blocks(page)]


# ---------------------------------------------------------------- the site and the front page
def test_mkdocs_build_strict_writes_the_reference_pages(tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    for page in ("sweep-file", "measures", "settings", "cli"):
        assert (site / "reference" / page / "index.html").is_file(), page
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "ragbench datasets validate" in cli and "--squad-documents" in cli


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    first = shell_blocks(ROOT / "README.md")[0]
    assert first.line <= 5 and [w for c in commands(first.text) for w in words(c)] == [["make", "demo"],
                                                                                     ["make", "test"]]
    tour = "\n".join(b.text for b in shell_blocks(ROOT / "README.md") if b.mode == "run")
    for step in ("sweep configs/demo.yaml", "report latest", "explain latest", "promote latest"):
        assert step in tour, step
    assert "make test-fast" in readme


def test_no_hand_kept_copies_of_the_generated_tables():
    """The settings, measure-key and CLI tables live only in the generated reference pages."""
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        rows = [line for line in text.splitlines() if line.startswith("|")]
        assert not [r for r in rows if re.match(r"\|\s*`(RAGBENCH_|MLFLOW_TRACKING_URI)", r)], page
        assert not [r for r in rows if re.match(r"\|\s*`(recall|ndcg|mrr)_at_", r)], page
    settings_doc = (ROOT / "ragbench" / "core" / "settings.py").read_text(encoding="utf-8").split('"""')[1]
    assert "RAGBENCH_" not in settings_doc


# ---------------------------------------------------------------- the reference pages follow the code
def _hook():
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reference_pages_name_every_command_measure_setting_and_kind():
    import dataclasses

    import typer.main

    from ragbench.cli import app
    from ragbench.core.settings import Settings
    from ragbench.evaluation.measures import RANK_MEASURES

    hook = _hook()
    cli = hook.cli_page()
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        subs = getattr(cmd, "commands", {name: cmd})
        for sub_name, sub in subs.items():
            title = f"## ragbench {name}" + (f" {sub_name}" if sub is not cmd else "")
            assert title in cli, title
            for p in sub.params:
                assert f"`{p.opts[0]}`" in cli or p.param_type_name == "argument", (title, p.opts)
    measures = hook.measures_page()
    for name in RANK_MEASURES:
        assert f"| `{name}` | `{name}_at_10` |" in measures, name
    settings = hook.settings_page()
    rows = {r.split(" | ")[1].strip("`"): r.split(" | ")[0].lstrip("| ") for r in settings.splitlines()
            if r.startswith("| `") or r.startswith("| –")}
    # every setting is set by a variable, each found by reading it through Settings.from_env
    assert {k: v for k, v in rows.items() if v == "–"} == {}
    assert set(rows) == {f.name for f in dataclasses.fields(Settings)} - {"environ"}
    assert "| `RAGBENCH_HOME` | `home` | `.ragbench` |" in settings
    assert "| `RAGBENCH_PROGRESS` | `progress` | `True` |" in settings
    assert "| `RAGBENCH_RESULTS_BUSY_WAIT` | `results_busy_wait_s` | `5.0` |" in settings


def test_sweep_file_reference_lists_a_newly_registered_kind():
    from typing import Literal

    from pydantic import Field

    from ragbench.chunking import CHUNKERS, ChunkerSpec

    class Paragraphs(ChunkerSpec):
        """One chunk per paragraph, for this test."""

        kind: Literal["docs-test-paragraphs"] = "docs-test-paragraphs"
        min_chars: int = Field(1, gt=0, description="paragraphs shorter than this join the next one")

        def spans(self, text):
            return [(0, len(text))]

    CHUNKERS.register(Paragraphs)
    try:
        page = _hook().sweep_file_page()
    finally:
        CHUNKERS.unregister("docs-test-paragraphs")
    assert "### kind: docs-test-paragraphs " in page
    section = page.split("### kind: docs-test-paragraphs ", 1)[1].split("\n### ", 1)[0]
    assert "One chunk per paragraph, for this test." in section
    assert "| `min_chars` | `int` (> 0) | `1` | paragraphs shorter than this join the next one |" in section
    for kind in CHUNKERS.kinds:
        assert f"### kind: {kind} " in page, kind


# ---------------------------------------------------------------- every shell block: marked, then run or checked
def test_every_shell_block_is_marked_run_or_check():
    unmarked = [str(b) for b in all_blocks() if b.mode is None]
    assert not unmarked, f"shell blocks without <!-- docs-test: run|check -->: {unmarked}"
    assert {b.mode for b in all_blocks()} == {"run", "check"}


@cache
def _compose() -> tuple[set[str], set[str]]:
    spec = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    services = set(spec["services"])
    profiles = {p for s in spec["services"].values() for p in s.get("profiles", ())}
    return services, profiles


@cache
def _help(argv: tuple[str, ...]) -> str:
    """``argv --help`` as run in the checkout; its exit status must be 0."""
    proc = subprocess.run([*argv, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=clean_env(COLUMNS="200", NO_COLOR="1"))
    assert proc.returncode == 0, f"{' '.join(argv)} --help: {proc.stderr[-2000:]}"
    return proc.stdout + proc.stderr


def _options(args: list[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def _check_ragbench(args: list[str]) -> None:
    """The subcommand exists, ``--help`` of it succeeds, and the arguments parse with its options."""
    import typer.main
    from typer.testing import CliRunner

    from ragbench.cli import app

    cmd, path, rest = typer.main.get_command(app), [], list(args)
    while hasattr(cmd, "commands") and rest and rest[0] in cmd.commands:
        cmd = cmd.commands[rest[0]]
        path.append(rest.pop(0))
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    if rest == ["--version"] or rest == ["--help"]:
        return
    ctx = cmd.make_context(" ".join(["ragbench", *path]), rest)  # raises on an unknown option or a missing argument
    ctx.close()


def _check_program(argv: list[str]) -> None:
    prog, args = Path(argv[0]).name, argv[1:]
    if prog == "ragbench":
        _check_ragbench(args)
    elif prog == "make":
        for target in [a for a in args if not a.startswith("-")]:
            proc = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, f"make {target}: {proc.stderr}"
    elif prog in ("prefect", "mlflow"):
        words = []
        for a in args:
            if not re.fullmatch(r"[a-z][a-z-]*", a):
                break
            words.append(a)
        text = _help((str(ROOT / ".venv" / "bin" / prog), *words))
        for opt in _options(args):
            assert opt in text, f"{prog} {' '.join(words)}: no option {opt}"
    elif prog.startswith("python"):
        if args[:1] == ["-m"]:
            assert importlib.util.find_spec(args[1]) is not None, f"no module {args[1]}"
            argv_help, rest = (sys.executable, "-m", args[1]), args[2:]
        else:
            argv_help, rest = (sys.executable, args[0]), args[1:]
        text = _help(argv_help)
        for opt in _options(rest):
            assert opt in text, f"{' '.join(argv_help)}: no option {opt}"
    elif prog == "docker":
        _check_compose(args)


def _check_compose(args: list[str]) -> None:
    """Services and profiles named by ``docker compose`` exist; a command run in a service is checked too."""
    services, profiles = _compose()
    for i, a in enumerate(args):
        if a == "--profile":
            assert args[i + 1] in profiles, args[i + 1]
        if a == "--scale":
            assert args[i + 1].split("=")[0] in services, args[i + 1]
    if "exec" in args or "run" in args:
        i = args.index("exec") if "exec" in args else args.index("run")
        rest = [a for a in args[i + 1:] if a != "--rm"]
        assert rest and rest[0] in services, rest
        if len(rest) > 1:
            _check_program(rest[1:])


def _repo_paths(argv: list[str]) -> list[str]:
    """The arguments that name a path inside the checkout (``key=value`` values included)."""
    tops = {p.name for p in ROOT.iterdir()} - NOT_LINKED
    out = []
    for a in argv:
        value = a.split("=", 1)[1] if "=" in a and not a.startswith("-") else a
        if "://" not in value and value.split("/", 1)[0] in tops and "/" in value:
            out.append(value)
    return out


def words(command: str) -> list[list[str]]:
    """The simple commands of a command line, as argument lists: comments dropped, split at ``&&``, ``||``,
    ``|``, ``;`` and ``&``; a redirect and its target left out."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=True)
    lex.whitespace_split, lex.commenters = True, "#"
    out, argv, redirect = [], [], False
    for tok in lex:
        if tok in ("&&", "||", "|", ";", "&"):
            out.append(argv)
            argv = []
        elif tok in (">", ">>", "<<", "<"):
            redirect = True
        elif redirect:
            redirect = False
        else:
            argv.append(tok)
    return [a for a in [*out, argv] if a]


def check_command(command: str) -> None:
    """Parse one command line of a check block, simple command by simple command."""
    for argv in words(command):
        while argv and (re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", argv[0]) or argv[0] == "export"):
            argv = argv[1:]
        if not argv:
            continue
        for path in _repo_paths(argv):
            assert (ROOT / path).exists(), f"{command!r} names {path}, which does not exist"
        _check_program(argv)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.mode == "check"], ids=str)
def test_checked_block_parses_and_names_existing_files(block):
    for command in commands(block.text):
        check_command(command)


def sweep_file_examples() -> list[Block]:
    """The ```yaml blocks of the pages that are whole sweep files (a mapping with ``name`` and ``dataset``)."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            data = yaml.safe_load(m.group(2)) if m.group(1) == "yaml" else None
            if isinstance(data, dict) and {"name", "dataset"} <= set(data):
                out.append(Block(page, text[: m.start()].count("\n") + 1, None, m.group(2)))
    return out


@pytest.mark.parametrize("block", sweep_file_examples(), ids=str)
def test_sweep_file_examples_load(block, tmp_path):
    """A sweep file shown in the docs passes the loader's checks, as if saved in configs/."""
    from ragbench.config import load_config

    (tmp_path / "configs").mkdir()
    (tmp_path / "datasets").symlink_to(ROOT / "datasets")
    path = tmp_path / "configs" / "example.yaml"
    path.write_text(block.text, encoding="utf-8")
    assert load_config(path).expand()


# ---------------------------------------------------------------- run blocks, as written
def scratch_checkout(where: Path, demo_home: Path | None) -> Path:
    """A folder that looks like the checkout (its top-level entries linked) with a ``.ragbench`` of its own: a copy
    of ``demo_home``, or of its cache only once something was promoted there (the tour promotes the best config,
    which a home with that config already in production refuses)."""
    where.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in NOT_LINKED:
            (where / entry.name).symlink_to(entry)
    if demo_home is not None and _promoted(demo_home):
        shutil.copytree(demo_home / "cache", where / ".ragbench" / "cache", symlinks=True)
    elif demo_home is not None:
        shutil.copytree(demo_home, where / ".ragbench", symlinks=True)
    return where


def _promoted(home: Path) -> bool:
    import duckdb

    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    try:
        tables = {t for (t,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return "promotions" in tables and con.execute("SELECT count(*) FROM promotions").fetchone()[0] > 0
    finally:
        con.close()


def run_pages() -> list[Path]:
    return [p for p in PAGES if any(b.mode == "run" for b in shell_blocks(p))]


@pytest.mark.parametrize("page", run_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_run_blocks_run_as_written(page, tmp_path, request):
    blocks = [b for b in shell_blocks(page) if b.mode == "run"]
    sweeps_demo = any("configs/demo.yaml" in b.text for b in blocks)
    # the demo sweep the session already ran: a warm rerun of it reuses every result
    demo_home = request.getfixturevalue("demo_sweep").home if sweeps_demo else None
    root = scratch_checkout(tmp_path / "checkout", demo_home)
    for block in blocks:
        for command in commands(block.text):
            proc = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, text=True, timeout=900,
                                  env=clean_env())
            assert proc.returncode == 0, f"{block}: {command}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
