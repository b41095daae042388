"""How many calls fill a round is found from trial timings judged by the fastest, so one stalled
trial (a busy host while engines load beside it) does not leave an engine at a call a round; an
engine slower than a round costs two calls to find out."""

import time

from enginewright.backends.base import Runner
from enginewright.measure.timing import calls_per_round


class Engine(Runner):
    def __init__(self, call_seconds: float, stalls: int = 0):
        self.call_seconds, self.stalls, self.calls = call_seconds, stalls, 0

    def run(self, inputs):
        return {}

    def timed_calls(self, objective, inputs, count):
        started = time.perf_counter()
        if self.stalls:  # the host took the CPU away during this trial
            self.stalls -= 1
            time.sleep(0.3)
        for _ in range(count):
            self.calls += 1
            until = time.perf_counter() + self.call_seconds
            while time.perf_counter() < until:
                pass
        return (time.perf_counter() - started) * 1000.0


def test_a_stalled_first_trial_does_not_leave_the_engine_at_one_call_a_round():
    calls = calls_per_round(Engine(0.001, stalls=1), {}, "gpuTime", 0.1)
    assert 50 <= calls <= 130  # ~100 calls of 1 ms fill 0.1 s; the stalled trial alone said 1


def test_an_engine_slower_than_a_round_costs_two_calls():
    engine = Engine(0.06)
    assert calls_per_round(engine, {}, "gpuTime", 0.05) == 1
    assert engine.calls == 2
