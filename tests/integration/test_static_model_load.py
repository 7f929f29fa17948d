"""The packaged static model read from its files (``ragbench.core.models.static_embedding``) is the model that
sentence-transformers' ``StaticEmbedding.from_model2vec`` builds through model2vec's loader, bit for bit: the same
token rows, the same tokenizer (truncation included) and the same vectors for real and awkward texts — so vectors
cached by either loader stay interchangeable under the same model key."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import ROOT

from ragbench.core.models import resolve_model, static_embedding

SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"


def _texts() -> list[str]:
    texts = [json.loads(line)["text"] for line in (ROOT / "datasets" / "demo" / "corpus.jsonl").open()]
    if SCIFACT.is_dir():
        texts += [json.loads(line)["text"] for line in (SCIFACT / "corpus.jsonl").open()][:2000]
    # empty, space only, out of vocabulary, past the 512-token truncation (in words and in one run of letters)
    return texts + ["", " ", "ünïcödé 日本語 ☃", "word " * 3000, "x" * 5000]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_static_model_read_from_its_files_is_model2vecs_bit_for_bit():
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Normalize, StaticEmbedding

    path = resolve_model("static-retrieval-m2v").path
    ours, theirs = static_embedding(path), StaticEmbedding.from_model2vec(str(path))
    assert torch.equal(ours.embedding.weight, theirs.embedding.weight)
    assert ours.embedding.weight.dtype == torch.float32
    assert json.loads(ours.tokenizer.to_str()) == json.loads(theirs.tokenizer.to_str())
    texts = _texts()
    a = SentenceTransformer(modules=[ours, Normalize()], device="cpu").encode(texts, batch_size=32)
    b = SentenceTransformer(modules=[theirs, Normalize()], device="cpu").encode(texts, batch_size=32)
    assert np.array_equal(a, b)
