"""Progress in logs: when output is not a terminal (pytest captures stderr), a stage that runs longer than the
interval logs ``progress: stage: done/total (percent), rate/s, ETA`` every interval, through the ragbench log, and
a shorter stage logs nothing; the serving latency of a query is the median of its repeated timings."""

from __future__ import annotations

import logging
import re
import time

import pytest

from ragbench.core import progress as prog
from ragbench.evaluation.cost import LATENCY_BASELINE, median_ms, query_ms


class _Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def lines():
    handler = _Lines()
    prog.log.addHandler(handler)
    before = (prog._bars, prog.interval)
    prog.configure(bars=True, every=0.2)
    yield handler.lines
    prog.log.removeHandler(handler)
    prog._bars, prog.interval = before


LINE = re.compile(r"progress: embed x: (\d+)/20 \((\d+) %\), ([\d.e+]+)/s, ETA (\S+ s|\?|.+), (\d+) s elapsed")


def test_a_long_stage_logs_done_total_rate_and_eta_every_interval(lines):
    assert not prog.progress_enabled()  # not a terminal: no bar
    with prog.progress("embed x", 20) as advance:
        for _ in range(10):
            time.sleep(0.1)
            advance(2)
    got = [m for line in lines if (m := LINE.fullmatch(line))]
    assert len(got) >= 3, lines  # about 1 s at 0.2 s per line
    done = [int(m.group(1)) for m in got]
    assert done == sorted(done) and 0 < done[-1] <= 20
    for m in got:
        assert int(m.group(2)) == round(100 * int(m.group(1)) / 20)


def test_a_short_stage_logs_nothing_and_progress_off_logs_nothing(lines):
    with prog.progress("quick", 5) as advance:
        advance(5)
    assert not [line for line in lines if line.startswith("progress:")]
    prog.configure(bars=False, every=0.05)
    with prog.progress("silent", 5) as advance:
        time.sleep(0.3)
        advance(5)
    assert not [line for line in lines if line.startswith("progress:")]


def test_the_line_says_rate_and_time_left():
    assert prog.progress_line("embed m [document]", 250, 1000, 100.0) == (
        "progress: embed m [document]: 250/1000 (25 %), 2.5/s, ETA 5 min 00 s, 1 min 40 s elapsed")
    assert prog.progress_line("s", 0, 10, 31.0).endswith("0/10 (0 %), 0/s, ETA ?, 31 s elapsed")
    # the caller's ETA when it gives one (a sweep's plan): not the items left at the mean rate; ? while unknown
    assert prog.progress_line("sweep d: configs", 4, 20, 30.0, eta=lambda: 21.4) == (
        "progress: sweep d: configs: 4/20 (20 %), 0.133/s, ETA 21 s, 30 s elapsed")
    assert ", ETA ?, " in prog.progress_line("sweep d: configs", 4, 20, 30.0, eta=lambda: None)


def test_a_stage_with_an_eta_logs_the_callers_seconds_left(lines):
    left = iter(range(50, 0, -1))  # the caller's seconds left, asked once per line
    with prog.progress("embed x", 20, eta=lambda: float(next(left))) as advance:
        for _ in range(6):
            time.sleep(0.1)
            advance(1)
    etas = [m.group(4) for line in lines if (m := LINE.fullmatch(line))]
    assert len(etas) >= 2 and etas == [f"{50 - i} s" for i in range(len(etas))], lines


def test_latency_is_the_median_of_repeated_timings_not_a_pause():
    calls = []

    def call():  # the first call stalls (another process, a collection): one outlier of three
        time.sleep(0.6 if not calls else 0.001)
        calls.append(1)

    ms = median_ms(call, 3)
    assert len(calls) == 3 and ms < 100, ms
    assert median_ms(lambda: time.sleep(0.02), 1) >= 20


def test_a_sampled_query_is_timed_once_when_steady_and_again_when_its_call_paused():
    calls = []

    def steady():
        time.sleep(0.005)
        calls.append(1)

    typical: list[float] = []
    for _ in range(LATENCY_BASELINE):  # the config's first queries: three timings each, their median
        query_ms(steady, typical, 3)
    assert len(calls) == 3 * LATENCY_BASELINE and len(typical) == LATENCY_BASELINE
    calls.clear()
    assert query_ms(steady, typical, 3) >= 5 and len(calls) == 1  # like the others: one retrieval

    def paused_once():  # the machine pauses during this query's first call only
        time.sleep(0.3 if not calls else 0.005)
        calls.append(1)

    calls.clear()
    ms = query_ms(paused_once, typical, 3)
    assert len(calls) == 3 and ms < 100, ms  # timed again: the pause is not its latency
    assert len(typical) == LATENCY_BASELINE + 2
