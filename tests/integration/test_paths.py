"""Names that become paths stay inside the home, and one precedence decides the home: --home, then $RAGBENCH_HOME,
then the sweep file's output.home.

Sweeps with hostile names run on the demo (whole documents, BM25 only) through the CLI with the HTML report and its
plots, and the file system around the home is walked before and after: nothing appears outside the home.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest
from conftest import DEMO
from typer.testing import CliRunner

from ragbench.cli import app
from ragbench.config import SweepConfig
from ragbench.core.paths import MAX_SLUG, PathEscapeError, home_path, is_slug, slug, within
from ragbench.core.settings import Settings
from ragbench.sweep import sweep_settings

HOSTILE = ["../../../../escape-name", "a/b", "bell\x07tab\tname", "x" * 300, ".", ".."]

SWEEP = """name: {name}
dataset: {{path: {demo}, queries: all}}
chunkers: [{{kind: whole}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [1, 10]}}
{output}"""


def _config(path: Path, name: str, output: str = "") -> Path:
    # JSON strings are YAML double-quoted strings: control characters travel as escapes
    path.write_text(SWEEP.format(name=json.dumps(name), demo=DEMO, output=output), encoding="utf-8")
    return path


def _env(**extra: str | None) -> dict[str, str | None]:
    """CliRunner's environment: no inherited home or MLflow server (None unsets), plus ``extra``."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(("RAGBENCH_", "MLFLOW_TRACKING"))}
    env.update(RAGBENCH_PROGRESS="0", **extra)
    return env


def _walk(root: Path, skip: Path) -> set[str]:
    """Every file and folder under ``root`` except what lies in ``skip``."""
    out = set()
    for dirpath, dirs, files in os.walk(root):
        here = Path(dirpath)
        dirs[:] = [d for d in dirs if here / d != skip]
        out.update(str(here / n) for n in dirs + files)
    return out


# ---------------------------------------------------------------- the slug and the containment check
@pytest.mark.parametrize("name", ["demo", "scifact-hybrid", "nimbus_demo.v2", "A1"])
def test_a_plain_name_is_its_own_slug(name):
    assert slug(name) == name


@pytest.mark.parametrize("name", [*HOSTILE, "/abs/path", "-dash", ".hidden", "a..b", "", "naïve", "\udcff"])
def test_a_hostile_name_becomes_one_safe_component(name):
    s = slug(name)
    assert is_slug(s) and len(s) <= MAX_SLUG and "/" not in s and s not in (".", "..")
    assert not s.startswith((".", "-")) and ".." not in s and all(c.isprintable() for c in s)
    assert s != name and slug(s) == s  # changed, and a slug taken again stays the same


def test_different_names_never_share_a_slug():
    names = [*HOSTILE, "/abs/path", "a-b", "a b", "a\tb", "x" * 301, "x" * 299 + "y", "...", "escape-name"]
    assert len({slug(n) for n in names}) == len(names)


def test_within_refuses_what_leads_outside(tmp_path):
    home = tmp_path / "home"
    (home / "reports").mkdir(parents=True)
    assert within(home, "reports", "x") == home / "reports" / "x"
    for parts in [("..", "x"), ("reports", "../../x"), (str(tmp_path / "elsewhere"),)]:
        with pytest.raises(PathEscapeError, match="outside"):
            within(home, *parts)
    (home / "reports" / "link").symlink_to(tmp_path)  # a link out of the home is outside too
    with pytest.raises(PathEscapeError):
        within(home, "reports", "link", "x")


# ---------------------------------------------------------------- hostile sweep names, end to end
def test_hostile_sweep_names_write_nothing_outside_the_home(tmp_path, monkeypatch):
    """Each name runs a sweep with its report (HTML and plots) and its MLflow runs; the home lies four folders
    deep, so a name that climbs out of <home>/reports lands inside the walked tree."""
    root = tmp_path / "around"
    home = root / "w" / "x" / "y" / "z" / "home"
    configs = root / "w" / "configs"
    configs.mkdir(parents=True)
    home.parent.mkdir(parents=True)  # the folders above the home are the user's; the sweep makes the home
    names = [*HOSTILE, str(root / "w" / "absolute-name")]
    files = [_config(configs / f"{i}.yaml", n) for i, n in enumerate(names)]
    monkeypatch.chdir(root / "w")  # anything written relative to the working folder is walked too
    before = _walk(root, home)

    runs = [CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--home", str(home)],
                               env=_env(), terminal_width=400) for cfg in files]

    assert _walk(root, home) == before, "a sweep wrote outside the home"
    for name, out in zip(names, runs):
        assert out.exit_code == 0 and "report: " in out.output, (name, out.output[-3000:])
    assert not (tmp_path / "escape-name").exists() and not Path("/escape-name").exists()
    reports = list((home / "reports").iterdir())  # one folder per sweep, straight under <home>/reports
    assert len(reports) == len(names)
    for folder in reports:
        assert is_slug(folder.name, MAX_SLUG + 30) and (folder / "report.html").is_file()
        assert len(list(folder.glob("*.png"))) >= 3
    with duckdb.connect(str(home / "results.duckdb"), read_only=True) as db:
        stored = dict(db.execute("SELECT sweep_id, name FROM sweeps").fetchall())
    assert sorted(stored.values()) == sorted(names)  # display names as written
    assert all(is_slug(sid, MAX_SLUG + 30) for sid in stored)


def test_a_library_sweep_with_mlflow_writes_nothing_in_the_working_folder(tmp_path, monkeypatch):
    """``Settings(home=...)`` built in code (not from the environment) keeps its tools folder (the MLflow store
    template) under the user's cache, never in a folder literally named ``~`` in the working directory."""
    from ragbench import load_config, run_sweep

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    cfg = _config(tmp_path / "sweep.yaml", "library", "output: {mlflow: true}")
    monkeypatch.chdir(work)
    settings = Settings(home=home)
    assert settings.tools_dir.is_absolute() and settings.tools_dir.is_relative_to(Path.home())
    result = run_sweep(load_config(cfg), settings.replace(mlflow_tracking_uri=None, qdrant_url=None))
    assert [o.status for o in result.outcomes] == ["finished"] and (home / "mlflow.db").is_file()
    assert _walk(work, home) == set(), "the sweep wrote into the working folder"


def test_a_stored_sweep_id_that_climbs_out_stays_inside_where_a_path_is_built(tmp_path):
    """Ids stored before they were slugs: the report folder takes the id's slug, the spool refuses it."""
    from ragbench.results.spool import Spool

    home = tmp_path / "home"
    with pytest.raises(PathEscapeError, match="spool folder"):
        Spool(home).folder("../../escape")
    assert Spool(home).folder("demo-1") == home / "spool" / "demo-1"
    folder = home_path(home, "reports", "../../escape")
    assert folder.parent == home / "reports" and folder.name == slug("../../escape")
    assert home_path(home, "reports", "demo-20260101T000000-abcdef") == home / "reports" / "demo-20260101T000000-abcdef"


def test_collection_and_fine_tuned_model_names_stay_inside_their_folders(tmp_path):
    from ragbench.core.errors import ModelError
    from ragbench.core.models import configure_model_store, resolve_model
    from ragbench.index.qdrant import EdgeIndex

    index = EdgeIndex(tmp_path / "home")
    assert index._folder("rb_0123abcd") == tmp_path / "home" / "qdrant-edge" / "rb_0123abcd"
    with pytest.raises(PathEscapeError, match="collection"):
        index.meta("../../../escape")
    (tmp_path / "escape-model").mkdir()  # a folder a climbing name would reach from the models folder
    (tmp_path / "home" / "models").mkdir(parents=True)
    configure_model_store(tmp_path / "home" / "models")
    try:
        with pytest.raises(ModelError, match="outside"):
            resolve_model("finetuned:../../escape-model")
    finally:
        configure_model_store(None)
        resolve_model.cache_clear()


# ---------------------------------------------------------------- precedence
def _cfg(output: dict) -> SweepConfig:
    return SweepConfig.model_validate({"name": "p", "dataset": {"path": str(DEMO)}, "chunkers": [{"kind": "whole"}],
                                       "retrievers": [{"kind": "bm25"}], "output": output})


def test_precedence_command_line_then_environment_then_sweep_file():
    cfg = _cfg({"home": "/from/file", "mlflow_tracking_uri": "http://file:5000"})
    env = Settings.from_env({"RAGBENCH_HOME": "/from/env", "MLFLOW_TRACKING_URI": "http://env:5000"})
    bare = Settings.from_env({})
    assert sweep_settings(cfg, env, "/from/cli").home == Path("/from/cli")
    assert sweep_settings(cfg, env).home == Path("/from/env")
    assert sweep_settings(cfg, bare).home == Path("/from/file")
    assert sweep_settings(_cfg({}), bare).home == Path(".ragbench")
    assert sweep_settings(cfg, env).mlflow_tracking_uri == "http://env:5000"
    assert sweep_settings(cfg, bare).mlflow_tracking_uri == "http://file:5000"
    # resolved once at the edge, again in run_sweep: the sweep file never overrides what was resolved
    once = sweep_settings(cfg, bare, ".ragbench")
    assert sweep_settings(cfg, once, once.home).home == Path(".ragbench")
    for s in (sweep_settings(cfg, env, "/from/cli"), sweep_settings(cfg, env), sweep_settings(cfg, bare)):
        assert sweep_settings(cfg, s).home == s.home


def test_home_precedence_through_the_command_line(tmp_path, monkeypatch):
    """A real sweep each: --home beats $RAGBENCH_HOME, which beats output.home; the losers stay empty. --home
    naming the default folder (./.ragbench) still beats the sweep file."""
    cli, env, file, default = tmp_path / "cli", tmp_path / "env", tmp_path / "file", tmp_path / ".ragbench"
    cfg = _config(tmp_path / "s.yaml", "prec", f"output: {{home: {json.dumps(str(file))}, mlflow: false}}\n")
    monkeypatch.chdir(tmp_path)
    runs = [(["--home", str(cli)], _env(RAGBENCH_HOME=str(env)), cli),
            ([], _env(RAGBENCH_HOME=str(env)), env),
            ([], _env(), file),
            (["--home", ".ragbench"], _env(), default)]
    filled: set[Path] = set()
    for extra, environ, expected in runs:
        out = CliRunner().invoke(app, ["sweep", str(cfg), "--orchestrator", "local", "--no-report", *extra],
                                 env=environ, terminal_width=400)
        assert out.exit_code == 0, out.output[-3000:]
        now = {h for h in (cli, env, file, default) if (h / "results.duckdb").exists()}
        assert now - filled == {expected}, (expected, now - filled)  # this run wrote its home, and only it
        filled = now
    help_text = " ".join(CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": "300"}).output.split())
    assert "Precedence: --home, then $RAGBENCH_HOME, then the sweep file's output.home" in help_text
