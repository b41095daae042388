"""Within an interleaved round, an engine's block starts only once the threads the last block left
spinning (as ONNX Runtime's intra-op threads do for ~45 ms after a run) have stopped; engines whose
threads stay idle are not held up."""

import hashlib
import threading
import time

from enginewright.backends.base import Runner
from enginewright.measure.rounds import Held, interleaved_round

CHUNK = bytes(1 << 18)  # hashed a piece at a time: sha256 of 256 KiB runs ~0.1-0.5 ms without the GIL


def busy_until(until: float) -> None:
    """Keep a core busy until `until` (time.monotonic) the way a runtime's native threads do: without
    holding the GIL (hashlib lets it go for data this size). A pure-Python spin would take the GIL
    from the calling thread and wait for it in turns: a spinning thread that waits for the GIL uses
    no CPU, and under load the block's one read of the threads' CPU time missed it (CI, 2026-12-03:
    a block began 27 ms before the spinner stopped)."""
    while time.monotonic() < until:
        hashlib.sha256(CHUNK)


class Engine(Runner):
    """Each timed stretch: `work` seconds on the calling thread and (`spin`) a thread of its own
    busy beside it that keeps a core busy for `spin` seconds more, as a runtime's worker threads do
    (they run with the call, then spin on), both off the GIL as native threads are."""

    def __init__(self, name: str, log: list, spin: float = 0.0, work: float = 0.001):
        self.name, self.log, self.spin, self.work = name, log, spin, work
        self.spun: list[float] = []  # when each spinning thread stopped

    def run(self, inputs):
        return {}

    def timed_calls(self, objective, inputs, count):
        started = time.monotonic()
        self.log.append((self.name, started))
        if self.spin:

            def spin():
                busy_until(started + self.work + self.spin)
                self.spun.append(time.monotonic())

            threading.Thread(target=spin, daemon=True).start()
        busy_until(started + self.work)
        return (time.monotonic() - started) * 1000.0


def test_a_block_waits_for_the_threads_the_last_block_left_spinning():
    log: list = []
    # blocks of 10 ms (the product's are tens of ms: a round of seconds in 10 blocks per engine); the
    # kernel adds a running thread's CPU time to what /proc shows only every tick or so, which a
    # block of 1 ms can fall between
    spinning, idle = Engine("spinning", log, spin=0.03, work=0.01), Engine("idle", log, work=0.01)
    times = interleaved_round([Held(spinning, calls=30), Held(idle, calls=30)], "gpuTime", {}, 0.0)
    assert len(times) == 2 and all(t > 0 for t in times)
    starts = [started for name, started in log if name == "idle"]
    assert len(starts) == 10 and len(spinning.spun) >= 9  # ten blocks each
    # every block of the idle engine began after the spinning thread of the block before had stopped
    assert all(start >= stopped for start, stopped in zip(starts, spinning.spun)), (starts, spinning.spun)


def test_engines_whose_threads_stay_idle_are_not_held_up():
    log: list = []
    first, second = Engine("a", log), Engine("b", log)
    started = time.monotonic()
    interleaved_round([Held(first, calls=30), Held(second, calls=30)], "gpuTime", {}, 0.0)
    assert [name for name, _ in log] == ["a", "b"] * 10
    assert time.monotonic() - started < 0.2  # 20 blocks of ~1 ms, no 12 ms quiet windows between them
