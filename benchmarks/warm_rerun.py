"""Cold vs warm sweep, and answer-in-context vs rank metrics, on article-level SQuAD-style data.

Writes a synthetic SQuAD v1.1 file (seeded: by default 48 articles, about 1,190 questions, articles of roughly
450-1,800 MiniLM tokens) and runs a 12-config sweep on it — 4 chunkers x (BM25, MiniLM dense, hybrid) — twice in
one fresh home: cold (everything computed), then warm (unchanged: every config's stored results are reused).
Targets: warm <= 5 % of cold. Then, for the whole-article chunker with BM25, times the rank metrics (the
per-query evaluation of every measure) against answer-in-context (context assembly + evidence check over every
query), the first call with an empty per-chunk cache and a second call reusing it as the next config of the same
chunker would. Target: answer-in-context <= rank metrics.

    python benchmarks/warm_rerun.py [--articles 48] [--questions 1190] [--mlflow] [--keep DIR]

Timings are of ``run_sweep`` in this process (library imports and model loading excluded from both runs alike,
except the first model load, which the cold run pays). ``--mlflow`` logs to MLflow in both runs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's ragbench, installed or not

SYL = ["ka", "lo", "mer", "tan", "vi", "dor", "sel", "ru", "bri", "on", "ga", "thi", "mos", "pel", "ur", "zen",
       "ha", "ril", "cor", "an", "be", "sto", "lin", "vo", "qua", "dra", "ni", "fel", "tor", "es"]
MATERIALS = ["oak", "granite", "copper", "limestone", "iron", "marble", "brick", "glass", "bronze", "slate"]
THINGS = ["bridge", "tower", "library", "chapel", "market hall", "lighthouse", "mill", "gate", "fountain", "museum"]
ROLES = ["mayor", "harbour master", "librarian", "bishop", "schoolteacher", "judge", "physician", "archivist"]
FILLER = [
    "The streets near the {thing} are quiet in the early morning.",
    "Many visitors remark on the mild weather and the smell of the sea.",
    "Old photographs show carts, horses and crowded market days.",
    "Local records from this period are incomplete and sometimes contradictory.",
    "Several families have kept shops here for many generations.",
    "The surrounding fields are planted with barley, beans and potatoes.",
    "In winter the roads are often closed for days at a time.",
    "A small committee looks after the paths, benches and signposts.",
    "Historians still argue about the details of these early years.",
    "The view from the hill takes in the whole valley and the coast beyond.",
]


def _name(rng: random.Random, n: int = 2) -> str:
    return "".join(rng.choice(SYL) for _ in range(n)).capitalize()


def synthetic_squad(n_articles: int, n_questions: int, seed: int = 0) -> dict:
    """A SQuAD v1.1 dict of ``n_articles`` long articles and about ``n_questions`` questions about their facts."""
    rng = random.Random(seed)
    per_article = max(1, round(n_questions / n_articles))
    data = []
    qid = 0
    for a in range(n_articles):
        place = _name(rng, 3)
        n_sentences = min(140, max(per_article + 3, 28, round(rng.lognormvariate(4.0, 0.45))))
        facts = set(rng.sample(range(n_sentences), per_article))
        sentences = [_fact(rng, place) if i in facts else (rng.choice(FILLER).format(thing=rng.choice(THINGS)), [])
                     for i in range(n_sentences)]
        paragraphs = []
        while sentences:
            take = sentences[:rng.randint(4, 7)]
            sentences = sentences[len(take):]
            context, qas = "", []
            for text, questions in take:
                start = len(context) + (1 if context else 0)
                context = f"{context} {text}" if context else text
                for question, answer in questions:
                    qid += 1
                    qas.append({"id": f"syn-{qid:05d}", "question": question,
                                "answers": [{"answer_start": start + text.index(answer), "text": answer}]})
            paragraphs.append({"context": context, "qas": qas})
        data.append({"title": f"{place}_{a}", "paragraphs": paragraphs})
    return {"version": "1.1", "data": data}


def _fact(rng: random.Random, place: str) -> tuple[str, list[tuple[str, str]]]:
    person, year = f"{_name(rng)} {_name(rng, 3)}", str(rng.randint(1600, 1990))
    thing, material, role = rng.choice(THINGS), rng.choice(MATERIALS), rng.choice(ROLES)
    org = f"{_name(rng)} {rng.choice(['Society', 'Guild', 'Company', 'Academy'])}"
    kind = rng.randrange(4)
    if kind == 0:
        return (f"{person} founded the {org} in {place} in {year}.",
                [(f"Who founded the {org}?", person)])
    if kind == 1:
        return (f"The {thing} of {place} was rebuilt in {material} in {year}.",
                [(f"What material was the {thing} of {place} rebuilt in?", material)])
    if kind == 2:
        return (f"{person} served as the first {role} of {place}.",
                [(f"Who was the first {role} of {place}?", person)])
    n = str(rng.randint(2, 90) * 100)
    return (f"The {org} counted {n} members at its largest.",
            [(f"How many members did the {org} have at its largest?", n)])


SWEEP = """name: warm-bench
dataset: {{format: squad, path: {path}, squad_documents: article, queries: all}}
chunkers:
  - {{kind: whole}}
  - {{kind: sentences, window: 3}}
  - {{kind: recursive, size: 256, overlap: 0}}
  - {{kind: fixed, size: 128, overlap: 32}}
embedders: [{{model: all-MiniLM-L6-v2}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}, {{kind: hybrid}}]
ann_fidelity: {{enabled: false}}
output: {{mlflow: {mlflow}}}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--articles", type=int, default=48)
    ap.add_argument("--questions", type=int, default=1190)
    ap.add_argument("--mlflow", action="store_true", help="log to MLflow in both runs")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temp folder)")
    args = ap.parse_args()

    from ragbench.config import BM25Retriever, WholeDocChunker, load_config
    from ragbench.core.models import count_tokens
    from ragbench.core.schemas import index_texts
    from ragbench.core.settings import Settings
    from ragbench.data import load_dataset
    from ragbench.evaluation.metrics import measures_from_spec
    from ragbench.generation.llm.context import ChunkTexts, ContextSpec
    from ragbench.generation.stage import answer_in_context_metrics
    from ragbench.retrieval import BM25Index, run_from_hits
    from ragbench.sweep import run_sweep
    from ragbench.sweep.stages import evaluate_stage

    work = args.keep or Path(tempfile.mkdtemp(prefix="warm-rerun-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "squad_synth.json"
    data.write_text(json.dumps(synthetic_squad(args.articles, args.questions)))
    cfg_path = work / "sweep.yaml"
    cfg_path.write_text(SWEEP.format(path=data, mlflow="true" if args.mlflow else "false"))
    cfg = load_config(cfg_path)
    ds = load_dataset(cfg.dataset)
    tokens = sorted(count_tokens(ds.corpus["text"].to_list(), "all-MiniLM-L6-v2"))
    print(f"data: {ds.corpus.height} articles, {ds.queries.height} questions; article tokens min {tokens[0]}, "
          f"median {tokens[len(tokens) // 2]}, max {tokens[-1]}")

    home = work / "home"
    shutil.rmtree(home, ignore_errors=True)
    settings = Settings.from_env(home=home).replace(qdrant_url=None, qdrant_api_key=None,
                                                    **({} if args.mlflow else {"mlflow_tracking_uri": None}))
    t0 = time.perf_counter()
    cold = run_sweep(cfg, settings)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    warm = run_sweep(cfg, settings)
    t_warm = time.perf_counter() - t0
    reused = sum(bool(o.reused_from) for o in warm.outcomes)
    print(f"\nsweep of {len(cold.outcomes)} configs: cold {t_cold:.1f} s, warm {t_warm:.2f} s "
          f"({100 * t_warm / t_cold:.1f} % of cold; target <= 5 %); warm reused {reused}/{len(warm.outcomes)} "
          f"configs, computed {warm.vectors_computed} vectors")

    # answer-in-context vs rank metrics on one whole-article config (BM25)
    from ragbench.chunking import chunk_corpus

    chunks = chunk_corpus(ds, WholeDocChunker())
    hits = BM25Index(BM25Retriever(), index_texts(chunks).to_list()).search(ds.queries["text"].to_list(), depth=100)
    run = run_from_hits(ds.queries["query_id"].to_list(), chunks, hits.ids, hits.scores)
    tok_counts = dict(zip(chunks["chunk_id"], count_tokens(chunks["text"].to_list(), "all-MiniLM-L6-v2")))
    t0 = time.perf_counter()
    evaluate_stage(ds, run, measures_from_spec(cfg.metrics), chunks=chunks, metrics_spec=cfg.metrics,
                   token_counts=tok_counts)
    t_rank = time.perf_counter() - t0
    texts = ChunkTexts(ContextSpec().tokenizer, ContextSpec().shingle_size, tok_counts)
    t0 = time.perf_counter()
    answer_in_context_metrics(ds, run, chunks, None, texts)
    t_aic_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = answer_in_context_metrics(ds, run, chunks, None, texts)
    t_aic = time.perf_counter() - t0
    print(f"whole-article BM25 config, {ds.queries.height} queries: rank metrics {t_rank:.2f} s; answer-in-context "
          f"{t_aic_first:.2f} s with an empty per-chunk cache, {t_aic:.2f} s for the next config of the chunker "
          f"(target <= rank metrics); answer_in_context@5 = {m['answer_in_context@5']:.3f}, empty contexts "
          f"{m['empty_contexts@5']:.0f}, gold lost to the budget {m['gold_lost_to_budget@5']:.3f}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
