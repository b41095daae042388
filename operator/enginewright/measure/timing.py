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


def measure_all(runner: Runner, inputs: Mapping[str, np.ndarray], round_seconds: float) -> Measurements:
    """Latency, throughput and device time per call, one round each, and the host's CPU time per call."""
    times = {}
    for objective in OBJECTIVES:
        calls = calls_per_round(runner, inputs, objective, round_seconds)
        times[objective] = time_round(runner, inputs, objective, calls)
    return Measurements(
        latency_ms=times["latency"],
        throughput_ms=times["throughput"],
        gpu_time_ms=times["gpuTime"],
        host_cpu_ms=runner.host_cpu_ms(inputs),
    )


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
