"""Waiting for a process's threads to stop using the CPU before the next engine is timed: ONNX
Runtime's intra-op threads spin for tens of milliseconds after a run, and on 2 cores that tripled the
per-call time of the next engine's 1 ms run (3.1 ms against 1.1 ms with a 50 ms pause). The worker
waits before each request that times an engine (`worker.server.Server`), not after loads and drops."""

from __future__ import annotations

import os
import time

QUIET_POLL_SECONDS = 0.002
QUIET_WINDOW_SECONDS = 0.012  # the kernel adds a running thread's CPU time in steps of a few ms


def cpu_nanoseconds(pid: int, but: int | None = None) -> int | None:
    """CPU time used so far by every thread of a process (Linux schedstat, nanoseconds), `but` one
    thread (a native thread id), or None."""
    seen = sample(pid, but)
    return None if seen is None else seen[0]


def sample(pid: int, but: int | None = None) -> tuple[int, bool] | None:
    """The process's CPU time so far (as `cpu_nanoseconds`) and whether any of its threads is
    runnable (state R: running, or waiting for a core). A spinning thread that the scheduler has set
    aside uses no CPU time while it waits, so on a busy host its CPU time alone can look quiet for
    longer than QUIET_WINDOW_SECONDS; its state does not."""
    total, runnable = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        if but is not None and int(task) == but:
            continue
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
            with open(f"/proc/{pid}/task/{task}/stat") as stat:
                runnable |= stat.read().rpartition(")")[2].split()[0] == "R"
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return total, runnable


def wait_quiet(pid: int, limit: float = 0.5, but: int | None = None) -> bool:
    """Poll until the process has used no CPU and had no runnable thread for QUIET_WINDOW_SECONDS
    (its threads stopped spinning), or `limit` seconds passed. True when it went quiet; also True
    where the process cannot be read (nothing to wait for)."""
    deadline = time.monotonic() + limit
    seen, quiet_since = sample(pid, but), time.monotonic()
    if seen is None:
        return True
    used = seen[0]
    while time.monotonic() < deadline:
        time.sleep(QUIET_POLL_SECONDS)
        seen, now = sample(pid, but), time.monotonic()
        if seen is None:
            return True
        now_used, runnable = seen
        if runnable or now_used > used + 100_000:  # more than 0.1 ms of CPU: still busy
            used, quiet_since = now_used, now
        elif now - quiet_since >= QUIET_WINDOW_SECONDS:
            return True
    return False
