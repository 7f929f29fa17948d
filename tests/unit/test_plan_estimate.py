"""The plan's arithmetic (counts x rates -> seconds, disk, memory), durations and the budgeted order, by hand."""

import json
from dataclasses import replace

import pytest
from conftest import ROOT, write_config

from ragbench.config import load_config
from ragbench.core.errors import ConfigError
from ragbench.sweep.budget import budget_order, parse_budget, with_budget
from ragbench.sweep.estimate import (
    MLFLOW_BYTES,
    RUNTIME_BYTES,
    SWEEP_PROCESS_BYTES,
    ChunkWork,
    EmbedWork,
    IndexWork,
    Rates,
    WorkCounts,
    estimate,
    stage_seconds,
)


def test_estimate_prices_each_stage_and_sums_them():
    counts = WorkCounts(
        chunks=(ChunkWork("whole", 10, 10, True), ChunkWork("fixed", 10, 40, False)),
        embeds=(EmbedWork("fixed", "m", 40, 15, 25, 10_000), EmbedWork(None, "m", 5, 0, 5, 200)),
        indexes=(IndexWork("fixed", "m", 40),), run=3, reuse=2, skip=1, queries=5, rerank_pairs=100, llm_calls=4,
        dims={"m": 8}, model_bytes={"m": 1000})
    rates = Rates(seconds_per_token={"m": 0.001}, load_seconds={"m": 7.0}, seconds_per_doc_cut=0.5,
                  seconds_per_vector_indexed=0.25, seconds_per_config=2.0, seconds_per_query=0.1,
                  seconds_per_rerank_pair=0.01, seconds_per_llm_call=3.0)
    e = estimate(counts, rates)
    by = {(r.stage, r.what): r for r in e.rows}
    assert by[("chunk", "whole")].seconds == 0 and by[("chunk", "whole")].cached == 10
    assert by[("chunk", "fixed")].seconds == pytest.approx(5.0) and by[("chunk", "fixed")].count == 10
    assert by[("embed", "fixed x m")].seconds == pytest.approx(10.0)
    assert (by[("embed", "fixed x m")].count, by[("embed", "fixed x m")].cached) == (25, 15)
    assert by[("embed", "queries x m")].seconds == pytest.approx(0.2)
    assert by[("index", "fixed x m")].seconds == pytest.approx(10.0)
    # 3 configs x (2 + 0.1 x 5) + 100 pairs x 0.01
    assert by[("evaluate", "configs")].seconds == pytest.approx(8.5) and by[("evaluate", "configs")].cached == 3
    assert by[("llm", "calls")].seconds == pytest.approx(12.0)
    assert by[("load", "m")].seconds == 7.0  # once, though the model embeds two sets of texts
    assert e.total_seconds == pytest.approx(5 + 7 + 10 + 0.2 + 10 + 8.5 + 12)
    assert e.disk_bytes == 2 * 4 * 8 * (25 + 5)  # each new vector in the cache and in the index
    # the process, no MLflow, no runtime, one model's measured bytes, the one collection's float32 vectors
    assert e.memory == {"process": SWEEP_PROCESS_BYTES, "data": 0, "runtimes": 0, "models": 1000,
                        "collection": 4 * 8 * 40}
    assert e.peak_memory_bytes == SWEEP_PROCESS_BYTES + 1000 + 4 * 8 * 40
    both = estimate(replace(counts, mlflow=True, runtimes=("onnx", "torch"), data_bytes=70,
                            chunks=(ChunkWork("whole", 10, 10, True, 3), ChunkWork("fixed", 10, 40, False, 4)),
                            model_bytes={"m": 1000, "u": 500}), rates)
    assert both.peak_memory_bytes == (SWEEP_PROCESS_BYTES + MLFLOW_BYTES + 77 + RUNTIME_BYTES["onnx"]
                                      + RUNTIME_BYTES["torch"] + 1500 + 4 * 8 * 40)
    assert stage_seconds("embed", 0, 500, "m", rates) == pytest.approx(0.5)
    assert stage_seconds("evaluate", 5, 0, None, rates) == pytest.approx(2.5)
    assert stage_seconds("index", 8, 0, None, rates) == pytest.approx(2.0)


def test_a_model_without_new_texts_costs_nothing_and_no_llm_row_without_calls():
    e = estimate(WorkCounts(embeds=(EmbedWork("whole", "m", 9, 9, 0, 0),)), Rates())
    assert [r.stage for r in e.rows] == ["embed", "evaluate"] and e.total_seconds == 0


def test_a_screened_plan_prices_the_pool_and_says_what_one_kept_pair_would_cost():
    from ragbench.sweep.forecast import Forecast, plan_json, plan_lines

    # two chunkers x model m (calibrated) and one chunker x model u (not calibrated)
    counts = WorkCounts(
        embeds=(EmbedWork("a", "m", 100, 0, 80, 8_000), EmbedWork("b", "m", 50, 0, 40, 2_000),
                EmbedWork("a", "u", 100, 0, 80, 8_000), EmbedWork(None, "m", 5, 0, 5, 100)),
        screen=(EmbedWork("a", "m", 20, 0, 20, 2_000), EmbedWork("b", "m", 10, 0, 10, 500),
                EmbedWork("a", "u", 20, 0, 20, 2_000)),
        indexes=(IndexWork("a", "m", 100), IndexWork("b", "m", 50), IndexWork("a", "u", 100)), pool_documents=7,
        pool_depth=10)
    rates = Rates(seconds_per_token={"m": 0.001}, seconds_per_vector_indexed=0.01, seconds_per_config=0.0)
    e = estimate(counts, rates)
    by = {(r.stage, r.what): r for r in e.rows}
    assert by[("screen", "a x m")].seconds == pytest.approx(2.0) and by[("screen", "b x m")].count == 10
    # a pair saved = its full embedding and its collection; u is not priced (no calibration) but still a pair
    assert dict(e.pair_seconds) == pytest.approx({"a x m": 8.0 + 1.0, "b x m": 2.0 + 0.5, "a x u": 0.0 + 1.0})
    assert e.unpriced == ("u",)
    assert e.total_seconds == pytest.approx(2.0 + 0.5 + 8.0 + 2.0 + 0.1 + 2.5)
    assert e.floor_seconds == pytest.approx(e.total_seconds - (9.0 + 2.5 + 1.0) + 1.0)
    assert e.disk_bytes == 2 * 4 * 384 * (20 + 10 + 20 + 80 + 40 + 80 + 5)  # the screen's vectors are cached too
    f = Forecast(counts, e, {})
    lines = plan_lines(f)
    assert any(line.split()[:2] == ["screen", "a"] and line.endswith("~? (not calibrated)") and "x u" in line
               for line in lines)
    assert any(line.split()[:2] == ["embed", "b"] and line.endswith("~2 s") for line in lines)
    assert "if the screen keeps every pair, not counting the encoding of u" in lines[-2]
    assert lines[-1].startswith("  screen: 3 chunker x model pairs first embedded on a pool of 7 documents; ~")
    # the pool's share of the corpus: under half, said; half or more, with the hint to lower the depth
    for corpus, share, hint in ((20, "35%", False), (14, "50%", True), (8, "88%", True)):
        chunked = replace(counts, chunks=(ChunkWork("a", corpus, 100, False), ChunkWork("b", corpus, 50, False)))
        said = plan_lines(Forecast(chunked, e, {}))
        screen_lines = [line for line in said if line.startswith("  screen: ")]
        assert f"a pool of 7 documents ({share} of the corpus); ~" in screen_lines[0]
        assert (len(screen_lines) == 2) == hint
        if hint:
            assert "top 10 of each cheap retriever" in screen_lines[1] and "search.depth below 10" in screen_lines[1]
        assert plan_json(Forecast(chunked, e, {}))["screen"]["pool_share"] == pytest.approx(7 / corpus)
    # over the memory this process may use: a line saying so (none without a limit or under it)
    assert all(not line.startswith("  memory:") for line in lines) and f.memory_warning() is None
    peak = e.peak_memory_bytes
    assert Forecast(counts, e, {}, memory_limit=peak).memory_warning() is None
    tight = Forecast(counts, e, {}, memory_limit=peak - 2**20)
    [said] = [line for line in plan_lines(tight) if line.startswith("  memory:")]
    assert said == f"  memory: {tight.memory_warning()}" and f"~{peak / 2**20:.0f} MiB is over the " in said
    assert plan_json(tight)["memory_limit_bytes"] == peak - 2**20
    js = plan_json(f)
    assert js["screen"]["floor_seconds"] == pytest.approx(e.floor_seconds) and js["uncalibrated"] == ["u"]
    assert js["texts_to_embed"] == 20 + 10 + 20 + 80 + 40 + 80 + 5


def test_the_clock_forgets_the_work_of_the_pairs_the_screen_took_out():
    from ragbench.sweep.budget import StageClock

    cfg = load_config(ROOT / "configs" / "demo.yaml")
    configs = [c for c in cfg.expand() if c.embedder is not None]
    pairs = sorted({(c.chunker.label, c.embedder.label) for c in configs})
    assert len(pairs) >= 2
    counts = WorkCounts(embeds=tuple(EmbedWork(ch, m, 10, 0, 10, 1_000) for ch, m in pairs), run=len(configs))
    clock = StageClock(None, counts, Rates(seconds_per_token={m: 0.01 for _, m in pairs}, seconds_per_config=1.0,
                                           seconds_per_query=0.0), [])
    assert clock.left_seconds() == pytest.approx(10.0 * len(pairs) + len(configs))
    kept = [c for c in configs if (c.chunker.label, c.embedder.label) == pairs[0]]
    clock.keep(kept)
    assert clock.left_seconds() == pytest.approx(10.0 + len(kept))


def test_the_clocks_eta_counts_down_an_embedding_under_way_and_says_unknown_for_a_model_not_yet_timed():
    import time
    from types import SimpleNamespace

    from ragbench.sweep.budget import StageClock

    counts = WorkCounts(embeds=(EmbedWork("whole", "m", 10, 0, 10, 1_000), EmbedWork("whole", "u", 10, 0, 10, 500)),
                        run=3)
    rates = Rates(seconds_per_token={"m": 0.01}, seconds_per_config=1.0, seconds_per_query=0.0)
    clock = StageClock(None, counts, rates, ["whole"])
    assert clock.eta_seconds() is None  # model u has no rate: its 500 tokens are not free
    assert clock.left_seconds() == pytest.approx(10.0 + 3)
    assert StageClock(None, WorkCounts(), rates, ["whole"]).eta_seconds() is None  # no plan to price

    seen = {}

    def embed(chunker_index, chunks, emb):  # the embedding under way: its priced 10 s less what it has run
        time.sleep(0.3)
        seen["left"] = clock.left_seconds()
        return SimpleNamespace(computed=10, encode_seconds=2.0)

    m = SimpleNamespace(label="m")
    clock.embed_documents(embed)(0, SimpleNamespace(height=10), m)
    assert 13.0 - 0.3 - 1.0 < seen["left"] <= 13.0 - 0.3  # counted down while it ran
    clock.rates = replace(clock.rates, seconds_per_token={**clock.rates.seconds_per_token, "u": 0.02})
    assert clock.eta_seconds() == pytest.approx(10.0 + 3)  # m done; u's 500 tokens at 0.02 s, 3 configs at 1 s


def test_an_embedding_starts_only_when_its_first_config_can_follow_it_within_the_budget():
    """95 s of encoding fits a 100 s budget; with its collection (1,000 vectors, 4 s) and one config (10 s) after it,
    it does not: the stage is refused, not started."""
    from types import SimpleNamespace

    import polars as pl

    from ragbench.sweep.budget import OverBudget, StageClock

    counts = WorkCounts(embeds=(EmbedWork("whole", "m", 1000, 0, 1000, 9_500),), run=1)
    rates = Rates(seconds_per_token={"m": 0.01}, seconds_per_vector_indexed=0.004, seconds_per_config=10.0,
                  seconds_per_query=0.0)
    started = []

    def stage(chunker_index, chunks, emb):
        started.append(emb.label)
        return SimpleNamespace(computed=0, encode_seconds=0.0)

    chunks, emb = pl.DataFrame({"chunk_id": [str(i) for i in range(1000)]}), SimpleNamespace(label="m")
    with pytest.raises(OverBudget, match="embedding whole x m"):
        StageClock(100.0, counts, rates, ["whole"]).embed_documents(stage)(0, chunks, emb)
    assert started == []
    StageClock(110.0, counts, rates, ["whole"]).embed_documents(stage)(0, chunks, emb)  # 95 + 4 + 10 fits in 110
    assert started == ["m"]


def test_a_config_is_priced_by_the_configs_of_its_kind_measured_so_far():
    """BM25 configs run first and take milliseconds; a dense config is priced by the dense configs measured, not by
    the BM25 mean (the ETA and the budget's gate both read it)."""
    import time

    from ragbench.sweep.budget import OverBudget, StageClock, cost_kind

    cfg = load_config(ROOT / "configs" / "demo.yaml")
    bm25 = [c for c in cfg.expand() if c.retriever.kind == "bm25"][:3]
    dense = [c for c in cfg.expand() if c.retriever.kind == "dense"][:3]
    assert len(bm25) == len(dense) == 3 and cost_kind(bm25[0]) != cost_kind(dense[0])
    clock = StageClock(None, WorkCounts(run=6), Rates(seconds_per_config=5.0, seconds_per_query=0.0), [])
    clock.keep(bm25 + dense)
    assert clock.left_seconds() == pytest.approx(6 * 5.0)  # nothing measured: the plan's rate for each
    evaluate = clock.evaluate(lambda chunker_index, run_config, chunks: time.sleep(
        0.3 if run_config.retriever.kind == "dense" else 0.0))
    for c in bm25[:2]:
        evaluate(0, c, None)
    bm25_mean = clock.config_seconds(cost_kind(bm25[0]))
    assert bm25_mean < 0.05 and clock.config_seconds(cost_kind(dense[0])) == pytest.approx(bm25_mean)  # none yet
    evaluate(0, dense[0], None)
    dense_mean = clock.config_seconds(cost_kind(dense[0]))
    assert 0.3 <= dense_mean < 0.5
    assert clock.left_seconds() == pytest.approx(bm25_mean + 2 * dense_mean, rel=0.05)
    # a budget that a BM25 config still fits in but a dense one does not
    clock.budget_s = clock.elapsed() + 0.2
    clock.evaluate(lambda *a: None)(0, bm25[2], None)
    with pytest.raises(OverBudget, match="config "):
        clock.evaluate(lambda *a: None)(0, dense[1], None)


@pytest.mark.parametrize("text,seconds", [("8h", 28800), ("90m", 5400), ("120s", 120), ("1h30m", 5400),
                                          ("2.5m", 150), (45, 45.0)])
def test_durations(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["8", "soon", "1d", "", "-3m", "0s", "0h0m", 0, -5, float("nan"), float("inf")])
def test_bad_durations_are_one_line_errors(text):
    with pytest.raises(ConfigError, match="8h, 90m, 120s"):
        parse_budget(text)


def test_a_sweep_files_bad_budget_names_its_line_in_the_words_of_the_option(tmp_path):
    bad = write_config(tmp_path / "bad.yaml", "name: b\ndataset: {path: x}\nchunkers: [{kind: whole}]\n"
                                              "retrievers: [{kind: bm25}]\nbudget: 5 minutes\n")
    with pytest.raises(ConfigError) as e:
        load_config(bad)
    assert "bad.yaml:5: budget: '5 minutes' is not a duration; write e.g. 8h, 90m, 120s or 1h30m" in str(e.value)
    with pytest.raises(ConfigError, match="^budget '5 minutes' is not a duration; write e.g. 8h"):
        parse_budget("5 minutes")
    bare = write_config(tmp_path / "bare.yaml", bad.read_text().replace("5 minutes", "90"))
    with pytest.raises(ConfigError) as e:  # no unit: refused as --budget 90 is, in the same words
        load_config(bare)
    assert "bare.yaml:5: budget: '90' is not a duration; write e.g. 8h, 90m, 120s or 1h30m" in str(e.value)
    good = write_config(tmp_path / "good.yaml", bad.read_text().replace("5 minutes", "1h30m"))
    assert parse_budget(load_config(good).budget) == 5400


def test_a_budget_given_apart_from_the_file_wins_and_is_checked_as_the_files_is():
    cfg = load_config(ROOT / "configs" / "demo.yaml")
    assert with_budget(cfg, None) is cfg
    assert parse_budget(with_budget(cfg.model_copy(update={"budget": "8h"}), "1h30m").budget) == 5400
    with pytest.raises(ConfigError, match="^budget '8 hours' is not a duration"):
        with_budget(cfg, "8 hours")


def test_budget_order_puts_bm25_first_then_one_config_of_every_pair_cheapest_first_then_the_rest():
    cfg = load_config(ROOT / "configs" / "demo.yaml")
    configs = cfg.expand()
    dense = [c for c in configs if c.embedder is not None]
    pairs = {(c.chunker.label, c.embedder.label) for c in dense}
    cost = {p: (1.0 if "static" in p[1] else 100.0) + len(p[0]) / 1000 for p in pairs}
    ordered = budget_order(configs, cost)
    assert sorted(c.config_id for c in ordered) == sorted(c.config_id for c in configs)
    n_bm25 = sum(c.embedder is None for c in configs)
    assert all(c.embedder is None for c in ordered[:n_bm25])
    firsts, rest = ordered[n_bm25:n_bm25 + len(pairs)], ordered[n_bm25 + len(pairs):]
    pair = lambda c: (c.chunker.label, c.embedder.label)  # noqa: E731
    # every pair's first config (in config order) before any pair's second: one more pair over one more knob
    assert [c.config_id for c in firsts] == [
        next(d for d in dense if pair(d) == p).config_id for p in sorted(pairs, key=cost.get)]
    assert [cost[pair(c)] for c in rest] == sorted(cost[pair(c)] for c in rest)  # then the rest, cheapest first


def test_an_embedded_pair_keeps_the_seconds_of_its_first_config_from_the_stages_after_it():
    """Embeddings run ahead of the dense configs: a later embedding (or another config) may not spend the seconds an
    embedded pair's first config needs, else the night pays for vectors no config reads; the kept pairs' first
    configs compete on their own price."""
    from types import SimpleNamespace

    import polars as pl

    from ragbench.sweep.budget import OverBudget, StageClock

    cfg = load_config(ROOT / "configs" / "demo.yaml")
    dense = [c for c in cfg.expand() if c.embedder is not None]
    pick = lambda chunker, model, kind: next(  # noqa: E731
        c for c in dense if (c.chunker.label, c.embedder.label[:6], c.retriever.kind) == (chunker, model, kind))
    minilm, static, minilm_hybrid = pick("whole", "all-Mi", "dense"), pick("whole", "static", "dense"), \
        pick("whole", "all-Mi", "hybrid")
    other = next(c for c in dense if c.chunker.label != "whole")
    counts = WorkCounts(embeds=tuple(EmbedWork(c.chunker.label, c.embedder.label, 10, 0, 10, 1000)
                                     for c in (minilm, static, other)), run=4)
    rates = Rates(seconds_per_token={minilm.embedder.label: 0.01, static.embedder.label: 0.01},
                  seconds_per_config=10.0, seconds_per_query=0.0, seconds_per_vector_indexed=0.0)
    clock = StageClock(35.0, counts, rates, ["whole", other.chunker.label])
    chunks = pl.DataFrame({"chunk_id": ["a"]})
    embed = clock.embed_documents(lambda i, ch, emb: SimpleNamespace(computed=0, encode_seconds=0.0))
    embed(0, chunks, minilm.embedder)  # 10 s + its first config 10 s fit in 35
    embed(0, chunks, static.embedder)  # 10 + 10 + MiniLM's kept 10 fit in 35
    assert clock.reserved() == 20.0
    with pytest.raises(OverBudget, match=f"embedding {other.chunker.label}"):  # 10 + 10 + the two kept 20 > 35
        embed(1, chunks, other.embedder)
    evaluate = clock.evaluate(lambda *a, **k: None)
    clock.budget_s = clock.elapsed() + 15.0
    with pytest.raises(OverBudget, match="config "):  # a config of no kept pair may not spend their seconds
        evaluate(1, other, None)
    evaluate(0, static, None)  # a kept pair's first config: its own 10 s, though MiniLM's 10 are kept too
    evaluate(0, minilm_hybrid, None)  # any config of the pair covers it
    assert clock.reserved() == 0.0


def test_padded_tokens_pay_each_batch_at_its_longest_text_cut_at_the_window():
    from ragbench.sweep.calibrate import padded_tokens

    counts = [9, 4, 2, 1, 1]                       # content tokens, in the order the encoder batches them
    assert padded_tokens(counts, 100, 2, 2) == 2 * (9 + 2) + 2 * (2 + 2) + 1 * (1 + 2)
    assert padded_tokens(counts, 5, 2, 2) == 2 * (5 + 2) + 2 * (2 + 2) + 1 * (1 + 2)   # 9 tokens cut at 5
    assert padded_tokens(counts, 100, 0, 1) == sum(counts)                             # one text a batch: no padding


def test_each_encoder_of_a_model_keeps_its_own_calibration_file(tmp_path):
    from ragbench.embedding.spec import EmbedderSpec
    from ragbench.sweep.calibrate import calibration_path

    specs = [EmbedderSpec(model="all-MiniLM-L6-v2"), EmbedderSpec(model="all-MiniLM-L6-v2", backend="onnx"),
             EmbedderSpec(model="all-MiniLM-L6-v2", backend="onnx", quantize="int8"),
             EmbedderSpec(model="all-MiniLM-L6-v2", max_seq_length=6)]  # its own window: its own rate
    paths = [calibration_path(tmp_path, s, "cpu") for s in specs]
    assert len(set(paths)) == 4 and paths[0].name.endswith("-all-MiniLM-L6-v2-cpu.json")
    assert paths[3].name.endswith("-all-MiniLM-L6-v2-L6-cpu.json")


def test_a_sweep_with_no_finished_config_says_why_in_the_words_of_each_status(tmp_path):
    """The report of a sweep the budget stopped before any config counts them as not run, never as failed."""
    from ragbench.core.errors import RagbenchError
    from ragbench.reporting.model import build_report
    from ragbench.results.outcomes import OVER_BUDGET
    from ragbench.results.store import ResultStore

    store = ResultStore(tmp_path / "results.duckdb")
    store.begin_sweep("s1", "s", "h", {}, "d", "fp")
    for i, error in enumerate([f"{OVER_BUDGET} (embedding whole x m)", f"{OVER_BUDGET} (config a)", "boom"]):
        store.write_config_failure("s1", f"c{i}", f"c{i}", {}, "fp", error)
    with pytest.raises(RagbenchError) as e:
        build_report(store, "s1")
    assert str(e.value) == "sweep s1 has no finished config with results (1 failed, 2 not run: over budget)"


def test_an_embedding_is_priced_to_end_after_the_embeddings_under_way():
    """A runner that starts two embeddings at once (Prefect's) makes the second wait for the encoder: priced as if
    alone, both passed a 90 s budget on a 33-page manual and the sweep ended at 137 s."""
    import threading
    from types import SimpleNamespace

    import polars as pl

    from ragbench.sweep.budget import OverBudget, StageClock

    cfg = load_config(ROOT / "configs" / "demo.yaml")
    minilm, static = (next(c for c in cfg.expand() if c.embedder is not None and c.chunker.label == "whole"
                           and c.embedder.label.startswith(m)) for m in ("all-Mini", "static"))
    counts = WorkCounts(embeds=tuple(EmbedWork("whole", c.embedder.label, 10, 0, 10, 1000) for c in (minilm, static)),
                        run=2)
    rates = Rates(seconds_per_token={minilm.embedder.label: 0.01, static.embedder.label: 0.01},
                  seconds_per_config=1.0, seconds_per_query=0.0, seconds_per_vector_indexed=0.0)
    clock = StageClock(20.0, counts, rates, ["whole"])
    chunks, began, release = pl.DataFrame({"chunk_id": ["a"]}), threading.Event(), threading.Event()

    def encode(i, ch, emb):
        if emb is minilm.embedder:
            began.set()
            release.wait(10)
        return SimpleNamespace(computed=0, encode_seconds=0.0)

    embed = clock.embed_documents(encode)
    under_way = threading.Thread(target=embed, args=(0, chunks, minilm.embedder))
    under_way.start()
    assert began.wait(10)
    with pytest.raises(OverBudget, match="embedding whole x static"):  # 10 + 1 + MiniLM's kept 1 and ~10 ahead > 20
        embed(0, chunks, static.embedder)
    release.set()
    under_way.join(10)
    assert clock.encoding_ahead(("whole", static.embedder.label)) == 0.0
    embed(0, chunks, static.embedder)  # MiniLM done: 10 + 1 + its kept 1 fit in 20


def test_the_wrap_up_is_priced_as_fixed_seconds_and_seconds_per_config_from_what_this_home_measured(tmp_path):
    from ragbench.sweep.wrap_up import (CLOSE, DEFAULT_COST, KEPT, PUBLISH, remember_wrap_up, wrap_up_of,
                                        wrap_up_path, wrap_up_seconds)

    (close_fixed, close_per), (pub_fixed, pub_per) = DEFAULT_COST[CLOSE], DEFAULT_COST[PUBLISH]
    defaults = close_fixed + pub_fixed + 10 * (close_per + pub_per)
    assert wrap_up_seconds(tmp_path, 10) == pytest.approx(defaults)  # nothing measured here
    assert wrap_up_seconds(tmp_path, 0) == 0.0  # no config with results: no report to write
    remember_wrap_up(tmp_path, PUBLISH, 20, 8.0)  # one size: the default's fixed part, the rest per config
    assert wrap_up_seconds(tmp_path, 10, (PUBLISH,)) == pytest.approx(pub_fixed + 10 * (8.0 - pub_fixed) / 20)
    remember_wrap_up(tmp_path, PUBLISH, 5, 3.5)  # two sizes: the line through them, 2 s + 0.3 s a config
    remember_wrap_up(tmp_path, PUBLISH, 0, 50.0)  # no config: nothing to learn from
    remember_wrap_up(tmp_path, PUBLISH, 10, float("nan"))
    assert wrap_up_seconds(tmp_path, 10, (PUBLISH,)) == pytest.approx(2.0 + 10 * 0.3)
    assert wrap_up_of(tmp_path, 3, (PUBLISH,)).seconds(0) == pytest.approx(2.0 + 3 * 0.3)  # 3 reused: from the start
    # more configs in less time (noise) is priced flat, never as a saving per config
    remember_wrap_up(tmp_path, CLOSE, 4, 2.0)
    remember_wrap_up(tmp_path, CLOSE, 40, 1.0)
    assert wrap_up_seconds(tmp_path, 100, (CLOSE,)) == pytest.approx(1.5)
    # a line below 0 at no config is drawn through the origin: (10, 1 s) and (20, 4 s) -> 5 s / 30 configs
    for configs, seconds in [(10, 1.0)] * (KEPT - 1) + [(20, 4.0)] * (KEPT - 1):  # only the last KEPT count
        remember_wrap_up(tmp_path, CLOSE, configs, seconds)
    history = json.loads(wrap_up_path(tmp_path).read_text())[CLOSE]["history"]
    assert history == [[10, 1.0]] + [[20, 4.0]] * (KEPT - 1)
    through_origin = (1.0 + 4.0 * (KEPT - 1)) / (10 + 20 * (KEPT - 1))
    assert wrap_up_seconds(tmp_path, 30, (CLOSE,)) == pytest.approx(30 * through_origin)
    # a part recorded wrong is priced at its default, the other as measured (a file from before the history: its
    # last measurement); a damaged file at the defaults, and written anew
    wrap_up_path(tmp_path).write_text('{"close": {"configs": 0, "seconds": 1}, "publish": {"configs": 5, '
                                      '"seconds": "NaN"}}')
    assert wrap_up_seconds(tmp_path, 10) == pytest.approx(defaults)
    wrap_up_path(tmp_path).write_text('{"close": {"configs": 4, "seconds": 2}, "publish": [1]}')
    assert wrap_up_seconds(tmp_path, 10) == pytest.approx(close_fixed + 10 * (2 - close_fixed) / 4
                                                          + pub_fixed + 10 * pub_per)
    wrap_up_path(tmp_path).write_bytes(b"\x00{not json")
    assert wrap_up_seconds(tmp_path, 10) == pytest.approx(defaults)
    remember_wrap_up(tmp_path, CLOSE, 10, 3.0)
    assert wrap_up_seconds(tmp_path, 10, (CLOSE,)) == pytest.approx(3.0)


def test_the_budget_keeps_the_wrap_ups_seconds_from_every_stage(ragbench_log):
    """A config that fits the budget alone does not start when the seconds kept for closing the sweep and its
    report would then pass it; the refusal says how much was kept."""
    from ragbench.sweep.budget import OverBudget, StageClock
    from ragbench.sweep.wrap_up import WrapUp

    def clock(kept: float) -> StageClock:
        c = StageClock(5.0, WorkCounts(run=1), Rates(seconds_per_config=1.0, seconds_per_query=0.0), [])
        c.wrap_up = WrapUp(per_config=kept)
        return c

    config = next(c for c in load_config(ROOT / "configs" / "demo.yaml").expand() if c.embedder is None)
    clock(3.5).evaluate(lambda *a: None)(0, config, None)  # ~0 s spent + ~1 s + 3.5 s kept: within 5 s
    assert not ragbench_log
    with pytest.raises(OverBudget, match="config "):
        clock(4.5).evaluate(lambda *a: None)(0, config, None)
    assert ragbench_log[-1].endswith("would pass the budget of 5 s, ~4 s of it kept for the wrap-up (closing, "
                                     "report)"), ragbench_log


def test_the_wrap_up_kept_grows_with_the_configs_started_not_with_the_grid(ragbench_log):
    """The seconds kept for the wrap-up are those of the configs that will have results: 1.2 s a config on a
    5-second budget, a grid of 10 configs runs four (1 s, then ~0 s each as measured, + 1.2 s per config started)
    and refuses the fifth; priced for the whole grid (12 s), none would start. Configs reused count from the start."""
    from ragbench.sweep.budget import OverBudget, StageClock
    from ragbench.sweep.wrap_up import WrapUp

    config = next(c for c in load_config(ROOT / "configs" / "demo.yaml").expand() if c.embedder is None)
    clock = StageClock(5.0, WorkCounts(run=10), Rates(seconds_per_config=1.0, seconds_per_query=0.0), [])
    clock.wrap_up = WrapUp(per_config=1.2)
    for _ in range(4):
        clock.evaluate(lambda *a: None)(0, config, None)
    with pytest.raises(OverBudget):
        clock.evaluate(lambda *a: None)(0, config, None)
    assert ragbench_log[-1].endswith("of it kept for the wrap-up (closing, report)") and "~6 s" in ragbench_log[-1]
    resumed = StageClock(5.0, WorkCounts(run=10), Rates(seconds_per_config=1.0, seconds_per_query=0.0), [])
    resumed.wrap_up = WrapUp(per_config=1.2, stored=3)  # 3 reused: 1 s + 4 x 1.2 s is past 5 s
    with pytest.raises(OverBudget):
        resumed.evaluate(lambda *a: None)(0, config, None)


def test_a_sweep_command_counts_its_budget_from_the_process_start_only_in_a_process_started_for_it(monkeypatch):
    """``ragbench sweep`` started as a command: from the process's start (imports and Prefect's start are waited
    for too); called again in that process, or in one started for something else (tests, notebooks): from now."""
    import time

    from ragbench.cli import announce

    monkeypatch.setattr(announce, "_sweeps_begun", [0])
    monkeypatch.setattr(announce, "_PROCESS_STARTED", time.time() - 60)
    monkeypatch.setattr(announce, "ANNOUNCED", True)
    assert announce.sweep_started() == announce._PROCESS_STARTED
    assert time.time() - announce.sweep_started() < 1  # a second sweep in the same process
    monkeypatch.setattr(announce, "_sweeps_begun", [0])
    monkeypatch.setattr(announce, "ANNOUNCED", False)
    assert time.time() - announce.sweep_started() < 1
