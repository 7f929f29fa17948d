"""The distractor corpus of benchmarks/scale.py: SciFact grown with re-drawn sentences keeps its labels valid."""

from __future__ import annotations

import importlib.util
import json

from conftest import ROOT, SCIFACT, requires_scifact

from ragbench.config import DatasetSpec
from ragbench.data import load_dataset


def _scale_module():
    spec = importlib.util.spec_from_file_location("scale_bench", ROOT / "benchmarks" / "scale.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@requires_scifact()
def test_distractor_corpus_keeps_scifact_labels(tmp_path):
    out = _scale_module().build_distractor_corpus(tmp_path / "grown", 6000, seed=1)
    grown = load_dataset(DatasetSpec(path=out))
    source = load_dataset(DatasetSpec(path=SCIFACT))
    assert grown.corpus.height == 6000
    # every judged document is SciFact's, with the same text; every evidence span sits at the same place
    assert grown.qrels.equals(source.qrels) and grown.spans.select("query_id", "doc_id", "start", "end").equals(
        source.spans.select("query_id", "doc_id", "start", "end"))
    texts = dict(zip(grown.corpus["doc_id"], grown.corpus["text"]))
    assert all(texts[d] == t for d, t in zip(source.corpus["doc_id"], source.corpus["text"]))
    # distractors are made only of SciFact sentences
    sentences = set()
    for line in (SCIFACT / "sentences.jsonl").read_text().splitlines():
        o = json.loads(line)
        text = texts[str(o["_id"])]
        sentences |= {text[s:e] for s, e in o["sentences"]}
    distractors = grown.corpus.filter(grown.corpus["doc_id"].str.starts_with("syn-"))
    assert distractors.height == 6000 - source.corpus.height
    for text in distractors["text"].to_list()[:200]:
        parts = text.split(" ")
        # greedily re-split the text into known sentences (sentences contain spaces, so match prefixes)
        i = 0
        while i < len(parts):
            j = next((j for j in range(len(parts), i, -1) if " ".join(parts[i:j]) in sentences), None)
            assert j is not None, f"not made of SciFact sentences: {text[:120]!r}"
            i = j
