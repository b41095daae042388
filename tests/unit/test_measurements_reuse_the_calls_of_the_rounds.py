"""`measurements` (latency, throughput, device time and host CPU per call, after a route's rounds)
reuse the calls per round the serving process's rounds already found instead of calibrating each
objective again, and size the host CPU's trials to the call time: on a 20 ms engine the
calibrations and the host CPU's 32 calls cost more than all the rounds they were for."""

import time

import pytest

from enginewright.backends.base import Runner
from enginewright.measure.timing import RETIMES, measure_all

MOST_ROUNDS = 3 * (2 + RETIMES)
"""Timed rounds `measure_all` may take: per objective its first round, one re-sized from it and
`RETIMES` more while a stalled host keeps a round far from a round's length (load, not the code)."""


class Engine(Runner):
    """An engine whose every call keeps the CPU busy for `call_seconds`; it counts its calls."""

    def __init__(self, call_seconds: float):
        self.call_seconds, self.calls, self.stretches = call_seconds, 0, []

    def run(self, inputs):
        self.calls += 1
        until = time.perf_counter() + self.call_seconds
        while time.perf_counter() < until:
            pass
        return {}

    def timed_calls(self, objective, inputs, count):
        self.stretches.append(count)
        return super().timed_calls(objective, inputs, count)


def test_known_calls_time_one_round_per_objective_without_calibrating():
    engine = Engine(0.002)
    measured = measure_all(engine, {}, 0.05, calls=25)
    # a round each of latency, throughput, gpuTime, with the calls given (a host that stalled one
    # into a round and a half re-sizes it from that round), after untimed calls a tenth of them at a
    # time, and no trial timings of one call
    rounds = [count for count in engine.stretches if count > 2]
    assert rounds[0] == 25 and len(rounds) <= MOST_ROUNDS and set(engine.stretches) - set(rounds) == {2}
    assert 1 not in engine.stretches
    assert engine.calls == sum(engine.stretches) + 4 * 8  # and the host CPU's default 4 calls x 8 trials
    assert 1.5 < measured.latency_ms < 20 and 1.5 < measured.gpu_time_ms < 20


def test_without_known_calls_each_objective_is_calibrated_as_before():
    engine = Engine(0.002)
    measure_all(engine, {}, 0.05)
    assert engine.stretches[0] == 1 and len(engine.stretches) > 3  # trial timings before each round


def test_calls_that_no_longer_fill_a_round_are_found_again_from_that_round():
    engine = Engine(0.002)
    measure_all(engine, {}, 0.05, calls=2)  # 4 ms of calls: far under a round of 50 ms
    # each objective's short round (too few calls to warm up), then a round of the calls it says fill one
    assert (
        engine.stretches[0] == 2
        and engine.stretches[1] > 5
        and len(engine.stretches) <= MOST_ROUNDS
        and 1 not in engine.stretches
    )


def test_a_slow_engines_host_cpu_costs_a_few_calls_not_32():
    engine = Engine(0.02)
    measure_all(engine, {}, 0.05, calls=2)
    assert engine.calls - sum(engine.stretches) == 5  # host CPU: 5 trials of 1 call, not 4 x 8


@pytest.mark.parametrize(
    "call_seconds, expected",
    [(0.0002, (4, 8)), (0.002, (4, 8)), (0.005, (2, 8)), (0.02, (1, 5)), (0.2, (1, 3))],
)
def test_host_cpu_trials_keep_the_defaults_while_they_fit_in_two_rounds(call_seconds, expected):
    from enginewright.measure.timing import host_cpu_trials

    assert host_cpu_trials(0.05, call_seconds) == expected
