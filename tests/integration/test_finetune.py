"""Fine-tuned embedders: the leak guard, training on the train split, storage by content hash, and evaluation in a
sweep like any model. On the demo corpus split into train (q09-q32) and test (q01-q08) queries."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.models import configure_model_store, load_sentence_transformer
from ragbench.data import DatasetSpec, load_dataset
from ragbench.embedding import finetune
from ragbench.embedding.finetune import (
    META_FILE,
    FinetuneLeakError,
    find_leaks,
    finetune_key,
    finetuned_model,
    training_pairs,
)
from ragbench.embedding.spec import EmbedderSpec
from ragbench.sweep import run_sweep

TEST_QUERIES = {f"q0{i}" for i in range(1, 9)}
QRELS = [r for r in csv.reader((DEMO / "qrels" / "test.tsv").open(), delimiter="\t")][1:]
SMALL = {"epochs": 1, "batch_size": 4, "max_pairs": 8, "seed": 0, "leaks": "drop"}


def split_demo(root: Path, train_extra: list[list[str]] = (), extra_queries: list[dict] = ()) -> Path:
    """The demo as a BEIR folder with a test split (q01-q08) and a train split (the other queries + extras)."""
    (root / "qrels").mkdir(parents=True)
    shutil.copy(DEMO / "corpus.jsonl", root / "corpus.jsonl")
    queries = (DEMO / "queries.jsonl").read_text() + "".join(json.dumps(q) + "\n" for q in extra_queries)
    (root / "queries.jsonl").write_text(queries)
    for split, rows in [("test", [r for r in QRELS if r[0] in TEST_QUERIES]),
                        ("train", [r for r in QRELS if r[0] not in TEST_QUERIES] + list(train_extra))]:
        (root / "qrels" / f"{split}.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    return root


def spec(**ft) -> EmbedderSpec:
    return EmbedderSpec(model="all-MiniLM-L6-v2", finetune={**SMALL, **ft})


def test_the_guard_refuses_a_split_that_leaks_queries_or_judged_documents(tmp_path):
    leaky = split_demo(tmp_path / "leaky", train_extra=[["q01", "nimbus-errors-4xxx", "1"], ["q99", "nimbus-errors-4xxx", "1"]],
                       extra_queries=[{"_id": "q99", "text": "  how do I FIX error NMB-5021? "}])  # q02, respaced
    evaluated = load_dataset(DatasetSpec(path=leaky, split="test"))
    home = tmp_path / "home"
    with pytest.raises(FinetuneLeakError) as e:
        finetuned_model(spec(leaks="refuse"), DatasetSpec(path=leaky, split="test"), evaluated, home)
    msg = str(e.value)
    assert msg.startswith("refusing to fine-tune all-MiniLM-L6-v2")
    assert "2 training queries (split 'train') are also queries of the evaluated split 'test' (same id or text): " \
           "q01, q99" in msg
    assert "training documents are judged in the evaluated split 'test'" in msg and "finetune.leaks: drop" in msg
    assert not (home / "models").exists()  # nothing trained
    with pytest.raises(FinetuneLeakError, match="is the split the sweep evaluates"):
        finetuned_model(spec(split="test"), DatasetSpec(path=leaky, split="test"), evaluated, home)


def test_dropping_leaks_trains_only_on_pairs_that_touch_no_evaluated_query_or_judged_document(tmp_path):
    root = split_demo(tmp_path / "demo")
    train = load_dataset(DatasetSpec(path=root, split="train", spans=False))
    evaluated = load_dataset(DatasetSpec(path=root, split="test"))
    leaks = find_leaks(train, evaluated)
    judged = {d for q, d, _ in QRELS if q in TEST_QUERIES}
    clean = [(q, d) for q, d, r in QRELS if q not in TEST_QUERIES and int(r) > 0 and d not in judged]
    assert leaks.queries == [] and set(leaks.documents) == {d for q, d, r in QRELS if q not in TEST_QUERIES
                                                             and int(r) > 0 and d in judged}
    pairs = training_pairs(train, leaks, spec(max_pairs=None))
    assert len(pairs) == len(clean) == leaks.total - leaks.pairs
    texts = {d: f"{t} {x}" for d, t, x in train.corpus.select("doc_id", "title", "text").iter_rows()}
    assert {doc for _, doc in pairs} == {texts[d] for _, d in clean}


@pytest.fixture(scope="module")
def ft_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ft")
    root = split_demo(tmp / "demo")
    home = tmp / "home"
    cfg = load_config(write_config(tmp / "ft.yaml", f"""name: finetune-demo
dataset: {{path: {root}, split: test}}
chunkers: [{{kind: whole}}]
embedders:
  - {{model: all-MiniLM-L6-v2}}
  - {{model: all-MiniLM-L6-v2, finetune: {json.dumps(SMALL)}}}
retrievers: [{{kind: dense, exact: true}}]
metrics: {{cutoffs: [1, 5, 10]}}
output: {{mlflow: false}}
"""))
    from ragbench.core.settings import Settings
    result = run_sweep(cfg, Settings(home=home))
    yield root, home, result
    configure_model_store(None)


@pytest.mark.slow  # the module trains and sweeps once (setup 30-180 s on 2 shared cores)
def test_a_finetuned_embedder_is_trained_and_evaluated_in_a_sweep(ft_sweep):
    root, home, result = ft_sweep
    assert result.n_failed == 0 and len(result.outcomes) == 2
    by_model = {o.spec["embedder"]["model"]: o for o in result.outcomes}
    (tuned,) = [m for m in by_model if m.startswith("finetuned:")]
    folder = home / "models" / tuned.split(":", 1)[1]
    meta = json.loads((folder / META_FILE).read_text())
    assert meta["pairs"] == 8 and meta["steps"] == 2 and meta["split"] == "train" and meta["left_out_pairs"] > 0
    assert by_model[tuned].spec["embedder"]["finetune"]["epochs"] == 1
    assert by_model[tuned].metrics["ndcg_at_10"] != by_model["all-MiniLM-L6-v2"].metrics["ndcg_at_10"]
    base = load_sentence_transformer("all-MiniLM-L6-v2").encode("What does error NMB-4013 mean?")
    assert not (load_sentence_transformer(tuned).encode("What does error NMB-4013 mean?") == base).all()


@pytest.mark.slow  # the module trains and sweeps once (setup 30-180 s on 2 shared cores)
def test_the_trained_model_is_stored_by_content_hash_and_reused(ft_sweep, monkeypatch):
    root, home, result = ft_sweep
    (tuned,) = [o.spec["embedder"]["model"] for o in result.outcomes if o.spec["embedder"]["model"] != "all-MiniLM-L6-v2"]

    def no_training(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(finetune, "train_model", no_training)
    dataset = DatasetSpec(path=root, split="test")
    evaluated = load_dataset(dataset)
    assert finetuned_model(spec(), dataset, evaluated, home) == tuned  # reused, not retrained
    with pytest.raises(AssertionError, match="trained again"):  # another seed is another model
        finetuned_model(spec(seed=1), dataset, evaluated, home)
    assert [p.name for p in (home / "models").iterdir()] == [tuned.split(":", 1)[1]]  # no half-written folder left
    pairs = [("a", "b"), ("c", "d")]
    assert finetune_key(spec(), pairs) != finetune_key(spec(), pairs[:1])  # training data is in the hash
    assert finetune_key(spec(), pairs) != finetune_key(spec(epochs=2), pairs)  # and the settings


def test_an_untrained_finetune_spec_never_embeds_with_the_base_model():
    from ragbench.core.errors import ModelError
    from ragbench.embedding.embed import model_key

    with pytest.raises(ModelError, match="refusing to embed with the base model"):
        model_key(spec())


@pytest.mark.slow  # the module trains and sweeps once (setup 30-180 s on 2 shared cores)
def test_a_promoted_finetuned_config_serves_what_was_evaluated(ft_sweep):
    import duckdb

    from ragbench.core.settings import Settings
    from ragbench.promotion.serving import ProductionRetriever

    root, home, result = ft_sweep
    configure_model_store(None)  # serving finds the model in the home by itself
    o = next(o for o in result.outcomes if o.spec["embedder"]["model"].startswith("finetuned:"))
    question = next(json.loads(line)["text"] for line in (root / "queries.jsonl").read_text().splitlines()
                    if json.loads(line)["_id"] == "q01")
    served = ProductionRetriever.from_config(o.spec, result.dataset_fingerprint, Settings(home=home))
    got = served.search([question], 5)["chunk_id"].to_list()
    served.close()
    con = duckdb.connect(str(home / "results.duckdb"), read_only=True)
    stored = [c for (c,) in con.execute("SELECT chunk_id FROM rankings WHERE config_id = ? AND query_id = 'q01' "
                                        "ORDER BY rank LIMIT 5", [o.config_id]).fetchall()]
    con.close()
    assert got == stored
