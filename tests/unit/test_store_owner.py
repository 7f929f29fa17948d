"""One owner of the results schema: only the store (``ragbench/results/store*.py``) talks SQL to DuckDB.

A source scan (no import, no database): every other module under ``ragbench/`` must go through named
``ResultStore`` methods. It flags, outside the store's modules,

* ``import duckdb`` / ``from duckdb import ...`` and any ``duckdb.<attr>`` use;
* calls of ``.execute(``, ``.executemany(``, ``.sql(``, ``.query(`` and ``.connect(`` on anything (in this code base
  these only ever reach DuckDB; a legitimate non-DuckDB use would go into ``ALLOWED``);
* string literals (f-string pieces included) that start like an SQL statement (``SELECT ... FROM``,
  ``INSERT INTO``, ``UPDATE ... SET``, ``DELETE FROM``, ``CREATE TABLE`` ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "ragbench"
#: the results store: store.py (sweeps, configs, results) and its schema, value migrations, connection,
#: promotions, judgments, queries and screening modules
OWNERS = {PACKAGE / "results" / f"{name}.py"
          for name in ("store", "store_schema", "store_migrations", "store_connection", "store_promotions",
                       "store_judgments", "store_queries", "store_screening")}
CALLS = {"execute", "executemany", "sql", "query", "connect"}
SQL = re.compile(r"^\s*(SELECT\b.*\bFROM\b|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|"
                 r"(CREATE|ALTER|DROP)\s+(OR\s+REPLACE\s+)?(TEMP\w*\s+)?(TABLE|VIEW|INDEX|SEQUENCE)\b|WITH\s+\w+\s+AS\b)",
                 re.S)
#: (path relative to ragbench/, line) of reviewed exceptions; empty on purpose
ALLOWED: set[tuple[str, int]] = set()


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(PACKAGE).as_posix()
    found = []
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "duckdb" for a in node.names):
            what = "imports duckdb"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "duckdb":
            what = "imports from duckdb"
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "duckdb":
            what = f"uses duckdb.{node.attr}"
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS):
            what = f"calls .{node.func.attr}(...)"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.match(node.value):
            what = f"has an SQL statement in a string: {node.value.strip()[:60]!r}"
        if what and (rel, node.lineno) not in ALLOWED:
            found.append((node.lineno, f"ragbench/{rel}:{node.lineno}: {what}"))
    return [text for _, text in sorted(found)]


def test_only_the_store_talks_sql():
    modules = sorted(p for p in PACKAGE.rglob("*.py") if p not in OWNERS)
    assert len(modules) > 20  # the scan found the package
    offences = [o for p in modules for o in _offences(p)]
    assert not offences, ("SQL belongs in ragbench/results/store.py (add a named ResultStore method):\n"
                          + "\n".join(offences))


def test_the_scan_catches_what_it_should():
    """The patterns above flag the shapes SQL used to take outside the store (guards against a vacuous scan)."""
    assert SQL.match("SELECT config_id, name FROM configs WHERE sweep_id = ?")
    assert SQL.match("\nCREATE TABLE IF NOT EXISTS promotions (a INT)")
    assert SQL.match("UPDATE promotions SET active = false WHERE active")
    assert SQL.match("INSERT INTO promotions VALUES (?)") and SQL.match("DELETE FROM configs WHERE x")
    assert not SQL.match("  (e.g. SELECT * FROM query_metrics WHERE sweep_id = ")  # a hint printed for users
    assert not SQL.match("select the best config from the sweep")
    assert all(_offences(owner) for owner in OWNERS)  # the owners are full of SQL: the scan sees it
