"""Every `--help` keeps its <placeholders>: typer renders help as Markdown, where a bare ``<home>`` is an HTML tag
and vanished ("finished configs wait in /spool"). Each command's own help text and option helps are read from the
click command tree, and every ``<...>`` in them must be in the rendered help."""

from __future__ import annotations

import re

import typer
from typer.testing import CliRunner

from ragbench.cli.main import app

ANGLE = re.compile(r"<[A-Za-z][^<>`\n]*>")


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_keeps_its_angle_bracket_placeholders():
    root = typer.main.get_command(app)
    checked = 0
    for path, cmd in _commands(root):
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        wanted = {m for t in texts for m in ANGLE.findall(t)}
        if not wanted:
            continue
        res = CliRunner().invoke(app, [*path, "--help"], terminal_width=400, env={"COLUMNS": "400"})
        assert res.exit_code == 0, (path, res.output)
        shown = " ".join(res.output.split())
        missing = sorted(w for w in wanted if " ".join(w.split()) not in shown)
        assert not missing, (path, missing)
        checked += 1
    assert checked >= 2  # sweep (<home>/spool) and report (<home>/reports/<sweep id>) at least
