"""What `ragbench sweep` prints when it ends, as a subprocess, as a user or a scheduler runs it: under the default
orchestrator (Prefect, ephemeral: no server) the report's leaderboard with the verdict box, then the `report:` and
`MLflow:` lines (the MLflow run checked through MLflow's own client), and no `None/...` Prefect URL; with its output
piped, progress lines while a long embedding stage runs (the interval set to 1 s), under the plain orchestrator."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import DEMO, ROOT, clean_env, write_config

UI = "http://mlflow.example:5000"


def _sweep(cfg, home, *args, **extra):
    env = clean_env(COLUMNS="240")
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "ragbench.cli", "sweep", str(cfg), "--home", str(home), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _line(text: str, prefix: str) -> str:
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, (prefix, text[-3000:])
    return found[0]


def test_a_prefect_sweep_ends_with_the_verdict_the_report_and_the_mlflow_run(tmp_path):
    from mlflow.tracking import MlflowClient

    cfg = write_config(tmp_path / "tiny.yaml", f"""name: lines
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 64, overlap: 0}}]
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [10]}}
""")
    home = tmp_path / "home"
    proc = _sweep(cfg, home, RAGBENCH_MLFLOW_UI_URL=UI)  # the default orchestrator: Prefect, no server
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "None/" not in proc.stderr and "ephemeral (no server, no UI" in proc.stderr
    report = _line(proc.stderr, "report: ").removeprefix("report: ")
    assert report.endswith("report.html") and (home / "reports").is_dir(), proc.stderr[-3000:]
    html = open(report, encoding="utf-8").read()
    mlflow = _line(proc.stderr, "MLflow: ")
    m = re.fullmatch(rf"MLflow: {re.escape(UI)}/#/experiments/(\w+)/runs/(\w+)", mlflow)
    assert m, mlflow
    run = MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow.db'}").get_run(m.group(2))
    assert run.info.experiment_id == m.group(1) and run.data.tags.get("ragbench.sweep_id")
    # the closing output is the report's: CIs, marks, the verdict box with the next command
    out = proc.stdout
    assert "95 % CI" in out and "★" in out and "verdict · sweep" in out and "wins on ndcg_at_10" in out
    assert "ragbench promote" in out and "Since the previous sweep" in out and "Against production" in out
    assert f"{UI}/#/runs/{m.group(2)}" in html  # the HTML report links to the parent run under the UI's URL


def test_a_piped_sweep_logs_progress_while_it_embeds(tmp_path):
    cfg = write_config(tmp_path / "embed.yaml", f"""name: progress
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: fixed, size: 32, overlap: 16}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: dense, exact: true, documents: 10}}]
metrics: {{cutoffs: [10]}}
""")
    home = tmp_path / "home"
    proc = _sweep(cfg, home, "--orchestrator", "local", RAGBENCH_PROGRESS="1", RAGBENCH_PROGRESS_INTERVAL="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = re.findall(r"progress: embed [^:]*\[document\]: (\d+)/(\d+) \(\d+ %\), [\d.e+]+/s, ETA [^,]+, "
                       r"\d+ s elapsed", proc.stderr)
    assert len(lines) >= 2, proc.stderr[-3000:]  # a line a second while the chunks embed
    done = [int(d) for d, _ in lines]
    assert done == sorted(done) and len({t for _, t in lines}) == 1 and int(lines[0][1]) > 500
    assert "\x1b[" not in proc.stderr  # no bar drawn into the pipe
    # the plain orchestrator says where the answer went too; no UI URL set: the run id and how to browse it
    assert _line(proc.stderr, "report: ").endswith("report.html"), proc.stderr[-3000:]
    assert re.fullmatch(r"MLflow: parent run \w+ in sqlite:///\S+ \(browse with `mlflow ui .*",
                        _line(proc.stderr, "MLflow: "))

    # written to a file, `report` and `explain` take COLUMNS; at 100 columns each hit of explain is two lines
    env = clean_env(COLUMNS="100")
    for args in (["report", "latest", "--no-mlflow"], ["explain", "latest", "1", "q07"]):
        out = subprocess.run([sys.executable, "-m", "ragbench.cli", *args, "--home", str(home)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        widths = [len(line) for line in out.stdout.splitlines()]
        assert max(widths) == 100, (args, max(widths))  # as wide as told, not 160
    hits = re.findall(r"^│ +(\d+) │", out.stdout, re.M)
    rows = [line for line in out.stdout.splitlines() if line.startswith("│") and line.count("│") >= 6]
    assert len(hits) >= 10 and len(rows) <= 2 * len(hits), out.stdout  # two table lines a hit, at most
