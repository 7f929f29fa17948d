"""Scale, measured: a static-model + BM25 sweep over SciFact grown to about 100k, 300k and 1M chunks.

Each corpus is SciFact (5,183 abstracts, its 300 test claims and qrels unchanged) plus seeded distractor abstracts
made of sentences re-drawn from the whole corpus (sentence counts and titles drawn from SciFact's own), written as a
BEIR folder in a temp dir. One document is one chunk (``whole`` chunker), so chunks = documents. Each size runs in a
fresh process and home: chunk -> embed (``static-retrieval-m2v``) -> Qdrant Edge HNSW index -> dense (HNSW,
``hnsw_ef`` 64, not exact) and BM25 retrieval -> judging -> metrics -> DuckDB, with ANN fidelity (HNSW against exact
search on the 300 claims) at three ``hnsw_ef`` values.

Printed per size: wall and CPU time of each stage (as the sweep's own stage runner sees them; ``evaluate bm25`` includes
building the BM25 index, ``evaluate dense`` the ANN fidelity searches; ``other`` is the sweep's time outside stages:
token counts, chunk statistics, DuckDB writes), peak RSS of the child (kernel rusage) and disk use of the home. Then
the growth exponent ``e`` of each stage (wall and CPU), fitted by least squares on
``log(seconds) = e * log(chunks) + c`` over the sizes run; on a shared machine the CPU exponents are the ones to
trust (wall time moves with the neighbours' load). Targets: peak RSS <= 6 GB at 1M chunks; no stage grows faster than size^1.2.

    nice -n 10 python benchmarks/scale.py                          # 100k, 300k, 1M
    nice -n 10 python benchmarks/scale.py --sizes 30000 100000 300000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's ragbench, installed or not
SCIFACT = (ROOT / ".." / "shared" / "datasets" / "scifact").resolve()

SWEEP = """name: scale-{n}
dataset: {{path: {path}, split: test}}
chunkers: [{{kind: whole}}]
embedders: [{{model: static-retrieval-m2v, batch_size: 256}}]
retrievers:
  - {{kind: bm25, name: bm25}}
  - {{kind: dense, hnsw_ef: 64, name: dense}}
ann_fidelity: {{k: 10, ef_values: [16, 64, 256]}}
output: {{mlflow: false}}
"""


def build_distractor_corpus(out: Path, n_docs: int, seed: int = 0, source: Path = SCIFACT) -> Path:
    """A BEIR folder at ``out`` with ``source``'s documents plus ``n_docs - len(source)`` distractors.

    Distractor ``syn-<i>``: a title and a sentence count drawn from a random source document, then that many
    sentences drawn uniformly (with replacement, seeded) from every source sentence, joined by single spaces.
    ``queries.jsonl``, ``qrels/`` and ``sentences.jsonl`` are linked from ``source`` unchanged, so every qrel and
    evidence span still points at the same source document text.
    """
    out.mkdir(parents=True, exist_ok=True)
    docs = [json.loads(line) for line in (source / "corpus.jsonl").read_text().splitlines() if line.strip()]
    offsets = {}
    for line in (source / "sentences.jsonl").read_text().splitlines():
        if line.strip():
            o = json.loads(line)
            offsets[str(o["_id"])] = o["sentences"]
    sentences, counts = [], []
    for d in docs:
        spans = offsets.get(str(d["_id"])) or [[0, len(d["text"])]]
        sentences += [d["text"][s:e] for s, e in spans]
        counts.append(len(spans))
    titles = [d.get("title") or "" for d in docs]
    rng = np.random.default_rng(seed)
    n_new = max(0, n_docs - len(docs))
    template = rng.integers(0, len(docs), size=n_new)
    with open(out / "corpus.jsonl", "w") as f:
        for line in (source / "corpus.jsonl").read_text().splitlines():
            if line.strip():
                f.write(line + "\n")
        block = 10_000
        for start in range(0, n_new, block):
            tpl = template[start:start + block]
            lengths = np.array([counts[t] for t in tpl])
            picks = rng.integers(0, len(sentences), size=int(lengths.sum()))
            cut = np.concatenate([[0], np.cumsum(lengths)])
            f.writelines(json.dumps({"_id": f"syn-{start + j}", "title": titles[t],
                                     "text": " ".join(sentences[p] for p in picks[cut[j]:cut[j + 1]])}) + "\n"
                         for j, t in enumerate(tpl))
    for name in ("queries.jsonl", "qrels", "sentences.jsonl"):
        target = out / name
        if not target.exists():
            target.symlink_to(source / name)
    return out


class TimingRunner:
    """A :class:`~ragbench.sweep.runner.LocalRunner` that also adds up the wall time and the CPU time (all threads
    of this process) of each stage by kind (the stage name up to its first space; ``evaluate bm25|dense``), and how
    far each stage raised the process's peak RSS (the kernel's high-water mark before and after it): the stage with
    the largest raise is the one that sets the peak."""

    def __init__(self):
        from ragbench.sweep.runner import LocalRunner

        self.inner, self.seconds, self.cpu, self.peak_raise = LocalRunner(), {}, {}, {}

    def run(self, name, fn, /, *args, **kwargs):
        t0, c0, m0 = time.perf_counter(), time.process_time(), _peak_rss_gb()
        try:
            return self.inner.run(name, fn, *args, **kwargs)
        finally:
            kind = _stage_kind(name)
            self.seconds[kind] = self.seconds.get(kind, 0.0) + time.perf_counter() - t0
            self.cpu[kind] = self.cpu.get(kind, 0.0) + time.process_time() - c0
            self.peak_raise[kind] = self.peak_raise.get(kind, 0.0) + _peak_rss_gb() - m0


def _peak_rss_gb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _stage_kind(name: str) -> str:
    if name.startswith("evaluate"):
        return "evaluate " + ("bm25" if "bm25" in name else "dense")
    if name.startswith("embed queries"):
        return "embed queries"
    return name.split(" ")[0]


def child(data: Path, home: Path, n: int) -> None:
    """Run the sweep of one size in this process; print its stage timings as one JSON line on stdout."""
    from ragbench import Settings, load_config, run_sweep

    cfg_path = home.parent / f"scale-{n}.yaml"
    cfg_path.write_text(SWEEP.format(n=n, path=data))
    cfg = load_config(cfg_path)
    settings = Settings.from_env(home=home).replace(qdrant_url=None, qdrant_api_key=None, mlflow_tracking_uri=None)
    runner = TimingRunner()
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_sweep(cfg, settings, runner=runner, fresh=True)
    total, total_cpu = time.perf_counter() - t0, time.process_time() - c0
    stages, cpu = dict(runner.seconds), dict(runner.cpu)
    stages["other"] = max(0.0, total - sum(stages.values()))
    cpu["other"] = max(0.0, total_cpu - sum(cpu.values()))
    metrics = {o.name: {k: o.metrics.get(k) for k in ("ndcg@10", "recall@100")} for o in result.outcomes}
    failed = [o.error for o in result.outcomes if o.status == "failed"]
    print(json.dumps({"stages": stages, "total": total, "cpu": cpu, "total_cpu": total_cpu, "metrics": metrics,
                      "failed": failed, "peak_raise_gb": runner.peak_raise}), flush=True)


def du(path: Path) -> int:
    """Bytes under ``path`` (allocated blocks, as ``du`` counts them)."""
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_blocks * 512
    return total


def run_size(n: int, work: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    data = build_distractor_corpus(work / f"data-{n}", n, seed)
    build_s = time.perf_counter() - t0
    home = work / f"home-{n}"
    env = {**os.environ, "RAGBENCH_PROGRESS": "0", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(n), "--data", str(data), "--home", str(home)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=open(work / f"log-{n}.txt", "w"))
    out = proc.stdout.read().decode()  # read before wait: a full pipe would block the child
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"sweep of {n} chunks failed; log: {work / f'log-{n}.txt'}\n"
                         f"{(work / f'log-{n}.txt').read_text()[-3000:]}")
    row = json.loads(out.strip().splitlines()[-1])
    row.update(n=n, rss_gb=usage.ru_maxrss / 2**20, disk_gb=du(home) / 2**30,
               corpus_gb=(data / "corpus.jsonl").stat().st_size / 2**30, build_corpus_s=build_s)
    shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)
    return row


def growth_exponent(sizes: list[int], seconds: list[float]) -> float:
    """Least-squares slope of ``log(seconds)`` on ``log(size)``: ``e`` in ``seconds ∝ size^e``."""
    x, y = np.log(np.asarray(sizes, float)), np.log(np.maximum(np.asarray(seconds, float), 1e-3))
    return float(np.polyfit(x, y, 1)[0])


def report(rows: list[dict]) -> None:
    stages = sorted({s for r in rows for s in r["stages"]}, key=lambda s: -rows[-1]["stages"].get(s, 0))
    sizes = [r["n"] for r in rows]
    for title, key, total in (("wall", "stages", "total"), ("CPU (all threads; load-independent)", "cpu",
                                                             "total_cpu")):
        print(f"\n{title} seconds per stage (chunks per column), fitted exponent e of seconds ∝ chunks^e")
        print(f"{'stage':<16}" + "".join(f"{n:>12,}" for n in sizes) + f"{'exponent':>10}")
        for s in stages + ["total"]:
            vals = [r[key].get(s, 0.0) if s != "total" else r[total] for r in rows]
            e = growth_exponent(sizes, vals) if len(rows) > 1 else math.nan
            flag = "  > 1.2!" if e > 1.2 else ""
            print(f"{s:<16}" + "".join(f"{v:>12.1f}" for v in vals) + f"{e:>10.2f}{flag}")
    print("(stages under ~1 s are noise-dominated: read their exponents with care)")
    print(f"{'peak RSS GB':<16}" + "".join(f"{r['rss_gb']:>12.2f}" for r in rows)
          + (f"{growth_exponent([r['n'] for r in rows], [r['rss_gb'] for r in rows]):>10.2f}" if len(rows) > 1 else ""))
    print("peak RSS raised by each stage, GB (the kernel's high-water mark after the stage minus before it)")
    for s in stages:
        print(f"  {s:<14}" + "".join(f"{r.get('peak_raise_gb', {}).get(s, 0.0):>12.2f}" for r in rows))
    print(f"{'home disk GB':<16}" + "".join(f"{r['disk_gb']:>12.2f}" for r in rows))
    print(f"{'corpus.jsonl GB':<16}" + "".join(f"{r['corpus_gb']:>12.2f}" for r in rows))
    for r in rows:
        print(f"{r['n']:>9,} chunks: " + ", ".join(f"{name} nDCG@10 {m['ndcg@10']:.3f} R@100 {m['recall@100']:.3f}"
                                                    for name, m in r["metrics"].items() if m["ndcg@10"] is not None)
              + (f"; FAILED: {r['failed']}" if r["failed"] else ""))
    big = rows[-1]
    print(f"peak RSS at {big['n']:,} chunks: {big['rss_gb']:.2f} GB (target <= 6 GB at 1M)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000, 1_000_000], help="chunks per corpus")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, help="temp folder (default: the system's); needs ~0.5 GB per 100k chunks")
    ap.add_argument("--json", type=Path, help="also write the measured rows here")
    ap.add_argument("--report", type=Path, nargs="+", metavar="JSON",
                    help="run nothing: print the tables and exponents of rows saved by earlier --json runs")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--home", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.data, args.home, args.child)
    if args.report:
        return report(sorted((row for f in args.report for row in json.loads(f.read_text())), key=lambda r: r["n"]))
    print(f"scale sweep over {', '.join(f'{n:,}' for n in args.sizes)} chunks (static-retrieval-m2v + BM25, HNSW)",
          flush=True)
    rows = []
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ragbench-scale-", dir=args.workdir) as tmp:
        for n in sorted(args.sizes):
            row = run_size(n, Path(tmp), args.seed)
            rows.append(row)
            print(f"{n:>9,} chunks: {row['total']:.0f} s ({row['total_cpu']:.0f} s CPU), peak RSS {row['rss_gb']:.2f} GB, home "
                  f"{row['disk_gb']:.2f} GB; " + ", ".join(f"{k} {v:.1f}" for k, v in row["stages"].items()),
                  flush=True)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    report(rows)


if __name__ == "__main__":
    main()
