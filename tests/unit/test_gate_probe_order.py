"""`ragbench gate` lists the probes that fail (production had a relevant document in the top k, the candidate has
none) before those that only scored lower, each group by the largest drop, and says how many of each."""

from __future__ import annotations

import polars as pl

from ragbench.cli.regression_gate import failing_first


def test_failing_probes_come_first_then_the_largest_drops():
    probes = pl.DataFrame({
        "query_id": ["lower-small", "fails-small", "lower-big", "fails-big", "lower-mid"],
        "production": [0.9, 0.5, 0.9, 1.0, 0.8],
        "candidate": [0.85, 0.4, 0.2, 0.0, 0.5],
        "production_hit": [True, True, True, True, False],
        "candidate_hit": [True, False, True, False, False]})
    out = failing_first(probes)
    assert out["query_id"].to_list() == ["fails-big", "fails-small", "lower-big", "lower-mid", "lower-small"]
    assert out["fails"].to_list() == [True, True, False, False, False]
    assert out.columns == [*probes.columns, "fails"]  # nothing else added
