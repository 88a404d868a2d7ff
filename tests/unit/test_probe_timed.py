"""The probe's timed stage (``_probe._timed``, chapter 07's speed challenge): how many runs it
records and when it stops early. The grader judges the best run against the best calibration
(``_judge``); these tests pin what the kernel hands it: every run's output, CPU seconds and
the calibration timed just before it, at most ``runs`` (capped at 6) runs, no more once the
best run is within ``enough`` calibrations, and none after a run that did not return.
"""

from __future__ import annotations

import functools
import time

import pytest

from autograder.checks import _codec, _probe

# The stage's logic does not depend on the calibration's size: a fifth of it (~20 ms instead of
# ~100) keeps the slow-function test's 27 calibrations and 6 spins of 3 calibrations from
# costing seconds of CPU. The full workload runs once, in test_the_calibration_is_fixed.
CALIBRATION = _probe.calibration
SMALL = 100_000  # still every key: 65,511 = lcm(251, 261) distinct ones


@pytest.fixture(autouse=True)
def _small_calibration(monkeypatch):
    monkeypatch.setattr(_probe, "calibration", functools.partial(CALIBRATION, SMALL))


def _spec(runs: int, enough=None) -> dict:
    spec = {"args": _codec.encode((3,)), "runs": runs}
    if enough is not None:
        spec["enough"] = enough
    return spec


def _counting(seconds: float = 0.0):
    calls = []

    def fn(n):
        calls.append(n)
        t0 = time.process_time()
        while time.process_time() - t0 < seconds:  # CPU, not sleep: process_time counts it
            pass
        return n * 2

    return fn, calls


def test_a_fast_function_stops_after_its_first_run():
    fn, calls = _counting()
    runs = _probe._timed(fn, _spec(5, enough=1.0))  # a no-op is far under one calibration
    assert len(runs) == len(calls) == 1
    (run,) = runs
    assert run["status"] == "ok" and _codec.decode(run["out"]) == 6
    assert 0 <= run["cpu_s"] < run["cal_s"]


def test_without_enough_every_run_is_made():
    fn, calls = _counting()
    runs = _probe._timed(fn, _spec(4))
    assert len(runs) == len(calls) == 4
    assert all(r["status"] == "ok" and r["cal_s"] > 0 for r in runs)


def test_a_slow_function_runs_every_time_and_runs_are_capped_at_six():
    cal = min(_cal_seconds() for _ in range(3))
    fn, calls = _counting(seconds=3 * cal)  # never within 1 calibration
    runs = _probe._timed(fn, _spec(9, enough=1.0))
    assert len(runs) == len(calls) == 6
    assert all(r["cpu_s"] >= 3 * cal * 0.99 for r in runs)


def test_an_integer_enough_is_not_a_stop():
    # ``_judge`` sends ``float(timed.enough())``; anything else (a student's record cannot
    # set it, but a changed check could) never stops the runs early
    fn, calls = _counting()
    assert len(_probe._timed(fn, _spec(3, enough=1))) == len(calls) == 3


def test_a_run_that_raises_is_the_last():
    def fn(n):
        raise ValueError("not yet")

    runs = _probe._timed(fn, _spec(5))  # no early stop: only the failed run ends them
    assert [r["status"] for r in runs] == ["raised"]


def test_the_calibration_is_fixed():
    assert CALIBRATION() == CALIBRATION(SMALL) == 65_511


def _cal_seconds() -> float:
    t0 = time.process_time()
    _probe.calibration()
    return time.process_time() - t0
