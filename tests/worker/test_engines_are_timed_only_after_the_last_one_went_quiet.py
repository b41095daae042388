"""An engine is timed only once the process timed before it has gone quiet: ONNX Runtime's threads
spin for tens of milliseconds after a run, and on 2 cores that tripled the next process's per-call
time. `wait_quiet` tells a spinning process from an idle one by its CPU time, with a deadline."""

import os
import subprocess
import sys
import time

from enginewright.measure.quiet import cpu_nanoseconds, wait_quiet


def test_an_idle_process_is_quiet_at_once_and_a_spinning_one_is_not():
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        started = time.monotonic()
        assert wait_quiet(idle.pid, limit=5.0)
        assert time.monotonic() - started < 1.0
        started = time.monotonic()
        assert not wait_quiet(busy.pid, limit=0.3)
        assert time.monotonic() - started >= 0.3
    finally:
        idle.kill()
        busy.kill()
        idle.wait()
        busy.wait()


def test_a_spinning_process_that_waits_for_a_core_is_not_quiet():
    """On a busy host a spinning thread can wait for a core for longer than the quiet window and use
    no CPU meanwhile (CI's 2 cores once made `wait_quiet` call such a process quiet). Here a spinner
    at the lowest priority shares one core with another spinner, so it waits most of the time."""
    core = min(os.sched_getaffinity(0))

    def spinner(niceness: int) -> subprocess.Popen:
        code = f"import os; os.sched_setaffinity(0, [{core}]); os.nice({niceness}); print(flush=True)\nwhile True: pass"
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        proc.stdout.readline()  # it spins from here on (its start-up may have waited on the disk)
        return proc

    hog, starved = spinner(0), spinner(19)
    try:
        assert not any(wait_quiet(starved.pid, limit=0.3) for _ in range(5))
    finally:
        for proc in (hog, starved):
            proc.kill()
            proc.wait()


def test_a_process_that_is_gone_has_nothing_to_wait_for():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_nanoseconds(gone.pid) is None
    assert wait_quiet(gone.pid, limit=5.0)
