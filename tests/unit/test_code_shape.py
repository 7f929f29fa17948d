"""The shape of the code, read from the source (no import): files, functions and classes small enough to read.

Over all of ``ragbench/``: no file over 500 lines, no function over 8 parameters (every parameter but ``self`` and
``cls`` counts, keyword-only, ``*args`` and ``**kwargs`` included; group them in a small frozen dataclass instead).
In ``ragbench/sweep/``, the orchestration: no class over 200 lines and no function over 60 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: the package, found upwards from this file (the test may live in a tier folder)
PACKAGE = next(p / "ragbench" for p in Path(__file__).resolve().parents if (p / "ragbench" / "__init__.py").is_file())

MAX_FILE_LINES = 500
MAX_PARAMETERS = 8
MAX_SWEEP_CLASS_LINES = 200
MAX_SWEEP_FUNCTION_LINES = 60

#: typer command functions whose options typer reads from the signature (one parameter per CLI option, so they
#: cannot be grouped without changing the command line): ``ragbench/<path>:<function>``
TYPER_COMMANDS_ALLOWED = {
    "cli/main.py:sweep",  # ragbench sweep: config, --home, --resume, the worker and tracking options, --budget
    "cli/ops.py:report",  # ragbench report: sweep, --format, --out, the comparison options
    "cli/regression_gate.py:gate",  # ragbench gate: production, candidate, the probe and measure options
    "cli/questions.py:generate",  # ragbench questions generate: folder, --n, --out, --model, --json, ...
    "cli/judge_assess.py:assess",  # ragbench judge assess: pool, --sweep, --model/--endpoint, --out, --sample, ...
}


def _modules(root: Path = PACKAGE) -> list[Path]:
    return sorted(root.rglob("*.py"))


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _functions(tree: ast.AST):
    return (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def parameter_count(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters of ``fn`` but ``self``/``cls``: positional-only, positional, keyword-only, ``*args``,
    ``**kwargs``."""
    a = fn.args
    names = [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return len([n for n in names if n not in ("self", "cls")])


def _lines(node: ast.AST) -> int:
    """Lines a definition spans, decorators included."""
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def long_files(root: Path = PACKAGE) -> list[str]:
    """``path: N lines`` of every module under ``root`` over :data:`MAX_FILE_LINES`."""
    out = []
    for path in _modules(root):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            out.append(f"{root.name}/{_rel(path, root)}: {n} lines")
    return out


def many_parameters(root: Path = PACKAGE) -> list[str]:
    """``path:line name: N parameters`` of every function under ``root`` over :data:`MAX_PARAMETERS` (but the
    allowed typer commands)."""
    out = []
    for path in _modules(root):
        for fn in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            n = parameter_count(fn)
            if n > MAX_PARAMETERS and f"{_rel(path, root)}:{fn.name}" not in TYPER_COMMANDS_ALLOWED:
                out.append(f"{root.name}/{_rel(path, root)}:{fn.lineno} {fn.name}: {n} parameters")
    return out


def long_sweep_definitions(root: Path = PACKAGE) -> list[str]:
    """Classes over :data:`MAX_SWEEP_CLASS_LINES` and functions over :data:`MAX_SWEEP_FUNCTION_LINES` lines in
    ``root/sweep/``."""
    out = []
    for path in _modules(root / "sweep"):
        where = f"{root.name}/{_rel(path, root)}"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and _lines(node) > MAX_SWEEP_CLASS_LINES:
                out.append(f"{where}:{node.lineno} class {node.name}: {_lines(node)} lines")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _lines(node) > MAX_SWEEP_FUNCTION_LINES:
                out.append(f"{where}:{node.lineno} {node.name}: {_lines(node)} lines")
    return out


def test_the_walk_finds_the_package():
    assert len(_modules()) > 20 and (PACKAGE / "sweep").is_dir()


def test_no_file_over_500_lines():
    offences = long_files()
    assert not offences, f"files over {MAX_FILE_LINES} lines (split them by concept):\n" + "\n".join(offences)


def test_no_function_over_8_parameters():
    offences = many_parameters()
    assert not offences, (f"functions over {MAX_PARAMETERS} parameters (group them in a small frozen dataclass):\n"
                          + "\n".join(offences))


def test_the_allowed_typer_commands_exist_and_need_it():
    """Each allow-listed command is a function there, and takes more than 8 parameters (else it needs no entry)."""
    for entry in TYPER_COMMANDS_ALLOWED:
        rel, name = entry.split(":")
        fns = [f for f in _functions(ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))) if f.name == name]
        assert fns, f"{entry}: no such function"
        assert any(parameter_count(f) > MAX_PARAMETERS for f in fns), f"{entry}: takes 8 parameters or fewer"


def test_sweep_classes_and_functions_are_short():
    offences = long_sweep_definitions()
    assert not offences, (f"in ragbench/sweep/: classes over {MAX_SWEEP_CLASS_LINES} lines or functions over "
                          f"{MAX_SWEEP_FUNCTION_LINES} lines:\n" + "\n".join(offences))


def test_the_scan_counts_what_it_should(tmp_path):
    """The counts on hand-written code in a package of its own (guards against a vacuous scan)."""
    src = ("class A:\n"
           "    def m(self, a, /, b, *args, c, d=1, **kw):\n"
           "        pass\n"
           "    @classmethod\n"
           "    def k(cls, a):\n"
           "        pass\n"
           "def f(a, b, c, d, e, f, g, h, i):\n"
           "    return 1\n")
    fns = {f.name: f for f in _functions(ast.parse(src))}
    assert parameter_count(fns["m"]) == 6 and parameter_count(fns["k"]) == 1 and parameter_count(fns["f"]) == 9
    assert _lines(fns["k"]) == 3  # the decorator line counts
    pkg = tmp_path / "pkg"
    (pkg / "sweep").mkdir(parents=True)
    (pkg / "a.py").write_text(src)
    (pkg / "b.py").write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    (pkg / "sweep" / "s.py").write_text("class B:\n" + "    x = 1\n" * MAX_SWEEP_CLASS_LINES
                                        + "def g():\n" + "    y = 1\n" * MAX_SWEEP_FUNCTION_LINES + src)
    assert long_files(pkg) == [f"pkg/b.py: {MAX_FILE_LINES + 1} lines"]
    assert many_parameters(pkg) == ["pkg/a.py:7 f: 9 parameters", "pkg/sweep/s.py:{} f: 9 parameters".format(
        1 + MAX_SWEEP_CLASS_LINES + 1 + MAX_SWEEP_FUNCTION_LINES + 7)]
    assert long_sweep_definitions(pkg) == [f"pkg/sweep/s.py:1 class B: {MAX_SWEEP_CLASS_LINES + 1} lines",
                                           f"pkg/sweep/s.py:{MAX_SWEEP_CLASS_LINES + 2} g: "
                                           f"{MAX_SWEEP_FUNCTION_LINES + 1} lines"]
