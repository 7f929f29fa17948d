"""Semantic chunking: cuts at sentence boundaries where consecutive sentences' embeddings diverge, offsets kept."""

from __future__ import annotations

import json

import pytest
from conftest import DEMO, write_config

from ragbench.chunking import CHUNKERS, chunk_corpus, sentence_spans
from ragbench.config import load_config
from ragbench.core.models import resolve_model
from ragbench.data import DatasetSpec, load_dataset
from ragbench.sweep import run_sweep

DOCS = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines()]


def semantic(threshold: float):
    return CHUNKERS.parse({"kind": "semantic", "model": "static-retrieval-m2v", "threshold": threshold})


def test_chunks_are_exact_offsets_cut_at_sentence_boundaries():
    ds = load_dataset(DatasetSpec(path=DEMO))
    chunks = chunk_corpus(ds, semantic(0.5))
    texts = dict(ds.corpus.select("doc_id", "text").iter_rows())
    assert chunks.height > ds.corpus.height  # some documents are cut
    for doc_id, start, end, text in chunks.select("doc_id", "start", "end", "text").iter_rows():
        assert texts[doc_id][start:end] == text
    for doc_id, doc_text in texts.items():
        sentences = sentence_spans(doc_text)
        spans = semantic(0.5).spans(doc_text)
        # every chunk starts at a sentence start and ends at a sentence end; together they hold every sentence once
        assert {s for s, _ in spans} <= {s for s, _ in sentences}
        assert {e for _, e in spans} <= {e for _, e in sentences}
        covered = [(s, e) for s, e in sentences if any(a <= s and e <= b for a, b in spans)]
        assert covered == sentences and spans == sorted(spans)


def test_a_lower_threshold_keeps_every_cut_and_adds_more():
    texts = [d["text"] for d in DOCS]
    cuts = {t: [set(semantic(t).spans(x)) for x in texts] for t in (0.2, 0.35, 0.5, 0.8)}
    counts = {t: sum(len(c) for c in v) for t, v in cuts.items()}
    assert counts[0.2] > counts[0.5] > counts[0.8]
    for low, high in [(0.2, 0.35), (0.35, 0.5), (0.5, 0.8)]:
        assert counts[low] >= counts[high]
        for x, lo, hi in zip(texts, cuts[low], cuts[high]):
            assert {s for s, _ in lo} >= {s for s, _ in hi}, x[:60]


def test_the_model_revision_is_part_of_the_chunkers_identity():
    spec = semantic(0.5)
    assert spec.canonical()["revision"] == resolve_model("static-retrieval-m2v").revision
    with pytest.raises(ValueError, match="revision"):
        CHUNKERS.parse({"kind": "semantic", "threshold": 0.5, "revision": "0123456789ab"})


def test_a_demo_sweep_judges_semantic_chunks_on_span_labels(home, settings):
    cfg = load_config(write_config(home.parent / "sem.yaml", f"""name: semantic-demo
dataset: {{path: {DEMO}}}
chunkers:
  - {{kind: semantic, model: static-retrieval-m2v, threshold: 0.5}}
  - {{kind: recursive, size: 128, overlap: 0}}
retrievers: [{{kind: bm25}}]
metrics: {{cutoffs: [1, 5, 10], budgets: [256]}}
output: {{mlflow: false}}
"""))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0 and len(result.outcomes) == 2
    (sem,) = [o for o in result.outcomes if o.spec["chunker"]["kind"] == "semantic"]
    for m in ("span_recall_at_5", "evidence_recall_at_256tok", "chunk_ndcg_at_10"):
        assert 0 < sem.metrics[m] <= 1, m
