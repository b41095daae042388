"""Failpoints: named places where a fault test makes a process fail as a real fault would.

Off unless ENGINEWRIGHT_FAILPOINTS is set, e.g. `job-created=kill@2,publish-start=pause:3`:
at the 2nd pass through `job-created` the process SIGKILLs itself; at `publish-start` it writes a
marker file named after the failpoint into ENGINEWRIGHT_FAILPOINT_DIR (so a test knows where it
is) and pauses 3 seconds. Actions: `kill` (SIGKILL, as `kill -9` or an OOM kill would), `exit`
(exit 0 at once, as a worker that stops early), `pause:S`, and caller-defined ones (`corrupt`),
which `hit` returns for the caller to act on. `@N` fires at the N-th pass only (default: every pass).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

ENV = "ENGINEWRIGHT_FAILPOINTS"
DIR_ENV = "ENGINEWRIGHT_FAILPOINT_DIR"

_passes: Counter = Counter()
_lock = threading.Lock()


def _configured() -> dict[str, tuple[str, int | None]]:
    points = {}
    for item in filter(None, (i.strip() for i in os.environ.get(ENV, "").split(","))):
        name, _, action = item.partition("=")
        action, _, nth = action.partition("@")
        points[name] = (action, int(nth) if nth else None)
    return points


def hit(name: str) -> str | None:
    """Pass through failpoint `name`; returns the action when it fires (after acting on kill, exit
    and pause), else None."""
    if ENV not in os.environ:
        return None
    point = _configured().get(name)
    if point is None:
        return None
    action, nth = point
    with _lock:
        _passes[name] += 1
        count = _passes[name]
    if nth is not None and count != nth:
        return None
    folder = os.environ.get(DIR_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_text(f"{os.getpid()} {count}\n")
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "exit":
        os._exit(0)
    elif action.startswith("pause:"):
        time.sleep(float(action.split(":", 1)[1]))
    return action
