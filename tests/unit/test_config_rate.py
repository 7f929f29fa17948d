"""A config's evaluation priced as this home last measured it: one factor scales the default rates so that a config
over the measured sweep's queries costs what was measured, by hand."""

import pytest

from ragbench.sweep.config_rate import config_rate_path, remember_config_rate, with_config_rate
from ragbench.sweep.estimate import Rates, stage_seconds


def test_the_rates_are_scaled_to_what_this_home_measured(tmp_path):
    rates = Rates(seconds_per_config=0.9, seconds_per_query=0.004)
    assert with_config_rate(rates, tmp_path) == rates and with_config_rate(rates, None) == rates  # nothing measured
    remember_config_rate(tmp_path, 10, 5.0, 100)  # 0.5 s a config over 100 queries; the defaults said 1.3 s
    scaled = with_config_rate(rates, tmp_path)
    assert stage_seconds("evaluate", 100, 0, None, scaled) == pytest.approx(0.5)
    assert stage_seconds("evaluate", 200, 0, None, scaled) == pytest.approx((0.9 + 0.8) * 0.5 / 1.3)
    assert scaled.seconds_per_token == rates.seconds_per_token  # encoding keeps its own calibration
    remember_config_rate(tmp_path, 4, 8.0, 100)  # the last sweep wins
    assert stage_seconds("evaluate", 100, 0, None, with_config_rate(rates, tmp_path)) == pytest.approx(2.0)


@pytest.mark.parametrize("configs, seconds, queries", [(0, 5.0, 100), (3, 0.0, 100), (3, float("nan"), 100),
                                                       (3, 5.0, 0)])
def test_nothing_is_kept_from_a_sweep_that_measured_nothing(tmp_path, configs, seconds, queries):
    remember_config_rate(tmp_path, configs, seconds, queries)
    assert not config_rate_path(tmp_path).exists()


@pytest.mark.parametrize("text", ["", "{", "[]", '{"configs": 0, "seconds": 1, "queries": 5}',
                                  '{"configs": 2, "seconds": "x", "queries": 5}'])
def test_a_damaged_measurement_leaves_the_defaults(tmp_path, text):
    path = config_rate_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    rates = Rates()
    assert with_config_rate(rates, tmp_path) == rates


def test_a_sweep_that_answered_its_queries_is_not_measured(tmp_path):
    """Its configs' seconds hold the LLM's answers, which the plan prices apart (per call)."""
    from types import SimpleNamespace

    remember_config_rate(tmp_path, 3, 9.0, 100, SimpleNamespace(enabled=True))
    assert not config_rate_path(tmp_path).exists()
    remember_config_rate(tmp_path, 3, 9.0, 100, SimpleNamespace(enabled=False))  # generation configured, switched off
    assert config_rate_path(tmp_path).exists()
