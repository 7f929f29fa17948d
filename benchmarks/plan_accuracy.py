"""The plan's estimate against the measured cold sweep, on the demo, a SciFact slice and a real HTML manual.

For each workload, in a fresh home: ``ragbench plan CONFIG --json`` (it calibrates each model on this machine and
cuts the chunks), then the cold ``ragbench sweep CONFIG --orchestrator local`` in the same home, timed from spawn to
exit and by the sweep's own ``done in X s`` line, its peak resident memory read from ``wait4``. The ratios are
estimate / measured (target 0.7-1.3), for the seconds and for the plan's ``peak_memory_bytes``.
The machine's load (``os.getloadavg``) is printed beside the numbers: rates calibrated under one load and a sweep run
under another disagree by that much.

The manual is ``configs/debian-python-howto.yaml`` (33 pages of the Python 3.11 manual as Debian ships them, fetched
by ``scripts/fetch_debian_docs.sh``; skipped when they are not there): code-heavy chunks near the model's window,
3.6 characters a token against SciFact's 4.1-4.4.

    nice -n 10 python benchmarks/plan_accuracy.py [--max-docs 300] [--only demo|scifact|manual]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()
MANUAL = Path("/tmp/debian-docs/python-howto")  # where scripts/fetch_debian_docs.sh puts the pages

SCIFACT_SWEEP = """name: plan-scifact
dataset: {{path: {path}, split: test, max_docs: {max_docs}}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
"""


def _run(args: list[str], env: dict) -> tuple[float, str, int]:
    """Run ``ragbench args``: its wall seconds, its output, and its peak resident memory in bytes (the child's own
    ``ru_maxrss`` from ``wait4``)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ragbench", *args], cwd=ROOT, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"ragbench {' '.join(args)} exited {proc.returncode}:\n{text[-3000:]}")
    return seconds, text, usage.ru_maxrss * 1024


def measure(name: str, config: Path, workdir: Path) -> dict:
    home = workdir / f"home-{name}"
    env = {**os.environ, "RAGBENCH_PROGRESS": "0", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    env.pop("RAGBENCH_HOME", None)
    load0 = os.getloadavg()[0]
    plan_s, out, _ = _run(["plan", str(config), "--json", "--home", str(home)], env)
    plan = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    wall, out, peak = _run(["sweep", str(config), "--orchestrator", "local", "--home", str(home)], env)
    done = re.search(r"done in ([0-9.]+) s", out)
    inner = float(done.group(1)) if done else float("nan")
    load1 = os.getloadavg()[0]
    est = plan["total_seconds"]
    return {"workload": name, "texts": plan["texts_to_embed"], "configs": plan["configs"]["run"],
            "estimate_s": est, "sweep_s": inner, "process_s": wall, "ratio": est / inner, "ratio_process": est / wall,
            "plan_s": plan_s, "load": f"{load0:.1f}-{load1:.1f}",
            "memory_estimate_mib": plan["peak_memory_bytes"] / 2**20, "memory_mib": peak / 2**20,
            "memory_ratio": plan["peak_memory_bytes"] / peak, "memory_parts_mib": {
                k: round(v / 2**20) for k, v in plan["memory_bytes"].items()},
            "embed_s": sum(r["seconds"] for r in plan["rows"] if r["stage"] in ("embed", "load"))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-docs", type=int, default=300, help="SciFact documents in the slice")
    p.add_argument("--only", choices=["demo", "scifact", "manual"], default=None)
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="plan-accuracy-") as tmp:
        tmp = Path(tmp)
        if args.only in (None, "demo"):
            rows.append(measure("demo (20 configs, 4 chunkers x MiniLM + static)", ROOT / "configs" / "demo.yaml",
                                tmp))
        if args.only in (None, "scifact") and SCIFACT.is_dir():
            cfg = tmp / "scifact.yaml"
            cfg.write_text(SCIFACT_SWEEP.format(path=SCIFACT, max_docs=args.max_docs))
            rows.append(measure(f"SciFact {args.max_docs} docs (2 chunkers x MiniLM, BM25 + dense)", cfg, tmp))
        if args.only in (None, "manual") and MANUAL.is_dir():
            rows.append(measure("Python 3.11 manual, 33 HTML pages (2 chunkers x MiniLM, BM25 + dense + hybrid)",
                                ROOT / "configs" / "debian-python-howto.yaml", tmp))
    print(f"cores: {os.cpu_count()}")
    print("| workload | texts to embed | configs | estimate (s) | cold sweep (s) | estimate / sweep | whole process (s) "
          "| estimate / process | load avg | peak memory estimate (MiB) | sweep's peak RSS (MiB) | estimate / peak |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['workload']} | {r['texts']} | {r['configs']} | {r['estimate_s']:.0f} | {r['sweep_s']:.0f} | "
              f"{r['ratio']:.2f} | {r['process_s']:.0f} | {r['ratio_process']:.2f} | {r['load']} | "
              f"{r['memory_estimate_mib']:.0f} | {r['memory_mib']:.0f} | {r['memory_ratio']:.2f} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
