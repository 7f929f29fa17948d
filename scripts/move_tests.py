#!/usr/bin/env python3
"""Move the test files into their tier folders as tests/TIERS.tsv plans it, with `git mv`.

    python scripts/move_tests.py              # apply the plan
    python scripts/move_tests.py --dry-run    # print what it would do, change nothing

Each row of the plan (columns old_path, new_path, tier, seconds, reason, fast; paths from the repository root) moves
``old_path`` to ``new_path``. Idempotent: a row whose file already stands at its new path is done and skipped, so a
second run changes nothing. A test file at the top of tests/ that the plan does not list stays where it is and is
reported; so is a row whose old file is gone, and a row whose old and new files both exist (a conflict: nothing is
moved for it, and the exit status is 1). Moved files that locate things from their own path (``Path(__file__)``)
are named: one folder deeper, ``parents[1]`` or ``.parent / "fixtures"`` no longer point where they did
(``from conftest import ROOT, FIXTURES`` does not move).
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "tests" / "TIERS.tsv"
#: a test locating files from its own path: breaks when the file moves one folder down
SELF_RELATIVE = re.compile(r"Path\(__file__\)")


@dataclass(frozen=True)
class Move:
    """One planned move, paths from the repository root."""

    old: str
    new: str


@dataclass
class Outcome:
    """What a run did and found: moved (or would move), already done, and the problems to report."""

    moved: list[Move] = field(default_factory=list)
    done: list[Move] = field(default_factory=list)
    missing: list[Move] = field(default_factory=list)
    conflicts: list[Move] = field(default_factory=list)
    unplanned: list[str] = field(default_factory=list)
    self_relative: list[str] = field(default_factory=list)


def read_plan(path: Path = PLAN) -> list[Move]:
    """The moves of the plan, in its order; a row that moves nothing (old path == new path) is left out."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    return [Move(r["old_path"], r["new_path"]) for r in rows if r["old_path"] != r["new_path"]]


def apply_plan(root: Path, moves: list[Move], dry_run: bool = False) -> Outcome:
    """Applies ``moves`` inside the git checkout at ``root`` with `git mv` (none when ``dry_run``)."""
    out = Outcome()
    for move in moves:
        old, new = root / move.old, root / move.new
        if old.exists() and new.exists():
            out.conflicts.append(move)
        elif new.exists():
            out.done.append(move)
        elif not old.exists():
            out.missing.append(move)
        else:
            if not dry_run:
                new.parent.mkdir(parents=True, exist_ok=True)
                subprocess.run(["git", "mv", move.old, move.new], cwd=root, check=True)
            out.moved.append(move)
    planned = {m.old for m in moves} | {m.new for m in moves}
    out.unplanned = sorted(p.relative_to(root).as_posix() for p in (root / "tests").glob("test_*.py")
                           if p.relative_to(root).as_posix() not in planned)
    for move in out.moved + out.done:
        now = root / move.new if (root / move.new).exists() else root / move.old  # a dry run moved nothing
        if SELF_RELATIVE.search(now.read_text(encoding="utf-8")):
            out.self_relative.append(move.new)
    return out


def report(out: Outcome, dry_run: bool) -> str:
    """The run in a few lines, problems last."""
    verb = "would move" if dry_run else "moved"
    lines = [f"{verb} {len(out.moved)}, already in place {len(out.done)}"]
    lines += [f"  {m.old} -> {m.new}" for m in out.moved]
    if out.unplanned:
        lines.append(f"not in the plan, left where they are ({len(out.unplanned)}): {', '.join(out.unplanned)}")
    if out.missing:
        lines.append("planned but gone: " + ", ".join(m.old for m in out.missing))
    if out.conflicts:
        lines.append("both old and new exist, not moved: " + ", ".join(f"{m.old} / {m.new}" for m in out.conflicts))
    if out.self_relative:
        lines.append("locate files from their own path (check them one folder down): " + ", ".join(out.self_relative))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The command line: applies (or with --dry-run shows) the plan; exit status 1 on a conflict."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would move, change nothing")
    parser.add_argument("--plan", type=Path, default=PLAN, help="the plan (default tests/TIERS.tsv)")
    args = parser.parse_args(argv)
    out = apply_plan(ROOT, read_plan(args.plan), dry_run=args.dry_run)
    print(report(out, args.dry_run))
    return 1 if out.conflicts else 0


if __name__ == "__main__":
    sys.exit(main())
