"""The package layout shows the pipeline: one subpackage per stage, imports flow one way, no import circle, the
environment read in one module, and the manual's layout page (docs/layout.md) matches the folders."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "ragbench"
#: stages in import order: a package may import only itself and those before it
LAYERS = ["core", "data", "chunking", "embedding", "index", "retrieval", "evaluation", "generation", "config",
          "results", "judgments", "promotion", "reporting", "sweep", "cli"]


def _module(path: Path) -> str:
    return ".".join(("ragbench", *path.relative_to(PKG).with_suffix("").parts)).removesuffix(".__init__")


MODULES = {_module(p) for p in PKG.rglob("*.py")}


def _imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, imported ragbench module, at module level)`` of every import in ``path``, at any depth (inside
    functions too). ``from ragbench.x import y`` names the module ``ragbench.x.y`` when that is a module."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ragbench"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.append((node.lineno, sub if sub in MODULES else node.module, id(node) in top))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, id(node) in top) for a in node.names if a.name.startswith("ragbench")]
    return out


def test_top_level_holds_only_the_api_the_shim_and_main():
    assert sorted(p.name for p in PKG.glob("*.py")) == ["__init__.py", "__main__.py", "serving.py"]
    assert sorted(p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(LAYERS)


def test_imports_flow_down_the_stages():
    wrong = []
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG).parts
        if len(parts) == 1:
            continue
        mine = LAYERS.index(parts[0])
        for line, mod, _ in _imports(path):
            other = mod.split(".")[1] if "." in mod else None
            if other in LAYERS and LAYERS.index(other) > mine:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {parts[0]} imports {mod}")
    assert not wrong, "\n".join(wrong)


def test_no_import_circle_between_modules():
    """No module imports, at any depth (a function's own imports too), a module that imports it back."""
    graph = {_module(p): {m for _, m, _top in _imports(p) if m != _module(p)} for p in PKG.rglob("*.py")}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path + [nxt]
            if nxt not in state and (cycle := visit(nxt, path + [nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            assert cycle is None, " -> ".join(cycle)


def test_only_the_settings_module_reads_the_environment():
    readers = sorted(str(p.relative_to(ROOT)) for p in PKG.rglob("*.py") if "os.environ" in p.read_text()
                     or "getenv(" in p.read_text())
    assert readers == ["ragbench/core/settings.py"]


def test_readme_layout_names_every_stage_package():
    layout = (ROOT / "docs" / "layout.md").read_text()  # the manual's layout page
    block = layout[layout.index("# Layout"):].split("```")[1]
    listed = re.findall(r"^  (\w+)/", block, flags=re.M)
    assert sorted(listed) == sorted(LAYERS)


def _too_big(path: Path) -> list[str]:
    """Classes over 200 lines, functions over 60 lines or over 8 parameters (``self``/``cls`` not counted)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        lines = (node.end_lineno or node.lineno) - node.lineno + 1 if hasattr(node, "lineno") else 0
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ClassDef) and lines > 200:
            found.append(f"{where} class {node.name}: {lines} lines")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
            n = len([p for p in params if p.arg not in ("self", "cls")])
            if lines > 60 or n > 8:
                found.append(f"{where} {node.name}: {lines} lines, {n} parameters")
    return found


def test_the_sweep_reads_as_its_plan_no_class_over_200_lines_no_function_over_60_or_over_8_parameters():
    files = sorted((PKG / "sweep").rglob("*.py"))
    assert len(files) >= 8  # decide, graph, work, recording, ksweep, tracking, orchestrator ... (not an empty glob)
    assert [f for path in files for f in _too_big(path)] == []
