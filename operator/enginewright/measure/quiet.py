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
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            if but is not None and int(task) == but:
                continue
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total


def wait_quiet(pid: int, limit: float = 0.5, but: int | None = None) -> bool:
    """Poll until the process has used no CPU for QUIET_WINDOW_SECONDS (its threads stopped
    spinning), or `limit` seconds passed. True when it went quiet; also True where the CPU time
    cannot be read (nothing to wait for)."""
    deadline = time.monotonic() + limit
    used, quiet_since = cpu_nanoseconds(pid, but), time.monotonic()
    if used is None:
        return True
    while time.monotonic() < deadline:
        time.sleep(QUIET_POLL_SECONDS)
        now_used, now = cpu_nanoseconds(pid, but), time.monotonic()
        if now_used is None:
            return True
        if now_used > used + 100_000:  # more than 0.1 ms of CPU: still busy
            used, quiet_since = now_used, now
        elif now - quiet_since >= QUIET_WINDOW_SECONDS:
            return True
    return False
