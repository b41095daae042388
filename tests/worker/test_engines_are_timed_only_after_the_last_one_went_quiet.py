"""An engine is timed only once the process timed before it has gone quiet: ONNX Runtime's threads
spin for tens of milliseconds after a run, and on 2 cores that tripled the next process's per-call
time. `wait_quiet` tells a spinning process from an idle one by its CPU time, with a deadline."""

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


def test_a_process_that_is_gone_has_nothing_to_wait_for():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu_nanoseconds(gone.pid) is None
    assert wait_quiet(gone.pid, limit=5.0)
