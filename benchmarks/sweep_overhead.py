"""The whole-sweep overhead: a cold sweep against a bare encode of the same texts, measured side by side.

Three kinds of process run under the same load, each timed from spawn to exit (imports included, as a user waits):

* **raw**: loads the embedding model and encodes the sweep's unique chunk texts and query texts — nothing else;
* **cold**: the sweep in a fresh home with the local runner (load, chunk, embed, index, BM25/dense/hybrid
  retrieval, judging, metrics, DuckDB, HTML report; MLflow off);
* **warm**: the same sweep again in the same home, as ``ragbench sweep`` runs it: up to date, so nothing is
  recorded (:mod:`ragbench.sweep.up_to_date`);
* **recorded again**: the same, recorded anyway (``--again``: every config's stored results reused, a new sweep
  in DuckDB and MLflow, the report).

Each exits as the ``ragbench`` command does, without CPython's last full garbage collection
(:mod:`ragbench.core.exit`; 1-1.5 s of a process with MLflow or torch loaded).

raw and cold alternate (``--pairs``) so drifting load hits both alike; the warm sweep runs ``--warm-runs`` times
(default 3); the ratios use the medians. Targets:
cold / raw <= 1.10 and warm / cold <= 0.03. The Prefect start-up cost is measured apart: the warm sweep through
``ragbench sweep --orchestrator prefect`` (first Prefect start in the home, then again) minus the same through
``--orchestrator local``. Also printed: how long each ``ragbench sweep`` command took to print its first line.

    nice -n 10 python benchmarks/sweep_overhead.py [--max-docs 1000] [--pairs 1] [--no-prefect]   # ~10 min on 2 cores

Slices (``--grid``): ``whole`` (the default above: one whole chunker on SciFact, MLflow off); ``scifact`` (300
abstracts unless ``--max-docs``, chunkers whole + recursive-128 x MiniLM x BM25/dense/hybrid); ``squad`` (a synthetic
article-level SQuAD-style set from ``warm_rerun.synthetic_squad``: 48 articles, about 1,190 questions; whole +
recursive-128 x MiniLM x BM25/dense). The two issue grids log to MLflow as the product does by default (a SQLite
store under the sweep's home, report summary and per-config plots); ``--no-mlflow`` / ``--mlflow`` override.

    python benchmarks/sweep_overhead.py --grid scifact --no-prefect
    python benchmarks/sweep_overhead.py --grid squad --no-prefect
"""

from __future__ import annotations

print("sweep overhead: preparing (SciFact grid, raw encode vs cold vs warm sweep) …", flush=True)  # before imports

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's ragbench (children get it through PYTHONPATH)
# the dataset beside this checkout, or $RAGBENCH_SCIFACT (a worktree elsewhere)
SCIFACT = Path(os.environ.get("RAGBENCH_SCIFACT") or ROOT / ".." / "shared" / "datasets" / "scifact").resolve()
RAGBENCH = Path(sys.executable).with_name("ragbench")

SWEEP = """name: {name}
dataset: {{path: {path}, split: test, max_docs: {max_docs}}}
chunkers: {chunkers}
embedders: [{{model: {model}, batch_size: 32}}]
retrievers:
  - {{kind: bm25}}
  - {{kind: dense, exact: true}}
  - {{kind: hybrid, fusion: rrf, dense: {{exact: true}}}}
output: {{mlflow: {mlflow}}}
"""

SWEEP_SQUAD = """name: overhead-squad
dataset: {{format: squad, path: {path}, squad_documents: article, queries: all}}
chunkers: [{{kind: whole}}, {{kind: recursive, size: 128, overlap: 0}}]
embedders: [{{model: {model}, batch_size: 32}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
output: {{mlflow: {mlflow}}}
"""

# every timed process exits as the ragbench command does (without CPython's last full GC scan), raw included
RAW = """import sys, json
from ragbench.core.exit import skip_final_collection_at_exit
skip_final_collection_at_exit()
from ragbench.core.models import load_sentence_transformer
texts = json.load(open(sys.argv[1]))
model = load_sentence_transformer(sys.argv[2])
model.encode(texts["documents"], batch_size=32, convert_to_numpy=True, show_progress_bar=False)
model.encode(texts["queries"], batch_size=32, convert_to_numpy=True, show_progress_bar=False)
"""

# as `ragbench sweep` does: an up-to-date sweep records nothing; "again" (argv[3]) records a new sweep anyway
SWEEP_CHILD = """import sys, time
from ragbench.core.exit import skip_final_collection_at_exit
skip_final_collection_at_exit()
from ragbench import Settings, load_config, publish_sweep, run_sweep, up_to_date
cfg = load_config(sys.argv[1])
settings = Settings.from_env(home=sys.argv[2]).replace(qdrant_url=None, qdrant_api_key=None,
                                                       mlflow_tracking_uri=None)
t0 = time.perf_counter()
found = None if sys.argv[3:] == ["again"] else up_to_date(cfg, settings)
if found is None:
    result = run_sweep(cfg, settings)
t1 = time.perf_counter()
if found is None:
    publish_sweep(result.sweep_id, settings, mlflow=cfg.output.mlflow)
print(f"RUN_SWEEP {t1 - t0:.3f} {0 if found else result.vectors_computed} {'up-to-date' if found else 'recorded'}",
      flush=True)
"""


CPU: dict[str, list[float]] = {}  # label -> CPU seconds (user + system, kernel rusage) of each timed process


def timed_process(cmd: list[str], env: dict | None = None, label: str = "") -> tuple[float, float, str]:
    """(seconds to exit, seconds to the first line on stdout or stderr, all output) of one process; its CPU
    seconds go to ``CPU[label]``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "RAGBENCH_PROGRESS": "0", "PYTHONPATH": str(ROOT), **(env or {})})
    first = proc.stdout.readline()
    t_first = time.perf_counter() - t0
    out = (first + proc.stdout.read()).decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    CPU.setdefault(label, []).append(usage.ru_utime + usage.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out[-3000:]}")
    return time.perf_counter() - t0, t_first, out


def unique_texts(cfg_path: Path) -> dict[str, list[str]]:
    """What the sweep embeds: every chunker's unique chunk texts and the unique query texts."""
    from ragbench import chunk_corpus, load_config, load_dataset
    from ragbench.core.schemas import index_texts

    cfg = load_config(cfg_path)
    ds = load_dataset(cfg.dataset)
    docs = sorted({t for c in cfg.chunkers for t in index_texts(chunk_corpus(ds, c)).to_list()})
    return {"documents": docs, "queries": sorted(set(ds.queries["text"].to_list()))}


def write_grid(args: argparse.Namespace, work: Path) -> tuple[Path, str]:
    """The sweep file of the chosen ``--grid`` slice in ``work``, and a line describing it."""
    mlflow = args.mlflow if args.mlflow is not None else args.grid != "whole"
    flag = "true" if mlflow else "false"
    cfg = work / "sweep.yaml"
    if args.grid == "squad":
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from warm_rerun import synthetic_squad

        data = work / "squad_synth.json"
        data.write_text(json.dumps(synthetic_squad(args.articles, args.questions)))
        cfg.write_text(SWEEP_SQUAD.format(path=data, model=args.model, mlflow=flag))
        what = (f"(whole, recursive-128) x {args.model} x (BM25, dense) on synthetic SQuAD "
                f"({args.articles} articles)")
    else:
        max_docs = args.max_docs or (300 if args.grid == "scifact" else None)
        grid = args.grid == "scifact"  # the small grid: two chunkers; else the whole chunker alone
        chunkers = "[{kind: whole}, {kind: recursive, size: 128, overlap: 0}]" if grid else "[{kind: whole}]"
        cfg.write_text(SWEEP.format(name="overhead-scifact" if grid else "overhead", path=SCIFACT,
                                    max_docs=max_docs or "null", chunkers=chunkers, model=args.model, mlflow=flag))
        chunkers = "(whole, recursive-128)" if args.grid == "scifact" else "whole"
        what = f"{chunkers} x {args.model} x (BM25, dense, hybrid) on SciFact ({max_docs or 'all'} docs)"
    return cfg, f"{what}, MLflow {'on' if mlflow else 'off'}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grid", choices=("whole", "scifact", "squad"), default="whole",
                    help="whole: one whole chunker on SciFact, MLflow off (default); scifact / squad: the issue's "
                         "two grids, MLflow on")
    ap.add_argument("--max-docs", type=int, default=None,
                    help="a SciFact slice: its judged docs plus seeded distractors (default: all 5,183 abstracts; "
                         "300 for --grid scifact)")
    ap.add_argument("--articles", type=int, default=48, help="--grid squad: articles")
    ap.add_argument("--questions", type=int, default=1190, help="--grid squad: about this many questions")
    ap.add_argument("--mlflow", action=argparse.BooleanOptionalAction, default=None,
                    help="log to MLflow (SQLite under the sweep's home) and summarize there (default: on for "
                         "--grid scifact/squad, off for whole)")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--pairs", type=int, default=1, help="raw/cold pairs, alternated")
    ap.add_argument("--warm-runs", type=int, default=3, help="warm sweeps in the first pair's home (the median "
                                                                 "is used: one warm process swings by a second)")
    ap.add_argument("--no-prefect", action="store_true", help="skip the Prefect start-up measurement")
    ap.add_argument("--profile", type=Path, help="run the cold and warm sweeps under cProfile, writing "
                                                 "cold-N.prof / warm.prof here (their times then include it)")
    args = ap.parse_args()
    prof = (lambda name: ["-m", "cProfile", "-o", str(args.profile.resolve() / f"{name}.prof")]) \
        if args.profile else (lambda name: [])
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
        work = Path(tmp)
        cfg, what = write_grid(args, work)
        texts = unique_texts(cfg)
        (work / "texts.json").write_text(json.dumps(texts))
        (work / "raw.py").write_text(RAW)
        (work / "sweep_child.py").write_text(SWEEP_CHILD)
        print(f"grid: {what}: {len(texts['documents'])} unique chunk texts, {len(texts['queries'])} queries",
              flush=True)

        raws, colds, cold_inner = [], [], []
        for i in range(args.pairs):
            secs, _, _ = timed_process([sys.executable, str(work / "raw.py"), str(work / "texts.json"), args.model],
                                        label="raw")
            raws.append(secs)
            print(f"  raw encode {i + 1}: {secs:.1f} s", flush=True)
            home = work / f"home-{i}"
            secs, _, out = timed_process([sys.executable, *prof(f"cold-{i}"), str(work / "sweep_child.py"), str(cfg),
                                          str(home)], label="cold")
            inner = float(out.split("RUN_SWEEP ")[1].split()[0])
            colds.append(secs)
            cold_inner.append(inner)
            print(f"  cold sweep {i + 1}: {secs:.1f} s (run_sweep {inner:.1f} s)", flush=True)
        home = work / "home-0"
        warms, warm_inners = [], []
        for i in range(args.warm_runs):
            secs, _, out = timed_process([sys.executable, *prof(f"warm-{i}" if i else "warm"),
                                          str(work / "sweep_child.py"), str(cfg), str(home)], label="warm")
            warms.append(secs)
            warm_inners.append(float(out.split("RUN_SWEEP ")[1].split()[0]))
            print(f"  warm sweep {i + 1}: {secs:.1f} s (run_sweep {warm_inners[-1]:.2f} s)", flush=True)
        warm, warm_inner = statistics.median(warms), statistics.median(warm_inners)
        agains = []  # the same warm sweep recorded again (`--again`): every config reused, MLflow, the report
        for i in range(args.warm_runs):
            secs, _, out = timed_process([sys.executable, str(work / "sweep_child.py"), str(cfg), str(home), "again"],
                                         label="again")
            agains.append(secs)
            print(f"  warm sweep recorded again {i + 1}: {secs:.1f} s (run_sweep "
                  f"{float(out.split('RUN_SWEEP ')[1].split()[0]):.2f} s)", flush=True)
        local, local_first, _ = timed_process([str(RAGBENCH), "sweep", str(cfg), "--orchestrator", "local",
                                               "--home", str(home)])
        print(f"  warm `ragbench sweep --orchestrator local`: {local:.1f} s, first line after {local_first:.2f} s",
              flush=True)
        prefect = []
        if not args.no_prefect:
            for label in ("first Prefect start in this home", "Prefect again"):
                secs, first, _ = timed_process([str(RAGBENCH), "sweep", str(cfg), "--orchestrator", "prefect",
                                                "--home", str(home)])
                prefect.append(secs)
                print(f"  warm `ragbench sweep --orchestrator prefect` ({label}): {secs:.1f} s, first line after "
                      f"{first:.2f} s", flush=True)

    raw, cold = statistics.median(raws), statistics.median(colds)
    print(f"\ncold / raw   = {cold:.1f} / {raw:.1f} s = {cold / raw:.2f}   (target <= 1.10, local runner)")
    print(f"warm / cold  = {warm:.1f} / {cold:.1f} s = {warm / cold:.3f}  (target <= 0.03; whole processes; "
          f"up to date, nothing recorded)")
    again = statistics.median(agains)
    print(f"recorded again (--again) / cold = {again:.1f} / {cold:.1f} s = {again / cold:.3f}")
    c_raw, c_cold, c_warm = (statistics.median(CPU[k]) for k in ("raw", "cold", "warm"))
    print(f"CPU seconds (load-independent): cold / raw = {c_cold:.1f} / {c_raw:.1f} = {c_cold / c_raw:.2f}, "
          f"warm / cold = {c_warm:.1f} / {c_cold:.1f} = {c_warm / c_cold:.3f}")
    print(f"             run_sweep only: {warm_inner:.2f} / {statistics.median(cold_inner):.1f} s = "
          f"{warm_inner / statistics.median(cold_inner):.3f}")
    if prefect:
        print(f"Prefect start-up: +{prefect[0] - local:.1f} s on its first start in a home (database migration), "
              f"+{prefect[1] - local:.1f} s after (ephemeral server per process), over the same warm sweep with "
              f"the local runner ({local:.1f} s)")
    print(f"first line of `ragbench sweep`: {local_first:.2f} s (target <= 1 s)")


if __name__ == "__main__":
    main()
