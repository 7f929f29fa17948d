"""Repeated held-out splits and the questions-needed rows on hand-made per-query values: both forms of
dataset.holdout, seeded splits (repeat 0 is the sweep's split), the winners and held-out scores recomputed apart,
the signed winner's-curse sentence."""

from __future__ import annotations

import math
import statistics

import numpy as np
import polars as pl
import pytest
from conftest import DEMO, write_config

from ragbench.config import load_config
from ragbench.core.errors import ConfigError
from ragbench.core.schemas import QRELS_SCHEMA, QUERY_SCHEMA
from ragbench.data import holdout_split
from ragbench.data.holdout import HoldoutOptions, spec_holdout, spec_repeats, stratified_heldout
from ragbench.evaluation.comparison import compare_configs
from ragbench.reporting.decision import decision_lines, questions_needed_rows
from ragbench.reporting.heldout import WinnerHeldOut, holdout_repeats
from ragbench.sweep.plan import EvaluationSpec

CONFIG = f"""name: h
dataset:
  path: {DEMO}
  holdout: {{holdout}}
chunkers: [{{{{kind: whole}}}}]
retrievers: [{{{{kind: bm25}}}}]
"""


def test_the_mapping_form_with_repeats_keeps_the_evaluation_key_and_one_repeat_is_the_float(tmp_path):
    plain = load_config(write_config(tmp_path / "a.yaml", CONFIG.format(holdout="0.3")))
    one = load_config(write_config(tmp_path / "b.yaml", CONFIG.format(holdout="{fraction: 0.3, repeats: 1}")))
    many = load_config(write_config(tmp_path / "c.yaml", CONFIG.format(holdout="{fraction: 0.3, repeats: 20}")))
    assert plain.dataset.holdout == one.dataset.holdout == 0.3 and plain.canonical() == one.canonical()
    assert many.dataset.holdout == HoldoutOptions(fraction=0.3, repeats=20)
    assert many.canonical()["dataset"]["holdout"] == {"fraction": 0.3, "repeats": 20}
    assert many.dataset.holdout_fraction == plain.dataset.holdout_fraction == 0.3
    # the repeats are drawn by the report: what each config is evaluated on (its evaluation key) does not change
    assert EvaluationSpec.of(many).canonical() == EvaluationSpec.of(plain).canonical()
    assert spec_holdout(many.canonical()) == spec_holdout(plain.canonical()) == (0.3, 0)
    assert (spec_repeats(many.canonical()), spec_repeats(plain.canonical()), spec_repeats({})) == (20, 1, 1)
    with pytest.raises(ConfigError, match=r"d.yaml:4: dataset.holdout.*less than 1"):
        load_config(write_config(tmp_path / "d.yaml", CONFIG.format(holdout="{fraction: 1.5, repeats: 20}")))
    with pytest.raises(ConfigError, match=r"e.yaml:4: dataset.holdout.*strictly between 0 and 1, got 1.5"):
        load_config(write_config(tmp_path / "e.yaml", CONFIG.format(holdout="1.5")))


def _labelled(classes: dict[str, int]) -> list[tuple[str, str]]:
    return [(f"{c}{i:02d}", c) for c, n in classes.items() for i in range(n)]


def test_repeated_splits_are_seeded_stratified_and_repeat_0_is_the_sweeps_split():
    pairs = _labelled({"a": 20, "b": 10, "c": 10})
    queries = pl.DataFrame([(q, q, c, []) for q, c in pairs], schema=QUERY_SCHEMA, orient="row")
    qrels = pl.DataFrame([(q, "d1", 1) for q, _ in pairs], schema=QRELS_SCHEMA, orient="row")
    assert stratified_heldout(pairs, 0.3, seed=4) == holdout_split(queries, qrels, 0.3, seed=4).heldout
    splits = [stratified_heldout(pairs, 0.3, seed=4, repeat=r) for r in range(20)]
    assert len(set(splits)) == 20  # twenty different splits
    assert splits == [stratified_heldout(list(reversed(pairs)), 0.3, seed=4, repeat=r) for r in range(20)]
    for s in splits:  # each the same size per class: 6 + 3 + 3
        assert [sum(q.startswith(c) for q in s) for c in "abc"] == [6, 3, 3]
    assert stratified_heldout(pairs, 0.3, seed=5, repeat=3) != splits[3]


def _values(seed: int = 0) -> pl.DataFrame:
    """Three configs on 40 questions in two classes: A and B close (the pick between them depends on the split),
    C clearly worse; tuning queries stored as ndcg_at_10, the sweep's held-out ones (repeat 0) as
    heldout_ndcg_at_10, as a sweep stores them; q39 unscored (NaN) everywhere, as an unlabelled question."""
    rng = np.random.default_rng(seed)
    pairs = _labelled({"x": 26, "y": 14})
    held = stratified_heldout([p for p in pairs if p[0] != "y13"], 0.3, seed=0)
    base = rng.uniform(0.2, 0.9, len(pairs))
    rows = []
    for cid, shift in (("A", 0.0), ("B", 0.0), ("C", -0.3)):
        noise = rng.normal(0, 0.15, len(pairs))
        for (q, c), v in zip(pairs, np.clip(base + shift + noise, 0, 1)):
            measure = "heldout_ndcg_at_10" if q in held else "ndcg_at_10"
            rows.append((cid, q, c, measure, math.nan if q == "y13" else float(v)))
    return pl.DataFrame(rows, schema={"config_id": pl.String, "query_id": pl.String, "query_class": pl.String,
                                      "measure": pl.String, "value": pl.Float64}, orient="row")


SPEC = {"dataset": {"holdout": {"fraction": 0.3, "repeats": 20}, "seed": 0}}


def test_each_repeats_winner_and_held_out_score_match_a_recomputation_and_are_deterministic():
    pq = _values()
    comp = compare_configs(pq, "ndcg_at_10", n_resamples=200)
    rep = holdout_repeats(pq, comp, SPEC, {"A": "config A"})
    assert rep is not None and rep.repeats == 20 and (rep.n_questions, rep.n_heldout) == (39, 12)
    assert rep == holdout_repeats(pq, comp, SPEC, {"A": "config A"})  # deterministic per seed
    assert holdout_repeats(pq, comp, {"dataset": {**SPEC["dataset"], "seed": 1}}, {}).winners != rep.winners
    # recomputed apart: every value of a query in one column, the split of each repeat, the means by polars
    long = pq.with_columns(pl.col("measure").str.replace("^heldout_", "")).drop_nans("value")
    pairs = sorted(set(long.select("query_id", "query_class").iter_rows()))
    for r in range(20):
        held = stratified_heldout(pairs, 0.3, 0, r)
        means = (long.with_columns(pl.col("query_id").is_in(sorted(held)).alias("held"))
                 .group_by("config_id", "held").agg(pl.col("value").mean()))
        tune = means.filter(~pl.col("held")).sort(["value", "config_id"], descending=[True, False])
        winner = tune["config_id"][0]
        assert rep.winners[r] == winner and rep.winner_tuning[r] == pytest.approx(tune["value"][0])
        assert rep.winner_heldout[r] == pytest.approx(
            means.filter(pl.col("held") & (pl.col("config_id") == winner))["value"][0])
    assert rep.winners[0] == comp.best  # repeat 0 is the split the values were stored with
    assert 0 < rep.winners.count("A") < 20 and "C" not in rep.winners  # the close pair trades wins, C never
    wins = {c.config_id: c.wins for c in rep.configs}
    assert wins == {c: rep.winners.count(c) for c in "ABC"} and rep.configs[0].wins == max(wins.values())
    mean, low, high = rep.winner_heldout_interval()
    q = statistics.quantiles(rep.winner_heldout, n=40, method="inclusive")  # 2.5 % steps, linear interpolation
    assert (mean, low, high) == (pytest.approx(statistics.fmean(rep.winner_heldout)), pytest.approx(q[0]),
                                 pytest.approx(q[-1]))
    text = " ".join(decision_lines((), rep))
    assert "over 20 seeded splits of the 39 questions (12 held out each, seed 0)" in text
    assert f"config A {wins['A']} of 20" in text and f"{mean:.3f} [{low:.3f}, {high:.3f}]" in text
    d = rep.as_dict()
    assert d["repeats"] == 20 and len(d["per_repeat"]) == 20 and d["winner_heldout"]["low"] == low


def test_no_repeats_without_the_mapping_form():
    pq = _values()
    comp = compare_configs(pq, "ndcg_at_10", n_resamples=200)
    assert holdout_repeats(pq, comp, {"dataset": {"holdout": 0.3}}, {}) is None
    assert holdout_repeats(pq, comp, {"dataset": {}}, {}) is None


def test_questions_needed_rows_take_the_paired_differences_and_holms_first_step():
    pq = _values()
    comp = compare_configs(pq, "ndcg_at_10", n_resamples=200)
    rows = questions_needed_rows(pq, comp, {}, {})
    assert rows and {r.config_id for r in rows} == set(comp.tied_with_best) - {comp.best}
    for r in rows:
        wide = pq.filter(pl.col("measure") == "ndcg_at_10").pivot(on="config_id", index="query_id",
                                                                  values="value").drop_nans()
        d = (wide[comp.best] - wide[r.config_id]).to_numpy()
        assert (r.mean_diff, r.sd_diff, r.n_now) == (pytest.approx(d.mean()), pytest.approx(d.std(ddof=1)),
                                                     d.size)
        assert r.alpha_per_test == comp.alpha / comp.n_comparisons == 0.025 and r.n_needed > r.n_now
        # the verdict is on the tuning questions; 12 of the 39 scored are held out, so more are labelled in all
        total = math.ceil(r.n_needed * 39 / 27)
        assert r.heldout_share == pytest.approx(12 / 39) and r.n_needed_labelled == total
        assert (f"To tell the winner from {r.config_id} (Δ {r.mean_diff:.3f}, sd {r.sd_diff:.3f}) at α 0.05 "
                f"(0.025 per test, Holm's first step of 2) with 80 % power you need about {r.n_needed:,} tuning "
                f"questions (about {total:,} labelled in all, 31 % held out); you have {r.n_now}.") == r.sentence()
        assert r.as_dict()["n_needed_labelled"] == total
    tuning_only = pq.filter(pl.col("measure") == "ndcg_at_10")  # no held-out set: questions are tuning questions
    (plain,) = questions_needed_rows(tuning_only, compare_configs(tuning_only, "ndcg_at_10", n_resamples=200), {}, {})
    assert plain.heldout_share == 0 and plain.n_needed_labelled == plain.n_needed
    assert f"you need about {plain.n_needed:,} questions; you have {plain.n_now}." in plain.sentence()
    same = pq.filter(pl.col("config_id") == "A").with_columns(pl.lit("A2").alias("config_id"))
    both = pl.concat([pq.filter(pl.col("config_id") == "A"), same])
    equal = questions_needed_rows(both, compare_configs(both, "ndcg_at_10", n_resamples=200), {}, {"A2": "twin"})
    assert [r.sentence() for r in equal] == ["To tell the winner from twin: no number of questions: the means are "
                                             "equal."]
    assert equal[0].as_dict()["n_needed"] is None


def test_the_winners_curse_sentence_states_the_drop_with_its_sign():
    drop = WinnerHeldOut("c", "cfg", "ndcg_at_10", 0.70, 0.62, 4, 22, 10).sentence()
    assert "drop (tuning − held-out) +0.080" in drop and "Winner's curse: the best of 4 configs on 22 tuning" in drop
    assert "0.080 lower" in drop
    rise = WinnerHeldOut("c", "cfg", "ndcg_at_10", 0.66, 0.81, 4, 22, 10).sentence()
    assert "drop (tuning − held-out) -0.150" in rise and "Winner's curse:" not in rise
    assert "The held-out score is 0.150 above the tuning score: no winner's curse shows" in rise


def test_a_number_beyond_the_search_says_more_than():
    from ragbench.evaluation.power import MAX_N
    from ragbench.reporting.decision import QuestionsNeeded

    q = QuestionsNeeded("b", "b", "config B", 1e-5, 0.3, 40, MAX_N, 0.05, 0.05, 1, 0.8)
    assert f"you need more than {MAX_N:,} questions; you have 40." in q.sentence()
