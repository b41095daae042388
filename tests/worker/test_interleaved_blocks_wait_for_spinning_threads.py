"""Within an interleaved round, an engine's block starts only once the threads the last block left
spinning (as ONNX Runtime's intra-op threads do for ~45 ms after a run) have stopped using the CPU;
engines whose threads stay idle are not held up."""

import hashlib
import threading
import time

from enginewright.backends.base import Runner
from enginewright.measure import rounds
from enginewright.measure.quiet import QUIET_WINDOW_SECONDS
from enginewright.measure.rounds import Held, interleaved_round

CHUNK = bytes(256 * 1024)  # a fraction of a millisecond of hashing


class Engine(Runner):
    """Each timed stretch: `work` seconds on the calling thread and (`spin`) a thread of its own
    beside it that uses `spin` seconds of CPU, as a runtime's worker threads do (they run with the
    call, then spin on), hashing (which releases the GIL, as native threads hold none). The thread
    notes its CPU time as it goes (`used`: (time.monotonic(), its CPU seconds so far) each step):
    on a busy host it sits descheduled for stretches, and what it used when is what the round saw."""

    def __init__(self, name: str, log: list, spin: float = 0.0, work: float = 0.001):
        self.name, self.log, self.spin, self.work = name, log, spin, work
        self.used: list[list[tuple[float, float]]] = []  # one list per spinning thread
        self.threads: list[threading.Thread] = []

    def run(self, inputs):
        return {}

    def timed_calls(self, objective, inputs, count):
        started = time.monotonic()
        self.log.append((self.name, started))
        if self.spin:
            used = [(started, 0.0)]
            self.used.append(used)

            def spin():
                begun = time.thread_time()
                while used[-1][1] < self.spin:
                    hashlib.sha256(CHUNK)
                    used.append((time.monotonic(), time.thread_time() - begun))

            self.threads.append(threading.Thread(target=spin, daemon=True))
            self.threads[-1].start()
        while time.monotonic() < started + self.work:
            pass
        return (time.monotonic() - started) * 1000.0


def cpu_between(used: list[tuple[float, float]], start: float, end: float) -> float:
    """CPU seconds a spinning thread used between `start` and `end`, from its notes (each note at
    most one step late)."""

    def by(moment: float) -> float:
        return max((cpu for at, cpu in used if at <= moment), default=0.0)

    return by(end) - by(start)


def test_a_block_waits_for_the_threads_the_last_block_left_spinning():
    used: list[float] = []  # CPU seconds the spinning threads used in the quiet window before each idle block
    for _ in range(3):  # rounds
        log: list = []
        # blocks of 10 ms (the product's are tens of ms: a round of seconds in 10 blocks per engine);
        # the kernel adds a running thread's CPU time to what /proc shows only every tick or so, which
        # a block of 1 ms can fall between
        spinning, idle = Engine("spinning", log, spin=0.03, work=0.01), Engine("idle", log, work=0.01)
        times = interleaved_round([Held(spinning, calls=30), Held(idle, calls=30)], "gpuTime", {}, 0.0)
        for thread in spinning.threads:  # (none left spinning into the next round)
            thread.join(timeout=10)
        assert len(times) == 2 and all(t > 0 for t in times)
        assert [name for name, _ in log] == ["spinning", "idle"] * 10 and len(spinning.used) == 10
        used += [
            sum(cpu_between(u, started - QUIET_WINDOW_SECONDS, started) for u in spinning.used)
            for name, started in log
            if name == "idle"
        ]
    # The blocks of the idle engine began once the spinning threads had stopped using the CPU: in
    # the quiet windows before them the threads used little of it. Threads spinning on through the
    # blocks' starts would use all of those windows' CPU (of two cores, as they pile up) on an idle
    # host, half of it on a busy one. Not none, nor in each window: the round sees the threads'
    # CPU time through /proc, a tick (4 ms) or so late, and a busy host holds a thread off the CPU
    # for a whole window (to the round, it went quiet) and gives it back as the block starts.
    assert sum(used) / len(used) < QUIET_WINDOW_SECONDS / 3, used


def test_engines_whose_threads_stay_idle_are_not_held_up(monkeypatch):
    waits: list[int] = []
    real = rounds.wait_quiet

    def counting(pid: int, *args, **kwargs) -> bool:
        waits.append(pid)
        return real(pid, *args, **kwargs)

    monkeypatch.setattr(rounds, "wait_quiet", counting)
    log: list = []
    first, second = Engine("a", log), Engine("b", log)
    interleaved_round([Held(first, calls=30), Held(second, calls=30)], "gpuTime", {}, 0.0)
    assert [name for name, _ in log] == ["a", "b"] * 10
    assert waits == []  # 20 blocks of ~1 ms, no quiet window waited for between them
