"""Peak memory of a sweep on a corpus and on one 10x larger, measured side by side in one run.

Each size runs in its own fresh process and home (chunk -> embed -> index -> dense + BM25 retrieval -> judging ->
DuckDB), and its peak RSS is read from the kernel (wait4 rusage). Memory should be bounded by batch sizes, not by the
corpus: the embed stage streams segments to the cache and the index streams them back, so the target is
large/small <= 1.5.

    python benchmarks/memory_scaling.py [--small 400] [--factor 10] [--model static-retrieval-m2v]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()


def run_size(n_docs: int, model: str, workdir: Path) -> tuple[float, float, str]:
    cfg = workdir / f"sweep-{n_docs}.yaml"
    cfg.write_text(f"""name: mem-{n_docs}
dataset: {{path: {SCIFACT}, max_docs: {n_docs}, queries: in_qrels}}
chunkers: [{{kind: fixed, size: 128, overlap: 32}}]
embedders: [{{model: {model}, batch_size: 64}}]
retrievers: [{{kind: dense, exact: true}}, {{kind: bm25}}]
output: {{mlflow: false}}
""")
    env = {**os.environ, "RAGBENCH_HOME": str(workdir / f"home-{n_docs}"), "RAGBENCH_PROGRESS": "0"}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ragbench.cli.main", "sweep", str(cfg), "--orchestrator", "local",
                             "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"sweep of {n_docs} docs failed:\n{err[-2000:]}")
    chunks = next((line for line in err.splitlines() if "chunks from" in line), "").strip()
    return usage.ru_maxrss / 1024, time.perf_counter() - t0, chunks or out[:80]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", type=int, default=400, help="documents in the small corpus")
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--model", default="static-retrieval-m2v")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = run_size(args.small, args.model, Path(tmp))
        large = run_size(args.small * args.factor, args.model, Path(tmp))
    print(f"{'docs':>6} {'peak RSS MB':>12} {'seconds':>8}  chunks")
    for n, (rss, secs, note) in [(args.small, small), (args.small * args.factor, large)]:
        print(f"{n:>6} {rss:>12.0f} {secs:>8.1f}  {note[-60:]}")
    print(f"peak memory ratio large/small: {large[0] / small[0]:.2f}   (target <= 1.50)")


if __name__ == "__main__":
    main()
