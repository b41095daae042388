"""Child processes of the worker (`child.py`): the command that starts one, the build processes
that run build steps to their end or their timeout, and how one that died ended. Every child and
every build runs in a process group of its own, so that killing the group ends whatever it started
too."""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import time
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
    """Run one child step (a build) to its end in a build process of its own, closed afterwards
    (`Builder.run`; a batch keeps one Builder for all its builds instead)."""
    with Builder(Path(request.workdir)) as builder:
        return builder.run(request, timeout, failure)


class ReplyLines:
    """The reply lines a child writes to a pipe (`fd`), read raw (os.read) and split here: select()
    sees only what is still in the pipe, so a buffered reader (`readline`) that took two lines of
    one write would hold the second where select() cannot see it, and the wait for it would last
    until the deadline."""

    def __init__(self, fd: int):
        self.fd = fd
        self.pending = b""  # read from the pipe and not yet handed out

    def next(self, deadline: float) -> bytes | None:
        """The next complete line (without its newline) by `deadline` (`time.monotonic()`), or None
        when the child closed its end first; TimeoutError when the deadline passed."""
        while b"\n" not in self.pending:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line

    def drain(self) -> list[bytes]:
        """Every line read or waiting in the pipe now (the last one perhaps cut short), without
        waiting for more."""
        while select.select([self.fd], [], [], 0)[0]:  # (a build still running holds the pipe open)
            chunk = os.read(self.fd, 65536)
            if not chunk:
                break
            self.pending += chunk
        lines, self.pending = self.pending.split(b"\n"), b""
        return lines


class BuildEnded(Exception):
    """The build process stopped answering: it exited (`timed_out` False) or the deadline passed."""

    def __init__(self, message: str, timed_out: bool):
        super().__init__(message)
        self.timed_out = timed_out


class Builder:
    """A build process (`child.builds`) and the builds it runs, one at a time: each build is forked
    from it into a process group of its own, so a crash, hang or out-of-memory is the build's alone
    and its memory goes when it exits, but the interpreter start and imports are paid once, not per
    route (~0.5 CPU-s and ~1 s of wall time on 2 cores). The process starts at the first build (or before, `launch`);
    one that died or hung is closed, and the next build starts a fresh one. Its request and log
    live in `folder`."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.proc: subprocess.Popen[str] | None = None
        self.build_pid: int | None = None  # the build in flight (its process group's id)
        self.started = 0  # build processes started so far
        self.replies: ReplyLines | None = None  # the build process's reply lines
        self.ready = False  # the running build process said it is ready (its imports done)

    def run(self, request: ChildRequest, timeout: float, failure: Outcome) -> ChildResult:
        """Run one build step to its end, or until `timeout` seconds (its build process's start
        included) passed: then the build's whole group is killed. `failure`: the outcome of a step
        that ran to its end and said it failed."""
        deadline = time.monotonic() + timeout
        folder = Path(request.workdir)
        folder.mkdir(parents=True, exist_ok=True)
        result_path = folder / f"{request.action}-result.json"
        request = request.model_copy(update={"result": str(result_path)})
        result_path.unlink(missing_ok=True)
        request_path = folder / f"{request.action}-request.json"
        request_path.write_text(request.model_dump_json())
        log_path = folder / f"{request.action}.log"
        try:
            self.build_pid = self._fork_build(request, {"request": str(request_path), "log": str(log_path)}, deadline)
            code = int(self._expect("code", deadline))
        except BuildEnded as ended:
            if not ended.timed_out:
                self.close()
                return ChildResult(False, {}, Outcome.crash, f"{request.action}: {ended}")
            if self.build_pid is None:  # still starting, or never forked the build: a fresh one next time
                self.close()
            else:
                self._kill_build()
                try:  # the build process reaps the killed build and goes on
                    self._expect("code", time.monotonic() + 10)
                except BuildEnded:
                    self.close()
            return ChildResult(False, {}, Outcome.timeout, f"{request.action} exceeded {timeout:.0f}s")
        except BaseException:  # a signal (SIGTERM: SystemExit), Ctrl-C, a garbled reply: no build left behind
            self.close()
            raise
        finally:
            self.build_pid = None
        if not result_path.exists():
            return ChildResult(False, {}, Outcome.crash, f"{request.action} process {how_it_ended(code, log_path)}")
        data = json.loads(result_path.read_text())
        if not data.get("ok"):
            return ChildResult(False, data, failure, data.get("error"))
        return ChildResult(True, data)

    def _fork_build(self, request: ChildRequest, message: dict, deadline: float) -> int:
        """Have the build process fork the build in `message`; the build's pid. A build process that
        died while idle (the OOM killer, a stray kill), found so before it acknowledged the fork, is
        no fault of this route: a fresh one is started and the build forked from it, once."""
        reused = self.proc is not None
        try:
            return self._fork_from_build_process(request, message, deadline)
        except BuildEnded as ended:
            if ended.timed_out or not reused:
                raise
            self.close()
            return self._fork_from_build_process(request, message, deadline)

    def _fork_from_build_process(self, request: ChildRequest, message: dict, deadline: float) -> int:
        if self.proc is None:
            self._launch(request)
        if not self.ready:  # (one launched ahead, `launch`, is waited for here)
            self._expect("ready", deadline)
            self.ready = True
        self._send(message)
        return int(self._expect("pid", deadline))

    def launch(self, request: ChildRequest) -> None:
        """Start the build process now, before its first build (its imports then run meanwhile);
        `request`: any build request of the batch (the build process uses its backend and settings)."""
        if self.proc is None:
            self._launch(request)

    def _launch(self, request: ChildRequest) -> None:
        self.ready = False
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / "builds-request.json"
        path.write_text(request.model_copy(update={"action": "builds", "result": None}).model_dump_json())
        with open(self.folder / "builds.log", "wb") as log_file:
            self.proc = subprocess.Popen(
                child_command(path),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdout is not None  # launched with pipes
        self.replies = ReplyLines(self.proc.stdout.fileno())
        self.started += 1

    def _send(self, message: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None  # launched with pipes
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass  # the reply (none) says what happened

    def _expect(self, key: str, deadline: float):
        """The value of `key` in the build process's next reply line, by `deadline` (both of a
        build's lines, `pid` and `code`, may come in one read: `ReplyLines`)."""
        proc, replies = self.proc, self.replies
        assert proc is not None and replies is not None  # launched
        try:
            line = replies.next(deadline)
        except TimeoutError:
            raise BuildEnded("the deadline passed", timed_out=True) from None
        if line is None:
            code = exit_code(proc, grace_s=10)
            raise BuildEnded(f"the build process {how_it_ended(code, self.folder / 'builds.log')}", timed_out=False)
        return json.loads(line)[key]

    def _kill_build(self) -> None:
        """Kill the build in flight and whatever it started (its process group)."""
        if self.build_pid is not None:
            try:
                os.killpg(self.build_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def close(self) -> None:
        """End the build in flight, if any, and the build process with its group."""
        self._kill_build()
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        kill_group(proc)
        self._kill_unacknowledged()
        if proc.stdout is not None:
            proc.stdout.close()

    def _kill_unacknowledged(self) -> None:
        """Kill the group of a build that the (now killed) build process forked but whose `pid` line
        the worker never took (the deadline passed, or `close` ran, first): it would run on."""
        replies, self.replies = self.replies, None
        running = None
        for line in replies.drain() if replies is not None else []:
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            running = reply.get("pid", running if "code" not in reply else None)
        if running is not None:
            try:
                os.killpg(running, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def __enter__(self) -> Builder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Builders:
    """A batch's build processes, one for each build that may run at once (`width`); `run` takes a
    free one for the build."""

    def __init__(self, folder: Path, width: int):
        self.free: queue.SimpleQueue[Builder] = queue.SimpleQueue()
        self.all = [Builder(folder / f"builder-{i}") for i in range(max(1, width))]
        for builder in self.all:
            self.free.put(builder)

    def launch(self, request: ChildRequest) -> None:
        """Start every build process now (`Builder.launch`)."""
        for builder in self.all:
            builder.launch(request)

    def run(self, request: ChildRequest, timeout: float, failure: Outcome) -> ChildResult:
        builder = self.free.get()
        try:
            return builder.run(request, timeout, failure)
        finally:
            self.free.put(builder)

    @property
    def started(self) -> int:
        """Build processes started so far (interpreter starts, not builds)."""
        return sum(b.started for b in self.all)

    def close(self) -> None:
        for builder in self.all:
            builder.close()

    def __enter__(self) -> Builders:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def how_it_ended(code: int, log_path: Path, when: str = "") -> str:
    """A child's exit (the signal that killed it, or its status), `when`, and the tail of its log."""
    tail = log_path.read_text(errors="replace")[-1500:].strip()
    how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited {code}"
    return how + when + (f": {tail}" if tail else "")


def exit_code(proc: subprocess.Popen, grace_s: float) -> int:
    """The exit status of a child that closed its output: it has `grace_s` seconds to exit, else
    (it hangs on exit) its whole group is killed."""
    try:
        return proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return proc.returncode


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it and whatever it started), and reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
