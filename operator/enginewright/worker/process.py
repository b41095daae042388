"""Child processes of the worker (`child.py`): the command that starts one, a build step run to its
end or its timeout, and how one that died ended. Every child runs in a process group of its own, so
that killing the group ends whatever it started too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from enginewright.api.cache import Outcome
from enginewright.worker.child import ChildRequest


def child_command(request_path: Path) -> list[str]:
    """The command line of a child process that runs the request in `request_path`."""
    return [sys.executable, "-m", "enginewright.worker.child", str(request_path)]


@dataclass
class ChildResult:
    ok: bool
    data: dict
    outcome: Outcome | None = None  # set when the child failed
    error: str | None = None


def run_child(request: ChildRequest, timeout: float, failure: Outcome) -> ChildResult:
    """Run one child step (a build) to its end in its own process group; a timeout kills the whole group.
    `failure`: the outcome of a step that ran to its end and said it failed."""
    folder = Path(request.workdir)
    folder.mkdir(parents=True, exist_ok=True)
    result_path = folder / f"{request.action}-result.json"
    request = request.model_copy(update={"result": str(result_path)})
    result_path.unlink(missing_ok=True)
    request_path = folder / f"{request.action}-request.json"
    request_path.write_text(request.model_dump_json())
    log_path = folder / f"{request.action}.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            child_command(request_path),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            return ChildResult(False, {}, Outcome.timeout, f"{request.action} exceeded {timeout:.0f}s")
        finally:
            kill_group(proc)  # leftovers of the child's own children
    if not result_path.exists():
        return ChildResult(False, {}, Outcome.crash, f"{request.action} process {how_it_ended(code, log_path)}")
    data = json.loads(result_path.read_text())
    if not data.get("ok"):
        return ChildResult(False, data, failure, data.get("error"))
    return ChildResult(True, data)


def how_it_ended(code: int, log_path: Path, when: str = "") -> str:
    """A child's exit (the signal that killed it, or its status), `when`, and the tail of its log."""
    tail = log_path.read_text(errors="replace")[-1500:].strip()
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
    return how + when + (f": {tail}" if tail else "")


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it and whatever it started), and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
