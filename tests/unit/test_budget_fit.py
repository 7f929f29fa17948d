"""Whether a sweep fits its budget, before the run: the plan's walk of the budgeted order, by hand.

The grid: chunkers whole and fixed 128/32 x models static (cheap) and MiniLM (dear) x BM25, dense and hybrid (10
configs). Prices (seconds): each config 2; indexing 1 per pair; encoding whole x static 1, fixed x static 2,
whole x MiniLM 10, fixed x MiniLM 20; loading static 1 (its queries are new: loaded before any config) and MiniLM 5
(its queries are cached: loaded with its first pair); the static queries' encoding 0.01 (after the BM25 configs,
as the sweep runs them); the wrap-up 0.25 a config with results (2.5 when all 10 have run).
"""

from dataclasses import replace

import pytest
from conftest import ROOT, write_config

from ragbench.config import load_config
from ragbench.sweep.budget_fit import budget_fit
from ragbench.sweep.calibrate import Calibration
from ragbench.sweep.estimate import EmbedWork, IndexWork, Rates, WorkCounts, estimate
from ragbench.sweep.forecast import Forecast
from ragbench.sweep.wrap_up import WrapUp

STATIC, MINILM = "static-retrieval-m2v", "all-MiniLM-L6-v2"
SWEEP = f"""name: fit
dataset: {{name: nimbus-demo, path: {ROOT / 'datasets' / 'demo'}, split: test}}
chunkers: [{{kind: whole}}, {{kind: fixed, size: 128, overlap: 32}}]
embedders: [{{model: {STATIC}}}, {{model: {MINILM}}}]
retrievers: [{{kind: bm25}}, {{kind: dense, exact: true}}, {{kind: hybrid}}]
"""
WRAP_UP = WrapUp(per_config=0.25)


@pytest.fixture
def grid(tmp_path):
    """(the configs, a function picking one by chunker, model and retriever kind, the plan's forecast)."""
    configs = load_config(write_config(tmp_path / "fit.yaml", SWEEP)).expand()
    whole, fixed = configs[0].chunker.label, next(c.chunker.label for c in configs if c.chunker.kind == "fixed")

    def pick(chunker, model, kind):
        [c] = [c for c in configs if c.chunker.label == chunker and c.retriever.kind == kind
               and (c.embedder.label if c.embedder else None) == model]
        return c

    counts = WorkCounts(
        embeds=(EmbedWork(whole, STATIC, 10, 0, 10, 1_000), EmbedWork(fixed, STATIC, 20, 0, 20, 2_000),
                EmbedWork(whole, MINILM, 10, 0, 10, 1_000), EmbedWork(fixed, MINILM, 20, 0, 20, 2_000),
                EmbedWork(None, STATIC, 5, 0, 5, 10), EmbedWork(None, MINILM, 5, 5, 0, 0)),
        indexes=tuple(IndexWork(ch, m, 100) for ch in (whole, fixed) for m in (STATIC, MINILM)),
        run=len(configs))
    cals = {m: Calibration(m, "cpu", rate, 256, 0, 0, 0, "here", load_seconds=load)
            for m, rate, load in ((STATIC, 0.001, 1.0), (MINILM, 0.01, 5.0))}
    rates = Rates(seconds_per_token={m: c.seconds_per_token for m, c in cals.items()},
                  load_seconds={m: c.load_seconds for m, c in cals.items()}, seconds_per_vector_indexed=0.01,
                  seconds_per_config=2.0, seconds_per_query=0.0)
    forecast = Forecast(counts, estimate(counts, rates), cals, wrap_up=WRAP_UP)
    assert forecast.total_seconds == pytest.approx(6 + 0.01 + 33 + 4 + 20)  # loads, queries, embeds, index, configs
    return configs, pick, (whole, fixed), forecast


def test_a_budget_that_holds_everything_fits_and_ends_when_the_plan_does(grid):
    configs, _, _, forecast = grid
    fit = budget_fit(forecast, configs, 8 * 3600)
    assert fit.fits and len(fit.finish) == len(configs) and not fit.over
    assert fit.needed_seconds == pytest.approx(63.01 + 2.5) == pytest.approx(fit.ends_seconds)
    said = "fits, ~66 s of it from the first stage to the wrap-up's end"
    assert fit.lines() == [f"  budget 8.0 h: {said} (<1%)"]
    near = budget_fit(forecast, configs, 80)  # 65.5 s of 80: within 20 %, where which configs start is a toss-up
    assert near.fits and near.tight and not fit.tight and near.json()["tight"] is True
    tight = ("tight: within 20% of the budget, where the plan's estimates can err, so the last configs in the "
             "budget's order may or may not start")
    assert near.lines() == [f"  budget 80 s: {said} (82%); {tight}"]
    assert not budget_fit(forecast, configs, 83).tight and budget_fit(forecast, configs, 56).tight  # 65.5-56 <= 11.2


def test_a_refused_pair_runs_none_of_its_configs_while_cheaper_stages_after_it_still_start(grid):
    configs, pick, (whole, fixed), forecast = grid
    fit = budget_fit(forecast, configs, 31)
    # BM25 x 2 -> 4; the static queries and loading static -> 5.01; whole x static 1 + 1 + 2 -> 9.01;
    # fixed x static 2 + 1 + 2 -> 14.01;
    # whole x MiniLM 5 (load) + 10 + 1 + 2 -> 32.01 + the wrap-up of 5 configs > 31: refused, and fixed x MiniLM too;
    # the static hybrids (2 s each) still start -> 18.01; the MiniLM hybrids need their pair's embedding: over
    assert fit.finish == (pick(whole, None, "bm25"), pick(fixed, None, "bm25"), pick(whole, STATIC, "dense"),
                          pick(fixed, STATIC, "dense"), pick(whole, STATIC, "hybrid"), pick(fixed, STATIC, "hybrid"))
    assert set(fit.over) == {pick(ch, MINILM, kind) for ch in (whole, fixed) for kind in ("dense", "hybrid")}
    assert fit.ends_seconds == pytest.approx(18.01 + 6 * 0.25) and not fit.fits  # the wrap-up of the 6 that run
    said, over = fit.lines()
    assert said.startswith("  budget 31 s: does not fit: ~66 s from the first stage to the wrap-up's end; at these "
                           "rates 6 of 10 configs finish by ~20 s (2 without an embedder, then 2 chunker x model pairs")
    assert over.startswith("  budget: 4 would be over_budget (not run, not failed; the next run continues them): ")
    assert pick(whole, MINILM, "dense").labels.text in over
    js = fit.json()
    assert js["fits"] is False and js["over_budget"] == [c.config_id for c in fit.over]


def test_a_model_is_loaded_once_and_a_pair_after_it_pays_only_its_own_encoding(grid):
    configs, pick, (whole, fixed), forecast = grid
    fit = budget_fit(forecast, configs, 40)
    # as above to 14.01; whole x MiniLM (with the load) -> 32.01 (+ 5 x 0.25 <= 40); fixed x MiniLM 20 + 1 + 2 = 23:
    # no; static hybrids -> 34.01, 36.01 (+ 7 x 0.25 <= 40); whole x MiniLM's hybrid 38.01 + 8 x 0.25 > 40: over
    assert pick(whole, MINILM, "dense") in fit.finish and pick(fixed, MINILM, "dense") in fit.over
    assert pick(whole, MINILM, "hybrid") in fit.over and pick(fixed, STATIC, "hybrid") in fit.finish
    assert fit.ends_seconds == pytest.approx(36.01 + 7 * 0.25)
    late = budget_fit(forecast, configs, 40, spent=10)  # seconds gone count, and the plan says from when
    assert late.ends_seconds < fit.ends_seconds and late.needed_seconds == pytest.approx(fit.needed_seconds + 10)
    assert late.lines()[0].startswith("  budget 40 s: does not fit: ~76 s from the start (10 s spent) to the wrap-up's")
    # the sweep walks it after its calibration loaded MiniLM: no second load (5 s) in the walk or in what it needs
    warm = budget_fit(forecast, configs, 40, loaded=frozenset({MINILM}))
    assert pick(whole, MINILM, "hybrid") in warm.finish and pick(fixed, MINILM, "dense") in warm.over
    assert warm.needed_seconds == pytest.approx(fit.needed_seconds - 5)


def test_a_budget_smaller_than_the_shared_work_starts_nothing_and_says_why(grid):
    configs, _, _, forecast = grid
    # a resumed sweep with 10 configs done, its wrap-up 0.5 s once any config has results and 0.25 s a config: 3 s
    # before any config runs
    resumed = replace(forecast, wrap_up=WrapUp(per_config=0.25, fixed=0.5, stored=10))
    fit = budget_fit(resumed, configs, 4.5)  # a BM25 config's 2 s and the wrap-up of 11 configs (3.25) do not fit
    assert not fit.finish and len(fit.over) == len(configs)
    assert fit.lines()[0].endswith("no config starts: the chunks, the queries' vectors and the wrap-up alone take "
                                   "~4 s")  # the queries' 1.01 s and the done configs' 3 s
    assert budget_fit(resumed, configs, 5.25).finish == (configs[0],)  # the first BM25 config just fits
    fresh = budget_fit(forecast, configs, 4.5)  # none done: both BM25 configs fit (2 + 0.25, then 4 + 2 x 0.25)
    assert len(fresh.finish) == 2 and all(c.embedder is None for c in fresh.finish)
    # the wrap-up's fixed part comes with the first config: 2 + 0.5 + 0.25 fits, 4 + 0.5 + 0.5 does not
    fixed = budget_fit(replace(forecast, wrap_up=WrapUp(per_config=0.25, fixed=0.5)), configs, 4.5)
    assert len(fixed.finish) == 1 and fixed.ends_seconds == pytest.approx(2.75 + 1.01)
