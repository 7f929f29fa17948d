"""One mean per config, whatever order its per-query rows come back in.

Two configs with the same per-query values, written in two different row orders, on two nights of one sweep name
(each night writing them in the other order, as a rerun that copies reused rows does). A plain sum of those values
differs in its last bits with the order, so a mean taken by DuckDB's ``avg`` or a polars group differed between the
leaderboard, the "since the previous sweep" section, the recall curves and the stored summary, and the exact tie
between the two configs was broken by that rounding noise instead of by the documented rule (the smallest config
id). Every mean here must be the exact mean of the values rounded once to the nearest double (computed here with
fractions), so the same bits on every surface and both nights, and the tie must go to the smaller id.

The store is a real DuckDB file filled with hand-made values (no sweep, no model).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import polars as pl
import pytest

from ragbench.reporting.model import build_report
from ragbench.results.lookup import ranked_config_ids
from ragbench.results.outcomes import ConfigResult
from ragbench.results.store import ResultStore

N = 1000
LOW, HIGH = "a" * 16, "b" * 16  # ids: on an exact tie the rule picks LOW
SPEC = {"metrics": {"primary": "ndcg@10"}}
PRIMARY = "ndcg_at_10"


def _values() -> list[float]:
    """nDCG-like values (1 / log2(r + 1)) whose plain sum depends on the order it is taken in, and whose rounded
    sum divided by ``n`` is not the exact mean rounded (the fixture can tell the rule from both shortcuts; seed 5
    also makes numpy's pairwise mean and polars' group mean miss the exact one, as a first try showed)."""
    rng = random.Random(5)
    values = [1 / math.log2(rng.randint(1, 10) + 1) for _ in range(N)]
    assert sum(values) != sum(reversed(values))
    assert math.fsum(values) / N != float(_exact_mean(values))
    return values


def _measures(values: list[float], order: list[int]) -> pl.DataFrame:
    rows = [(f"q{i:02d}", "x" if i % 2 else "y", m, values[i]) for i in order
            for m in (PRIMARY, "recall_at_10")]
    return pl.DataFrame(rows, schema={"query_id": pl.String, "query_class": pl.String, "measure": pl.String,
                                      "value": pl.Float64}, orient="row")


@pytest.fixture
def store(tmp_path):
    """Nights n-1 and n-2; on each, LOW and HIGH hold the same values, written forwards and backwards."""
    values = _values()
    forwards, backwards = list(range(N)), list(reversed(range(N)))
    s = ResultStore(tmp_path / "home" / "results.duckdb")
    run = pl.DataFrame({"query_id": ["q00"], "rank": [1], "chunk_id": ["c1"], "doc_id": ["d1"], "score": [1.0]})
    for night, orders in (("n-1", (backwards, forwards)), ("n-2", (forwards, backwards))):
        s.begin_sweep(night, "n", "h", SPEC, "synthetic", "fp0")
        for cid, order in zip((LOW, HIGH), orders):
            s.write_config(night, ConfigResult(cid, f"cfg-{cid[0]}", {"chunker": {"kind": "whole"}}, "fp0",
                                               measures=_measures(values, order), rankings=run, n_queries=N,
                                               n_unlabelled=0, ms_per_query=1.0))
        s.finish_sweep(night, "finished")
    return s


def _exact_mean(values: list[float]) -> Fraction:
    return sum(map(Fraction, values), Fraction(0)) / len(values)


def test_every_surface_gives_each_config_the_same_mean_and_the_tie_goes_to_the_smaller_id(store):
    values = _values()
    exact = _exact_mean(values)
    rep = build_report(store, "n-2", n_resamples=200)
    seen: dict[str, float] = {}
    for night in ("n-1", "n-2"):
        means = store.measure_means(night, PRIMARY)
        for cid in (LOW, HIGH):
            seen[f"{night} stored summary {cid[0]}"] = store.config_means(night, cid)[PRIMARY]
            seen[f"{night} measure_means {cid[0]}"] = means[cid]
    board = rep.summary.filter(pl.col("measure") == PRIMARY)
    for cid, mean in board.select("config_id", "mean").iter_rows():
        seen[f"leaderboard {cid[0]}"] = mean
    for cid, k, recall in rep.recall_curves.select("config_id", "k", "recall").iter_rows():
        seen[f"recall curve @{k} {cid[0]}"] = recall  # recall_at_10 holds the same values
    since = rep.since_previous
    assert since is not None and since.previous_id == "n-1"
    seen["since: winner then"], seen["since: winner now"] = since.winner_then.mean, since.winner_now.mean
    for c in since.changes:
        seen[f"since: {c.config.config_id[0]} then"], seen[f"since: {c.config.config_id[0]} now"] = \
            c.change.mean_b, c.change.mean_a
    assert len(seen) >= 16
    for where, mean in seen.items():
        assert mean == float(exact), (where, mean, float(exact))

    for cls in ("x", "y"):  # the per-class means of both configs
        want = float(_exact_mean([v for i, v in enumerate(values) if ("x" if i % 2 else "y") == cls]))
        assert rep.per_class.filter(pl.col("query_class") == cls)["mean"].to_list() == [want, want], cls

    comp = rep.comparisons[PRIMARY]
    assert comp.best == LOW and HIGH in comp.tied_with_best
    assert since.winner_then.config_id == LOW and since.winner_now.config_id == LOW and since.same_winner
    assert since.winner_now.mean - since.winner_then.mean == 0.0


def test_an_old_file_gets_its_stored_means_recomputed_exactly_once(store):
    """A file written before exact means held order-dependent sums (here: the values summed in their stored order,
    divided by n). Opening it again recomputes each stored mean from its per-query rows, so the leaderboard's order
    obeys the tie rule; a stored mean further off than rounding is left alone; the migration runs once per file."""
    import duckdb

    values, path = _values(), store.path
    exact = float(_exact_mean(values))
    naive_low, naive_high = sorted((sum(values) / N, sum(reversed(values)) / N))
    assert naive_low < naive_high and exact not in (naive_low, naive_high)  # HIGH was ranked above its equal
    con = duckdb.connect(str(path))
    for cid, naive in ((LOW, naive_low), (HIGH, naive_high)):
        con.execute("UPDATE config_metrics SET mean = ? WHERE sweep_id = 'n-1' AND config_id = ? AND measure = ?",
                    [naive, cid, PRIMARY])
    con.execute("UPDATE config_metrics SET mean = 0.25 WHERE sweep_id = 'n-1' AND measure = 'recall_at_10'")
    con.execute("DELETE FROM migrations")  # as a file from before the migration has none
    stored_order = con.execute("SELECT config_id FROM config_metrics WHERE sweep_id = 'n-1' AND measure = ? "
                               "ORDER BY mean DESC, config_id", [PRIMARY]).fetchall()
    con.close()
    assert stored_order == [(HIGH,), (LOW,)]  # as stored, HIGH led its equal

    reopened = ResultStore(path)  # opening the file migrates it
    assert ranked_config_ids(reopened, "n-1") == [LOW, HIGH]
    for cid in (LOW, HIGH):
        means = reopened.config_means("n-1", cid)
        assert means[PRIMARY] == exact, cid
        assert means["recall_at_10"] == 0.25  # not a rounding of the exact mean: not this migration's to touch
    assert reopened.query("SELECT name FROM migrations")["name"].to_list() == ["exact_means"]

    con = duckdb.connect(str(path))
    con.execute("UPDATE config_metrics SET mean = ? WHERE sweep_id = 'n-1' AND config_id = ? AND measure = ?",
                [naive_high, HIGH, PRIMARY])
    con.close()
    assert ResultStore(path).config_means("n-1", HIGH)[PRIMARY] == naive_high  # once per file: not again on every open
