"""Timing one engine: warm-up, how many calls fill a round, one round, all three measurements, and
the statistics of rounds. How a runner times its own calls (host clock, CUDA events) is the runner's
(`backends.base.Runner.timed_calls`, `cuda_timed_calls`)."""

from __future__ import annotations

import statistics
import time
from typing import Mapping

import numpy as np

from enginewright.api.cache import Measurements, TimingStats
from enginewright.backends.base import OBJECTIVES, Runner

WARMUP_SECONDS = 2.0  # warm-up stops early after this long: a slow engine needs few calls to warm
WARM_SHARE = 0.5  # untimed calls before each round, for this share of `roundSeconds`
RETIMES = 2  # a round timed again at most this often when it lasted under 0.7 or over 1.5 rounds


def warm_up(runner: Runner, inputs: Mapping[str, np.ndarray], objective: str, iterations: int) -> None:
    """Untimed calls (lazy initialisation, caches, clocks), at most ~WARMUP_SECONDS of them."""
    started = time.monotonic()
    for _ in range(iterations):
        runner.timed_calls(objective, inputs, 1)
        if time.monotonic() - started > WARMUP_SECONDS:
            break


def calls_to_fill(round_seconds: float, per_call_seconds: float) -> int:
    """How many calls of `per_call_seconds` fill `round_seconds` (1 to 1,000,000)."""
    return max(1, min(1_000_000, round(round_seconds / max(per_call_seconds, 1e-9))))


def calls_per_round(runner: Runner, inputs: Mapping[str, np.ndarray], objective: str, round_seconds: float) -> int:
    """How many calls fill about `round_seconds` of wall time (one at least), from up to three trial
    timings, each of the calls the fastest so far says fill a round, judged by the fastest: a host
    that stalls one trial (other processes loading engines beside it) does not leave the engine at a
    call a round. Wall time, not the objective's time: gpuTime can be far below the wall time of a
    launch-bound call. An engine slower than a round stops after two trials of one call."""
    calls, best = 1, float("inf")
    for trial in range(3):
        started = time.perf_counter()
        runner.timed_calls(objective, inputs, calls)
        best = min(best, (time.perf_counter() - started) / calls)
        fill = calls_to_fill(round_seconds, best)
        if fill == calls == 1 and trial:
            break
        calls = fill
    return calls


def time_round(runner: Runner, inputs: Mapping[str, np.ndarray], objective: str, calls: int) -> float:
    """One round: milliseconds per call over `calls` calls."""
    return runner.timed_calls(objective, inputs, calls) / calls


def resized(calls: int, took: float, round_seconds: float) -> int:
    """The calls that fill a round, when `calls` took under 0.7 or over 1.5 rounds (`took` seconds of
    wall time; `Held.follow`'s band), else `calls`."""
    if round_seconds > 0 and not 0.7 <= max(took, 1e-6) / round_seconds <= 1.5:
        return calls_to_fill(round_seconds, max(took, 1e-6) / calls)
    return calls


def warm_and_size(
    runner: Runner, inputs: Mapping[str, np.ndarray], objective: str, calls: int, round_seconds: float
) -> int:
    """Untimed calls before a round of `calls`, a tenth of them at a time, for WARM_SHARE of a round
    of wall time (as `rounds.warm_in_turns`: on the H200 a launch-bound engine read up to 30% slower
    in a round begun straight after idling; none for an engine of under 5 calls a round, a slow
    engine is not paid twice). Returns the calls that fill a round of `objective` by the fastest of
    these calls' wall time (`resized`): calls sized for another objective (gpuTime's back-to-back
    calls; a latency call adds copies and a sync) would make a round of many rounds."""
    if calls < 5 or round_seconds <= 0:
        return calls
    block, per_call = max(1, calls // 10), float("inf")
    until = time.perf_counter() + WARM_SHARE * round_seconds
    while time.perf_counter() < until:
        started = time.perf_counter()
        runner.timed_calls(objective, inputs, block)
        per_call = min(per_call, (time.perf_counter() - started) / block)
    return resized(calls, per_call * calls, round_seconds)


def measure_all(
    runner: Runner, inputs: Mapping[str, np.ndarray], round_seconds: float, calls: int | None = None
) -> Measurements:
    """Latency, throughput and device time per call, one round each, and the host's CPU time per
    call. `calls`: the calls that fill a round, when the caller knows them already (the serving
    process's rounds of this engine, of its timing objective): then nothing is calibrated again.
    Each objective starts from `calls` (a re-size is never carried into the next objective): untimed
    calls warm the engine and say whether `calls` fill a round of this objective (`warm_and_size`),
    then its round is timed, and timed again (at most RETIMES times) with the calls its wall time
    says fill a round while it lasted under 0.7 or over 1.5 rounds. The host CPU's trials are sized
    to the call time too (`host_cpu_trials`). None: calibrated per objective (`calls_per_round`),
    as before."""
    times, took = {}, float("inf")
    for objective in OBJECTIVES:
        if calls is None:
            times[objective] = time_round(
                runner, inputs, objective, calls_per_round(runner, inputs, objective, round_seconds)
            )
            continue
        sized = warm_and_size(runner, inputs, objective, calls, round_seconds)
        for _ in range(1 + RETIMES):
            started = time.perf_counter()
            times[objective] = time_round(runner, inputs, objective, sized)
            wall = time.perf_counter() - started
            call_wall, again = wall / sized, resized(sized, wall, round_seconds)
            if again == sized:
                break
            sized = again
        took = min(took, call_wall)
    host = (
        runner.host_cpu_ms(inputs)
        if calls is None
        else runner.host_cpu_ms(inputs, *host_cpu_trials(round_seconds, took))
    )
    return Measurements(
        latency_ms=times["latency"],
        throughput_ms=times["throughput"],
        gpu_time_ms=times["gpuTime"],
        host_cpu_ms=host,
    )


HOST_CPU_CALLS, HOST_CPU_TRIALS = 4, 8  # `Runner.host_cpu_ms`'s defaults: 32 calls in all
MIN_HOST_CPU_TRIALS = 3  # a median of three at least


def host_cpu_trials(round_seconds: float, call_seconds: float) -> tuple[int, int]:
    """Calls and trials of the host CPU's measurement (`Runner.host_cpu_ms`): its defaults (4 calls,
    8 trials) while they fit in 2 rounds' time, else fewer calls, then fewer trials, down to 1
    call in each of MIN_HOST_CPU_TRIALS: a 20 ms call paid 0.64 s for it, more than all its
    measurements' rounds together."""
    budget = max(2 * round_seconds, 1e-9)
    calls = max(1, min(HOST_CPU_CALLS, round(budget / (HOST_CPU_TRIALS * max(call_seconds, 1e-9)))))
    trials = max(MIN_HOST_CPU_TRIALS, min(HOST_CPU_TRIALS, round(budget / (calls * max(call_seconds, 1e-9)))))
    return calls, trials


def stats_of(samples: list[float], n: int | None = None) -> TimingStats:
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return TimingStats(
        median_ms=statistics.median(ordered),
        mean_ms=statistics.fmean(ordered),
        p90_ms=p90,
        min_ms=ordered[0],
        n=n if n is not None else len(samples),
    )
