"""`measurements` with the calls the serving process's rounds found (sized for their objective)
warm the engine up with untimed calls before each objective's round, the first one's included (on
the H200 a launch-bound engine read up to 30% slower in a round begun straight after idling), and
size each objective's round from the calls given, not from the objective before: a latency call
adds copies and a sync to a back-to-back call, and a round of throughput's calls lasted 20 rounds."""

import time

from enginewright.backends.base import OBJECTIVES, Runner
from enginewright.measure.timing import measure_all

RETIMES = 2  # timing.RETIMES: a round is re-timed at most twice


def spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


class GpuLikeEngine(Runner):
    """0.1 ms a call back to back (throughput, gpuTime), 2 ms with copies and a sync (latency); it
    records each stretch of calls: objective, calls, wall seconds."""

    def __init__(self):
        self.stretches: list[tuple[str, int, float]] = []

    def run(self, inputs):
        spin(0.002)
        return {}

    def run_prepared(self, prepared):
        spin(0.0001)

    def timed_calls(self, objective, inputs, count):
        started = time.perf_counter()
        try:
            spin(self.extra_seconds(objective, count))
            return super().timed_calls(objective, inputs, count)
        finally:
            self.stretches.append((objective, count, time.perf_counter() - started))

    def extra_seconds(self, objective: str, count: int) -> float:
        return 0.0


ROUND = 0.1
THROUGHPUT_CALLS = 1000  # a round of 0.1 ms calls


def test_the_first_objectives_round_comes_after_untimed_calls():
    engine = GpuLikeEngine()
    measure_all(engine, {}, ROUND, calls=THROUGHPUT_CALLS)
    first = [s for s in engine.stretches if s[0] == OBJECTIVES[0]]
    warm = first[: next(i for i, s in enumerate(first) if s[1] != THROUGHPUT_CALLS // 10)]
    assert warm and warm[0][1] == THROUGHPUT_CALLS // 10  # a tenth of the calls given at a time
    assert sum(s[2] for s in warm) >= 0.4 * ROUND


def test_each_objective_is_sized_from_the_calls_given_and_its_rounds_last_about_a_round():
    engine = GpuLikeEngine()
    started = time.perf_counter()
    measured = measure_all(engine, {}, ROUND, calls=THROUGHPUT_CALLS)
    took = time.perf_counter() - started
    for objective in OBJECTIVES:
        mine = [s for s in engine.stretches if s[0] == objective]
        assert mine[0][1] == THROUGHPUT_CALLS // 10  # from the calls given, not the last objective's
        timed = mine[-1]  # the round the measurement is
        assert 0.5 * ROUND <= timed[2] <= 2 * ROUND, (objective, timed)
        assert len([s for s in mine if s[1] > THROUGHPUT_CALLS // 10]) <= 1 + RETIMES
    assert 1.5 < measured.latency_ms < 4 and measured.throughput_ms < 0.5
    assert took < 1.5  # a round of throughput's 1000 calls of latency was 2 s alone


class SlowerInShortStretches(GpuLikeEngine):
    """Latency calls of 2 ms in stretches of 100 calls or more (the warm-up's), 20 ms in shorter ones:
    the round sized from the warm-up (50 calls) lasts 10 rounds, and so would its re-timing with
    the calls that round says fill one... until that is re-sized again."""

    def extra_seconds(self, objective: str, count: int) -> float:
        return 0.018 * count if objective == "latency" and count < THROUGHPUT_CALLS // 10 else 0.0


def test_a_round_still_far_outside_a_round_after_its_re_size_is_re_sized_again():
    engine = SlowerInShortStretches()
    measure_all(engine, {}, ROUND, calls=THROUGHPUT_CALLS)
    warm_block = THROUGHPUT_CALLS // 10
    latency_rounds = [s for s in engine.stretches if s[0] == "latency" and s[1] != warm_block]
    assert 1 < len(latency_rounds) <= 1 + RETIMES
    assert 0.5 * ROUND <= latency_rounds[-1][2] <= 2 * ROUND, latency_rounds
