"""Rounds of engines held in one serving process: an engine and the calls that fill its round
(`Held`), untimed calls taking turns, and a round of several engines interleaved block by block,
waiting for the process's other threads to go quiet (`quiet`)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from enginewright.backends.base import Runner
from enginewright.measure.quiet import cpu_nanoseconds, sample, wait_quiet
from enginewright.measure.timing import WARM_SHARE, calls_to_fill

SPIN_SHARE = 0.2  # other threads busy for more than this share of a block's wall time: wait for them


@dataclass
class Held:
    """An engine loaded in the serving process, and the calls that fill one of its rounds."""

    runner: Runner
    calls: int = 1
    key: str = ""
    busy_starts: int = 0  # blocks begun after the quiet wait gave up: timed beside busy threads
    source: str = ""  # the engine file it was loaded from (a later load of it takes its calls)

    def timed_calls(self, objective: str, inputs: dict, calls: int) -> float:
        """The runner's `timed_calls`; a call that raises is an EngineFailed naming this engine."""
        try:
            return self.runner.timed_calls(objective, inputs, calls)
        except Exception as exc:
            raise EngineFailed(self.key, exc) from exc

    def round(self, objective: str, inputs: dict, round_seconds: float) -> float:
        """One timed round (ms per call). The thread sat idle while other engines ran (or the parent
        waited), so untimed calls come first, for WARM_SHARE of a round of wall time: on the H200 a
        launch-bound engine read up to 30% slower in rounds begun straight after idling, and the
        slowdown lasts a time, not a number of calls. A slow engine (under 5 calls a round) is not
        paid twice. Then the calls per round follow the wall time rounds really take: a count
        calibrated while the host was busy (other engines loading) made rounds of a few
        milliseconds, mostly warm-up, and their times read apart from the other engines'."""
        warm_in_turns([self], objective, inputs, round_seconds)
        started = time.perf_counter()
        ms = self.timed_calls(objective, inputs, self.calls) / self.calls
        self.follow(time.perf_counter() - started, self.calls, round_seconds)
        return ms

    def follow(self, took: float, calls: int, round_seconds: float) -> None:
        """Calls per round from now on, from `calls` having taken `took` seconds of wall time."""
        if round_seconds > 0 and not 0.7 <= max(took, 1e-6) / round_seconds <= 1.5:
            self.calls = calls_to_fill(round_seconds, max(took, 1e-6) / calls)


def warm_in_turns(held: list[Held], objective: str, inputs: dict, round_seconds: float) -> None:
    """Untimed calls of the engines of 5 calls a round or more (a slow engine, a call or so a round,
    is not paid twice), taking turns, a tenth of a round's calls at a time, for WARM_SHARE of a
    round of wall time."""
    warmed = [h for h in held if h.calls >= 5]
    until = time.perf_counter() + WARM_SHARE * round_seconds
    while warmed and time.perf_counter() < until:
        for h in warmed:
            h.timed_calls(objective, inputs, max(1, h.calls // 10))


def interleaved_round(held: list[Held], objective: str, inputs: dict, round_seconds: float) -> list[float]:
    """One round of several engines of this process, interleaved: 10 blocks of each
    (`Runner.interleave_blocks`; fewer when an engine's round has fewer calls), taking turns in the
    order given (A, B, A, B, ...), each block an equal share of the engine's round of calls, after
    untimed calls of each (of 5 calls a round or more), taking turns, for WARM_SHARE of a round.
    Returns each engine's per-call time (ms) over its blocks. The engines are timed within milliseconds of each other, so what drifts on the
    host meanwhile hits them alike and cancels in their ratios: on the H200 a launch-bound engine's
    rounds ranged 0.19-0.53 ms within seconds, and copies of one engine timed in whole rounds one
    after the other read 0.93-0.99 of each other (95% intervals up to ±10%), in interleaved rounds
    0.98-1.00 (±1.5%; bench/process_offsets.py, `pairs`). A block starts only once the other
    threads of the process are quiet, when they used more than SPIN_SHARE of a core during the last
    block or one of them is runnable now (a spinner set aside on a busy host has used no CPU yet; a
    runtime's worker threads, spinning after a run, would slow the next engine's block;
    one read of their CPU time per block, which /proc shows a tick or so late: threads that spun
    through a block of a few ms can go unseen; rounds' blocks are tens of ms); a runner whose
    threads do so keeps its blocks few (`Runner.interleave_blocks`)."""
    me, own = os.getpid(), threading.get_native_id()
    others, since = cpu_nanoseconds(me, but=own), time.perf_counter()
    warm_in_turns(held, objective, inputs, round_seconds)
    # (an engine of a call a round: one block; a runner whose threads spin after a run: its own)
    blocks = max(1, min([*(h.calls for h in held), *(h.runner.interleave_blocks for h in held)]))

    totals, counts, walls = [0.0] * len(held), [0] * len(held), [0.0] * len(held)
    for _ in range(blocks):
        for index, h in enumerate(held):
            # Other threads of the process that kept a core busy since the last block or the warm-up
            # (a runtime's worker threads spin on after a run; ONNX Runtime's do): let them stop first.
            # (or one waiting for a core now: on a busy host a spinner set aside used no CPU yet)
            seen = sample(me, but=own)
            window = (time.perf_counter() - since) * 1e9
            if others is not None and seen is not None and (seen[1] or seen[0] - others > SPIN_SHARE * window):
                if not wait_quiet(me, but=own):
                    h.busy_starts += 1  # timed anyway (the host may stay busy): counted, said in the entry
                seen = sample(me, but=own)
            others, since = None if seen is None else seen[0], time.perf_counter()
            calls = max(1, h.calls // blocks)
            started = time.perf_counter()
            totals[index] += h.timed_calls(objective, inputs, calls)
            walls[index] += time.perf_counter() - started
            counts[index] += calls
    for h, wall, count in zip(held, walls, counts):
        h.follow(wall, count, round_seconds)
    return [total / count for total, count in zip(totals, counts)]


class EngineFailed(Exception):
    """A timed call of one engine raised: the reply names that engine (`failed`)."""

    def __init__(self, key: str, cause: Exception):
        super().__init__(f"{type(cause).__name__}: {cause}".strip()[:4000])
        self.key = key
