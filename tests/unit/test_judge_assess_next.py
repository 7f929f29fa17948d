"""``judge assess``'s closing line: the ``judge merge`` command to run next, whole inside the backticks, with
``--force`` there when the assessor's κ is below 0.4; the command it names parses with the real CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.cli.judge_assess import next_command


def _command(line: str) -> list[str]:
    (inside,) = re.findall(r"`([^`]*)`", line)
    return shlex.split(inside)


def test_force_sits_inside_the_backticks_when_kappa_is_low():
    line = next_command(Path("pool.assessed.csv"), "s-1", trusted=False)
    assert _command(line) == ["ragbench", "judge", "merge", "pool.assessed.csv", "--sweep", "s-1", "--force"]
    assert line.endswith("(κ below 0.4: check its grades first)")


def test_no_force_when_the_assessor_is_trusted():
    line = next_command(Path("p.csv"), "s-1", trusted=True)
    assert _command(line)[-2:] == ["--sweep", "s-1"] and "κ" not in line


def test_the_named_command_is_one_the_cli_accepts(tmp_path):
    args = _command(next_command(tmp_path / "missing.csv", "s-1", trusted=False))[1:]
    result = CliRunner().invoke(app, [*args, "--home", str(tmp_path)])
    assert "No such option" not in result.output and "--force" not in result.output, result.output
