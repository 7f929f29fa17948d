"""Adding a component is one file: a toy chunker, a toy retriever and a toy rank measure, each written as a module
of its own outside the package (here in tmp_path), register through the public registries when imported, and a
sweep over the demo dataset (with the static embedding model) runs them; their values land in DuckDB. No file of
ragbench is edited, and nothing central lists them."""

from __future__ import annotations

import importlib
import sys
import textwrap

import numpy as np
import pytest
from conftest import DEMO, write_config

from ragbench.chunking import CHUNKERS
from ragbench.config import load_config
from ragbench.evaluation.measures import MEASURE_VERSIONS, RANK_MEASURES
from ragbench.results.store import ResultStore
from ragbench.retrieval import RETRIEVERS
from ragbench.sweep import run_sweep

MODULES = {
    "toy_chunker": '''
        """Sentences of a document, two at a time."""
        import re
        from typing import Literal

        from ragbench.chunking import CHUNKERS, ChunkerSpec


        @CHUNKERS.register
        class SentencePairs(ChunkerSpec):
            kind: Literal["sentence-pairs"] = "sentence-pairs"

            def spans(self, text):
                cuts = sorted({0, len(text), *(m.end() for m in re.finditer(r"[.!?]\\s+", text))})
                pairs = cuts[::2] if cuts[::2][-1] == len(text) else [*cuts[::2], len(text)]
                return [(s, e) for s, e in zip(pairs, pairs[1:]) if text[s:e].strip()]
    ''',
    "toy_retriever": '''
        """Scores a chunk by the query words it contains, longer words counting more."""
        from typing import Literal

        import numpy as np

        from ragbench.core.schemas import index_texts
        from ragbench.retrieval import RETRIEVERS, RetrieverSpec, run_from_hits


        @RETRIEVERS.register
        class LongWords(RetrieverSpec):
            kind: Literal["long-words"] = "long-words"

            def first_stage(self, ds, res, embedder, filters):
                words = [set(t.lower().split()) for t in index_texts(res.chunks)]
                ids, scores = [], []
                for q in ds.queries["text"]:
                    terms = set(q.lower().split())
                    s = np.array([sum(len(t) for t in terms & w) for w in words], dtype=np.float64)
                    top = [i for i in np.argsort(-s, kind="stable")[:self.depth] if s[i] > 0]
                    ids.append(np.array(top, dtype=np.int64))
                    scores.append(s[top])
                return run_from_hits(ds.queries["query_id"].to_list(), res.chunks, ids, scores)
    ''',
    "toy_measure": '''
        """Share of the top k that is relevant: precision by another name (so the test can check it)."""
        import numpy as np

        from ragbench.evaluation.measures import rank_measure


        @rank_measure("toy_share", version=1)
        def toy_share(top, ideal, n_relevant, k, gain):
            return float(np.count_nonzero(top[:k] > 0)) / k
    ''',
}

SWEEP = f"""name: toy-components
dataset: {{path: {DEMO}, queries: all}}
chunkers: [{{kind: sentence-pairs}}]
embedders: [{{model: static-retrieval-m2v}}]
retrievers: [{{kind: long-words, depth: 20}}, {{kind: dense, exact: true}}]
metrics: {{measures: [toy_share, precision, ndcg], cutoffs: [3, 10], primary: ndcg@10}}
output: {{mlflow: false}}
"""


@pytest.fixture
def toy_modules(tmp_path, monkeypatch):
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield [importlib.import_module(name) for name in MODULES]
    CHUNKERS.unregister("sentence-pairs")
    RETRIEVERS.unregister("long-words")
    RANK_MEASURES.pop("toy_share", None)
    MEASURE_VERSIONS.pop("toy_share", None)
    for name in MODULES:
        sys.modules.pop(name, None)


def test_toy_components_each_in_one_module_run_in_a_sweep(toy_modules, home, settings, tmp_path):
    assert "sentence-pairs" in CHUNKERS.kinds and "long-words" in RETRIEVERS.kinds and "toy_share" in RANK_MEASURES
    cfg = load_config(write_config(tmp_path / "toys.yaml", SWEEP))
    result = run_sweep(cfg, settings)
    assert result.n_failed == 0
    assert sorted(o.name for o in result.outcomes) == ["sentence-pairs | long-words",
                                                        "sentence-pairs | static-retrieval-m2v | dense-exact"]
    store = ResultStore(home / "results.duckdb")
    rows = store.query("SELECT c.name, q.measure, q.query_id, q.value FROM query_metrics q JOIN configs c "
                       "USING (sweep_id, config_id) WHERE q.sweep_id = ? AND q.measure IN ('toy_share_at_10', "
                       "'precision_at_10', 'toy_share_at_3', 'precision_at_3') ORDER BY 1, 3, 2", [result.sweep_id])
    assert rows.height == 2 * 4 * 34  # configs x measures x queries
    for name in rows["name"].unique():
        for k in (3, 10):
            toy = rows.filter((rows["name"] == name) & (rows["measure"] == f"toy_share_at_{k}"))["value"]
            built_in = rows.filter((rows["name"] == name) & (rows["measure"] == f"precision_at_{k}"))["value"]
            assert np.allclose(toy.to_numpy(), built_in.to_numpy(), equal_nan=True)  # the toy measure, stored
            assert np.nanmax(toy.to_numpy()) > 0
    chunks = store.query("SELECT value FROM chunk_stats WHERE sweep_id = ? AND stat = 'chunk_count'",
                         [result.sweep_id])["value"]
    assert chunks.n_unique() == 1 and 36 < chunks[0] < 2000  # the toy chunker cut every document, more than once
    lexical = {o.name: o.metrics for o in result.outcomes}["sentence-pairs | long-words"]
    assert 0 < lexical["ndcg@10"] <= 1  # the toy retriever found relevant documents
    assert store.measure_versions(result.sweep_id)[result.outcomes[0].config_id]["toy_share"] == 1
