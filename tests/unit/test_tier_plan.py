"""The test tiers: tests/TIERS.tsv places every planned file in one tier folder, scripts/move_tests.py applies it
with `git mv` once (a second run changes nothing, unplanned files stay and are named), and the markers that
`make test-fast` selects on come from a file's folder or its row in the plan."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections import Counter

import pytest
from conftest import ROOT, TIERS, Tier, clean_env, read_tier_plan, tier_of

_spec = importlib.util.spec_from_file_location("move_tests", ROOT / "scripts" / "move_tests.py")
move_tests = sys.modules["move_tests"] = importlib.util.module_from_spec(_spec)  # dataclasses look it up there
_spec.loader.exec_module(move_tests)
Move = move_tests.Move


def _git(root, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def checkout(tmp_path):
    """A git checkout with three test files at the top of tests/, one of which finds its data from its own path."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    # spelt in two parts, so that this file itself does not read as one that finds files from its own path
    (root / "tests" / "test_a.py").write_text("DATA = Path(__" "file__).parent / 'fixtures'\n")
    (root / "tests" / "test_b.py").write_text("def test_b():\n    pass\n")
    (root / "tests" / "test_later.py").write_text("def test_later():\n    pass\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "tests")
    return root


PLAN = [Move("tests/test_a.py", "tests/unit/test_a.py"), Move("tests/test_b.py", "tests/integration/test_b2.py"),
        Move("tests/test_gone.py", "tests/unit/test_gone.py")]


def test_the_plan_is_applied_by_git_mv_once_and_reports_what_it_does_not_move(checkout):
    dry = move_tests.apply_plan(checkout, PLAN, dry_run=True)
    assert [m.new for m in dry.moved] == ["tests/unit/test_a.py", "tests/integration/test_b2.py"]
    assert _git(checkout, "status", "--porcelain") == ""  # a dry run touches nothing

    out = move_tests.apply_plan(checkout, PLAN)
    assert out.moved == dry.moved and out.done == [] and not out.conflicts
    assert [m.old for m in out.missing] == ["tests/test_gone.py"]
    assert out.unplanned == ["tests/test_later.py"]  # added after the plan: stays, named
    assert out.self_relative == ["tests/unit/test_a.py"]
    staged = sorted(_git(checkout, "status", "--porcelain").splitlines())
    assert staged == ["R  tests/test_a.py -> tests/unit/test_a.py",
                      "R  tests/test_b.py -> tests/integration/test_b2.py"]

    again = move_tests.apply_plan(checkout, PLAN)
    assert again.moved == [] and again.done == out.moved
    assert sorted(_git(checkout, "status", "--porcelain").splitlines()) == staged  # idempotent

    (checkout / "tests" / "test_b.py").write_text("# someone wrote the old file again\n")
    clash = move_tests.apply_plan(checkout, PLAN)
    assert clash.conflicts == [PLAN[1]] and clash.moved == []
    assert "both old and new exist" in move_tests.report(clash, dry_run=False)


def test_every_row_of_the_plan_names_a_file_its_tier_folder_and_a_unique_name():
    moves = move_tests.read_plan()
    plan = read_tier_plan()
    assert len(moves) > 60
    for move in moves:
        tier = plan[move.old]
        assert tier.name in TIERS and move.new.startswith(f"tests/{tier.name}/test_"), move
        assert (ROOT / move.old).exists() or (ROOT / move.new).exists(), f"{move.old}: neither old nor new exists"
        assert not (tier.fast and tier.name != "integration"), f"{move.old}: only integration tests are marked fast"
    # no __init__.py in the tier folders: pytest imports test modules by their bare name, so names stay unique
    names = Counter(move.new.rsplit("/", 1)[1] for move in moves)
    assert [n for n, c in names.items() if c > 1] == []


def test_the_folder_decides_the_tier_and_the_plan_the_fast_lane():
    plan = {"tests/test_x.py": Tier("integration", True), "tests/integration/test_x.py": Tier("integration", True)}
    assert tier_of("tests/test_x.py", plan) == Tier("integration", True)
    assert tier_of("tests/integration/test_x.py", plan) == Tier("integration", True)
    assert tier_of("tests/system/test_x.py", plan) == Tier("system", False)  # not where planned: the folder decides
    assert tier_of("tests/unit/test_new.py", plan) == Tier("unit", False)  # not planned: never fast
    assert tier_of("tests/test_new.py", plan) is None
    assert tier_of("tests/fixtures/test_x.py", plan) is None


def test_the_fast_lane_selects_by_the_markers_of_the_plan():
    plan = read_tier_plan()
    unit = next(p for p, t in plan.items() if t.name == "unit" and (ROOT / p).exists())
    slow = next(p for p, t in plan.items() if t.name == "system" and not t.fast and (ROOT / p).exists())
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-m", "unit or fast", unit, slow], cwd=ROOT, env=clean_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = {line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line}
    assert files == {unit}, proc.stdout[-3000:]
