"""Screening before the full embed, side by side with the full grid (``search: {strategy: screen}`` vs ``grid``).

One grid, 3 chunkers (whole documents, recursive 128 tokens, fixed 32 tokens) x ``--models`` (default two
transformers of one size: all-MiniLM-L6-v2 and sre-embedding-model, a MiniLM-sized model tuned on operations text) x
dense exact, plus BM25 per chunker, on SciFact's test split (300 queries; read from its folder, never copied):

* ``--max-docs N``: the judged documents plus seeded distractors up to N (what fits a run on 2 shared cores);
* without it, the whole 5,183-document corpus: about 68k chunks over the three chunkers (fixed 32 alone cuts
  about 50k), the many-passages case screening is for;
* ``--distractors N``: a larger corpus, SciFact plus seeded distractor abstracts up to N documents (sentences
  re-drawn from the whole corpus, as ``benchmarks/scale.py`` builds them; queries and labels unchanged).

The grid runs twice in fresh homes, screened (``--depth``: the screen's pool depth; ``--margin``: its margin) and in
full. For each run: passages encoded per model (distinct document texts in the home's vector cache: what the run
sent to the model) and their tokens (as the plan counts the encoding's cost), the winner on the primary measure and
the configs tied with it (paired randomization test, Holm), seconds. Checks: the screened winner is the full grid's
winner or tied with it. Target: the transformers' encoded passages of the screened run at most 40 % of the full
grid's (a static model's, with ``--models all-MiniLM-L6-v2,static-retrieval-m2v``, are counted apart: it costs no
transformer pass and its vectors pool the screen).

    python benchmarks/screen.py [--max-docs 1000] [--depth 3] [--margin 0.02] [--models A,B] [--chunkers LIST]
                                [--distractors 8000] [--full-after-screen] [--keep DIR]
    python benchmarks/screen.py --pool-only [--depth 3] [--distractors 20000]   # the pool only, no transformer
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ragbench, installed or not

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
CORPUS = SCIFACT  # --distractors: SciFact and its distractors, built under the run's folder
CHUNKERS = "[{kind: whole}, {kind: recursive, size: 128, overlap: 0}, {kind: fixed, size: 32, overlap: 0}]"
MODELS = ("all-MiniLM-L6-v2", "sre-embedding-model")  # two transformers of the same size
EMBEDDERS = ", ".join(f"{{model: {m}}}" for m in MODELS)
SWEEP = """name: screen-bench-{grid}
dataset: {{name: scifact, path: {path}, split: test{max_docs}}}
chunkers: {chunkers}
embedders: [{embedders}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10, 100], primary: ndcg@10}}
ann_fidelity: {{enabled: false}}
output: {{mlflow: false}}
search: {{strategy: {strategy}, depth: {depth}, margin: {margin}}}
"""


def encoded(home: Path, cfg) -> dict[str, int]:
    """Distinct document texts each model encoded in ``home`` (a fresh home: everything in its cache)."""
    from ragbench.core.cache import VectorCache
    from ragbench.embedding.embed import model_key

    cache = VectorCache(home / "cache")
    return {e.label: len(cache.known(model_key(e), "document")) for e in cfg.embedders}


def encoded_tokens_of(home: Path, cfg) -> dict[str, int]:
    """Tokens each model computed on in ``home`` (a fresh home: everything in its cache), as the plan counts them
    (:func:`~ragbench.sweep.calibrate.encoded_tokens`, its unit of encoding cost): the distinct chunk texts of the
    sweep whose vectors the model's cache holds, longest first, batched and padded."""
    from ragbench.core.cache import ChunkCache, VectorCache
    from ragbench.core.schemas import index_texts
    from ragbench.data import load_dataset
    from ragbench.embedding.embed import model_key, prompt_hashes
    from ragbench.sweep.calibrate import encoded_tokens
    from ragbench.sweep.stages import chunk_stage

    ds = load_dataset(cfg.dataset, home / "cache")
    texts = [index_texts(chunk_stage(ds, ch, ChunkCache(home / "cache"))).to_list() for ch in cfg.chunkers]
    vectors, out = VectorCache(home / "cache"), {}
    for e in cfg.embedders:
        known = vectors.known(model_key(e), "document")
        seen = {}
        for chunker_texts in texts:
            for h, t in zip(prompt_hashes(chunker_texts, e.document_prompt), chunker_texts):
                if h in known:
                    seen[h] = e.document_prompt + t
        out[e.label] = encoded_tokens(list(seen.values()), e)
    return out


def run(grid: str, strategy: str, depth: int, root: Path, max_docs: int | None, home: Path | None = None,
        margin: float = 0.0) -> dict:
    """One sweep of the grid in its own fresh home (``home``: another run's, to continue from its caches and
    results) and what it encoded, chose and screened out."""
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.reporting.model import build_report
    from ragbench.results.store import ResultStore
    from ragbench.sweep import run_sweep

    home = home or root / f"{grid}-{strategy}"
    path = root / f"{grid}-{strategy}.yaml"
    path.write_text(SWEEP.format(grid=grid, path=CORPUS, chunkers=CHUNKERS, embedders=EMBEDDERS, strategy=strategy,
                                 depth=depth, margin=margin, max_docs=f", max_docs: {max_docs}" if max_docs else ""))
    cfg = load_config(path)
    settings = Settings.from_env(home=home).replace(mlflow_tracking_uri=None, qdrant_url=None, qdrant_api_key=None)
    t0 = time.perf_counter()
    result = run_sweep(cfg, settings)
    seconds = time.perf_counter() - t0
    report = build_report(ResultStore(home / "results.duckdb"), result.sweep_id)
    stats = ResultStore(home / "results.duckdb").query(  # each chunker's chunk count, from its stored statistics
        "SELECT config_id, value FROM chunk_stats WHERE sweep_id = ? AND stat = 'chunk_count'", [result.sweep_id])
    chunks = dict(stats.iter_rows())
    return {"grid": grid, "strategy": strategy, "seconds": seconds, "encoded": encoded(home, cfg),
            "tokens": encoded_tokens_of(home, cfg),
            "winner": report.label_of(report.best), "winner_id": report.best,
            "tied": [report.label_of(c) for c in report.tied_with_best], "tied_ids": set(report.tied_with_best),
            "screened_out": [o.label for o in result.outcomes if o.status == "screened_out"],
            "n_chunks": sum({report.labels_of(c).chunker: v for c, v in chunks.items()}.values())}


def pool_only(depth: int, root: Path, max_docs: int | None) -> str:
    """The screen's pool on the grid, without a transformer pass (BM25 and the static model only): documents and
    chunks per chunker pooled against the corpus's, the share of the transformer's full-grid encoding the screen
    itself costs."""
    from ragbench.config import load_config
    from ragbench.core.settings import Settings
    from ragbench.core.cache import ChunkCache
    from ragbench.data import load_dataset
    from ragbench.sweep.screen import ScreenEncoder, screen_pool
    from ragbench.sweep.stages import chunk_stage

    path = root / "pool.yaml"
    path.write_text(SWEEP.format(grid="pool", path=CORPUS, chunkers=CHUNKERS, embedders=EMBEDDERS, strategy="screen",
                                 depth=depth, margin=0, max_docs=f", max_docs: {max_docs}" if max_docs else ""))
    cfg = load_config(path)
    settings = Settings.from_env(home=root / "pool").replace(mlflow_tracking_uri=None, qdrant_url=None,
                                                             qdrant_api_key=None)
    ds = load_dataset(cfg.dataset, root / "pool" / "cache")
    t0 = time.perf_counter()
    found = screen_pool(cfg, ds, ScreenEncoder.standalone(settings))
    pool, sub = found.doc_ids, found.chunks
    full = [chunk_stage(ds, ch, ChunkCache(root / "pool" / "cache")).height for ch in cfg.chunkers]
    lines = [f"pool at depth {depth}: {len(pool):,} of {ds.corpus.height:,} documents "
             f"({len(pool) / ds.corpus.height:.0%}), {time.perf_counter() - t0:.0f} s"]
    for ch, s_, f in zip(cfg.chunkers, sub, full):
        lines.append(f"  {ch.label}: {s_.height:,} of {f:,} chunks pooled ({s_.height / max(f, 1):.0%})")
    lines.append(f"  all chunkers: {sum(x.height for x in sub):,} of {sum(full):,} chunks "
                 f"({sum(x.height for x in sub) / max(sum(full), 1):.0%}): the screen's transformer encoding as a "
                 f"share of the full grid's")
    return "\n".join(lines)


def _cell(labels) -> str:
    """Config labels in a markdown cell (their `` | `` separators as `` · ``)."""
    return "; ".join(label.replace(" | ", " · ") for label in labels) or "none"


def table(rows: list[dict]) -> str:
    models = list(rows[0]["encoded"])
    lines = [f"| grid | run | chunks (3 chunkers) | {' | '.join(f'{m} passages encoded' for m in models)} | "
             f"{' | '.join(f'{m} tokens encoded' for m in models)} | seconds | "
             "winner (ndcg@10) | tied with the winner | screened out |",
             "|---|---|---:|" + "---:|" * (2 * len(models)) + "---:|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['grid']} | {r['strategy']} | {r['n_chunks']:,.0f} | "
                     + " | ".join(f"{r['encoded'].get(m, 0):,}" for m in models) + " | "
                     + " | ".join(f"{r['tokens'].get(m, 0):,}" for m in models)
                     + f" | {'—' if r['seconds'] != r['seconds'] else round(r['seconds'])}"
                     f" | {_cell([r['winner']])} | {_cell(r['tied'])} | "
                     f"{_cell(r['screened_out'])} |")
    return "\n".join(lines)


def transformer_share(screened: dict, full: dict, unit: str = "encoded") -> float:
    """The screened run's transformer encodings (every model but static Model2Vec ones, which cost no transformer
    pass) as a share of the full grid's, in passages (``unit="encoded"``) or tokens (``"tokens"``)."""
    from ragbench.core.models import resolve_model

    def passages(run: dict) -> int:
        return sum(n for m, n in run[unit].items() if resolve_model(m).kind != "model2vec")
    return passages(screened) / max(passages(full), 1)


def main() -> int:
    global EMBEDDERS, CORPUS, CHUNKERS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-docs", type=int, help="judged documents plus seeded distractors up to this many "
                                                  "(default: the whole corpus)")
    ap.add_argument("--distractors", type=int, help="SciFact plus seeded distractor abstracts up to this many "
                                                     "documents (a larger corpus; labels unchanged)")
    ap.add_argument("--depth", type=int, default=3, help="search.depth of the screened sweep")
    ap.add_argument("--margin", type=float, default=0.0,
                    help="search.margin of the screened sweep (the smallest gain worth a full embed; default 0)")
    ap.add_argument("--chunkers", default=CHUNKERS,
                    help="the sweep's chunkers, a YAML list (default: %(default)s)")
    ap.add_argument("--models", default=",".join(MODELS),
                    help="the sweep's embedders, comma-separated (default: %(default)s)")
    ap.add_argument("--full-after-screen", action="store_true",
                    help="run the full grid in the screened run's home (same decision and passage counts, without "
                         "encoding the screen's texts twice; its seconds are not a cold run's and are left out)")
    ap.add_argument("--pool-only", action="store_true", help="only size the screen's pool (no transformer pass)")
    ap.add_argument("--keep", type=Path, help="keep the homes here (default: a temporary folder, removed)")
    args = ap.parse_args()
    CHUNKERS = args.chunkers
    EMBEDDERS = ", ".join(f"{{model: {m.strip()}}}" for m in args.models.split(","))
    if not (SCIFACT / "corpus.jsonl").is_file():
        print(f"SciFact not found at {SCIFACT}", file=sys.stderr)
        return 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="screen-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    rows, ok = [], True
    try:
        if args.distractors:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from scale import build_distractor_corpus

            CORPUS = build_distractor_corpus(root / f"scifact-{args.distractors}", args.distractors)
        if args.pool_only:
            print(pool_only(args.depth, root, args.max_docs))
            return 0
        corpus = f"scifact+distractors-{args.distractors}" if args.distractors else "scifact"
        for grid in [f"{corpus}-{args.max_docs}" if args.max_docs else corpus]:
            screened = run(grid, "screen", args.depth, root, args.max_docs, margin=args.margin)
            # --full-after-screen: in the screened run's home, the full grid reuses the screen's vectors and the
            # stored results and encodes the rest; its cache then holds every text a cold full grid encodes
            full = run(grid, "grid", args.depth, root, args.max_docs,
                       root / f"{grid}-screen" if args.full_after_screen else None)
            if args.full_after_screen:
                full["seconds"] = float("nan")
            rows += [screened, full]
            same = screened["winner_id"] == full["winner_id"] or screened["winner_id"] in full["tied_ids"]
            ratio, in_tokens = transformer_share(screened, full), transformer_share(screened, full, "tokens")
            total = sum(screened["encoded"].values()) / max(sum(full["encoded"].values()), 1)
            print(f"{grid}: screened winner {'is the full winner or tied with it' if same else 'DIFFERS'}; "
                  f"transformer passages encoded {ratio:.0%} of the full grid's, tokens {in_tokens:.0%} "
                  f"(all models {total:.0%}); "
                  f"seconds {screened['seconds']:.0f} against {full['seconds']:.0f}", flush=True)
            ok &= same
        print(table(rows))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
