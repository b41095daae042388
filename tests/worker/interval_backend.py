"""A test backend: the real onnxruntime backend, recording when each build and each timed stretch
happens (loading, every timed stretch and its calls), so a test can check that measuring never overlaps building. The worker's child processes
import it by name (`tests.worker.interval_backend:IntervalRecordingBackend`).

Intervals go, one JSON line each, to the file named by $ENGINEWRIGHT_TEST_INTERVALS, on the
system-wide monotonic clock (comparable across processes), each naming the process and the route
whose engine it was. Test-only route knobs: `slow_build_seconds` makes a build last at least that
long, as a slow compiler would; `crash_build=1` makes the build kill its process (SIGSEGV);
`crash_when_timed=N` makes the engine kill its process (SIGSEGV) at
its Nth timed stretch, as a broken engine would, and `raise_when_timed=N` raise there instead
($ENGINEWRIGHT_TEST_DEFAULT_RAISES_AT=N: the default route's engine); `restless_thread=1` makes the
loaded engine start a thread that keeps a core busy until the engine is closed, as a runtime's
thread that never rests would (or another tenant's work, on a loaded host); `repeat_calls=N` makes
each call of the engine run the model N times, as an engine doing N times the work would;
`fails_beside_builds=N` makes the build wait until N builds (itself included) have started, then
fail (out of memory) when another of them still runs, as a compile that needs the whole GPU would
($ENGINEWRIGHT_TEST_BUILDING names a folder where each build adds a line to `started` and holds a
file named by its pid while it runs). Every child process that imports this module records when it
did (`import`, with its command line's arguments)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

from enginewright.backends.base import BuildRequest, Runner
from enginewright.backends.onnxruntime import OnnxRuntimeBackend

SLOW_BUILD = "slow_build_seconds"
CRASH_BUILD = "crash_build"
CRASH_TIMED = "crash_when_timed"
RAISE_TIMED = "raise_when_timed"
RESTLESS = "restless_thread"
REPEAT = "repeat_calls"
FAILS_BESIDE = "fails_beside_builds"
BUILDING = "ENGINEWRIGHT_TEST_BUILDING"  # a folder: each running build holds a file named by its pid there
DEFAULT_RAISES = "ENGINEWRIGHT_TEST_DEFAULT_RAISES_AT"  # the default route's engine raises at that timed stretch
HEADER = b"EWTEST\n"  # engine bytes: HEADER, the route's JSON, a newline, the onnxruntime engine


def record(kind: str, started: float, **detail) -> None:
    line = json.dumps({"kind": kind, "start": started, "end": time.monotonic(), "pid": os.getpid(), **detail})
    with open(os.environ["ENGINEWRIGHT_TEST_INTERVALS"], "a") as out:
        out.write(line + "\n")


if os.environ.get("ENGINEWRIGHT_TEST_INTERVALS"):  # (not in the test's own process: set after it imports this)
    record("import", time.monotonic(), argv=sys.argv[1:])


class RecordingRunner(Runner):
    """(Interleaved with other engines in blocks as the base Runner is, 10 a round, unlike the
    onnxruntime runner it wraps, whose spinning threads make it take whole rounds: the tests see
    the blocks.)"""

    def __init__(self, inner: Runner, loaded_at: float, route: dict):
        self.inner, self.loaded_at, self.route = inner, loaded_at, route
        self.crash_at = int(route.get(CRASH_TIMED, 0))
        self.raise_at = int(route.get(RAISE_TIMED, 0) or (0 if route else os.environ.get(DEFAULT_RAISES, 0)))
        self.timed = 0
        self.closed = threading.Event()
        if route.get(RESTLESS):
            threading.Thread(target=self._busy, daemon=True).start()

    def _busy(self) -> None:
        """Keep a core busy until closed, off the GIL (hashlib lets it go for data this size), as a
        native thread does."""
        chunk = bytes(1 << 18)
        while not self.closed.is_set():
            hashlib.sha256(chunk)

    def run(self, inputs):
        try:
            return self.inner.run(inputs)
        finally:
            if self.loaded_at is not None:  # the first call ends loading
                record("load", self.loaded_at, route=self.route)
                self.loaded_at = None

    def timed_calls(self, objective, inputs, count: int) -> float:
        self.timed += 1
        if self.timed == self.crash_at:
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.timed == self.raise_at:
            raise RuntimeError(f"engine {self.route} raised at its timed stretch {self.timed}, on purpose")
        started = time.monotonic()
        try:
            return self.inner.timed_calls(objective, inputs, count * int(self.route.get(REPEAT, 1)))
        finally:
            record("timed", started, objective=objective, route=self.route, runner=id(self), calls=count)

    def close(self) -> None:
        self.closed.set()
        self.inner.close()


class IntervalRecordingBackend(OnnxRuntimeBackend):
    def build(self, request: BuildRequest, route: dict[str, str]) -> bytes:
        folder = os.environ.get(BUILDING)
        marker = Path(folder) / str(os.getpid()) if folder else None
        if marker is not None:
            marker.touch()
            with open(marker.parent / "started", "a") as started:
                started.write(f"{os.getpid()}\n")
        try:
            return self._build(request, dict(route), marker)
        finally:
            if marker is not None:
                marker.unlink(missing_ok=True)

    def _build(self, request: BuildRequest, route: dict[str, str], marker: Path | None) -> bytes:
        started = time.monotonic()
        slow = float(route.pop(SLOW_BUILD, 0))
        if route.pop(CRASH_BUILD, None):
            os.kill(os.getpid(), signal.SIGSEGV)
        group = int(route.pop(FAILS_BESIDE, 0))
        if group and marker is not None:
            deadline = time.monotonic() + 60  # its group's build processes start their interpreters first
            while len((marker.parent / "started").read_text().split()) < group and time.monotonic() < deadline:
                time.sleep(0.01)
            if any(other.name not in (marker.name, "started") for other in marker.parent.iterdir()):
                raise MemoryError("out of memory: another build ran beside this one")
        tagged = dict(route)
        for knob in (CRASH_TIMED, RAISE_TIMED, RESTLESS, REPEAT):  # the engine's own, not ONNX Runtime's
            route.pop(knob, None)
        engine = HEADER + json.dumps(tagged).encode() + b"\n" + super().build(request, route)
        # Stands in for compiler work that takes long (it is the build's duration, not a wait for a condition).
        time.sleep(max(0.0, started + slow - time.monotonic()))
        record("build", started, route=route, parent=os.getppid(), torch_loaded="torch" in sys.modules)
        return engine

    def load(self, engine: bytes, workdir: Path) -> Runner:
        started = time.monotonic()
        if not engine.startswith(HEADER):
            raise ValueError("not an engine of the interval-recording test backend")
        route, inner = engine[len(HEADER) :].split(b"\n", 1)
        return RecordingRunner(super().load(inner, workdir), started, json.loads(route))
