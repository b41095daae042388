"""The worker's side of a serving process (`child.serve`): engines held loaded in one process and
timed on request, one JSON line per request and one back, so that engines timed against each other
run in one process, on one thread."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from pathlib import Path
from typing import IO, Sequence

from enginewright.api.cache import Measurements, Outcome
from enginewright.measure.quiet import wait_quiet
from enginewright.worker.context import WorkerContext
from enginewright.worker.process import ReplyLines, child_command, exit_code, how_it_ended, kill_group

log = logging.getLogger("enginewright.worker")


TIMED = frozenset({"time", "interleave", "measurements"})  # the requests that time an engine


def primer(key: str) -> str:
    """The key of an engine's first load in a process: checked for accuracy, never timed."""
    return f"{key}@primer"


class ServerFailed(Exception):
    """A serving process failed; `engine`: the key of the engine whose call raised, when it said."""

    def __init__(self, outcome: Outcome, error: str, engine: str | None = None):
        super().__init__(error)
        self.outcome, self.error, self.engine = outcome, error, engine


class Server:
    """A serving process (`child.serve`): engines held loaded and timed on request, one JSON line per
    request and one back. It starts with one engine (`key`); `add` loads more beside it and `drop`
    unloads them, so that engines timed against each other run in one process, on one thread (two
    processes holding the same engine run lastingly apart: see `child.serve`). Made without its
    engine (None), it is launched ahead and only imports (`child.await_engine`) until `load_first`
    names the engine."""

    def __init__(self, ctx: WorkerContext, key: str, engine: Path | None, workdir: Path, references: bool):
        self.ctx, self.key, self.engine, self.workdir = ctx, key, engine, workdir
        self.references = references
        self.proc: subprocess.Popen[str] | None = None
        self.replies: ReplyLines | None = None  # the serving process's reply lines
        self.calls_of: dict[str, int] = {}  # calls per round of each loaded engine, set when it is ready
        self.imported = False  # (launched without an engine) its `imported` line was read
        # timing requests and interleaved blocks begun after the quiet wait gave up (its limit passed
        # with the process's threads still busy: a loaded host, a thread that never rests), so timed
        # beside busy threads; the entries say how many (`Host.busy_starts`)
        self.busy_starts = 0

    @property
    def alive(self) -> bool:
        """Launched, not closed, and its process has not exited."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def calls(self) -> int:
        """Calls per round of the first engine."""
        return self.calls_of.get(self.key, 1)

    def launch(self) -> None:
        """Start the process; without an engine yet, it imports ahead what the backend's engines need
        (`child.await_engine`) and waits for `load_first`."""
        ctx, accuracy = self.ctx, self.ctx.accuracy
        self.workdir.mkdir(parents=True, exist_ok=True)
        request = ctx.child_request(
            "serve",
            self.workdir,
            "" if self.engine is None else self.engine,  # (none: `child.await_engine`)
            inputs=[str(p) for p in accuracy.inputs],
            references=[str(p) for p in accuracy.references] if accuracy.enabled else [],
            metric=accuracy.metric,
            threshold=accuracy.threshold,
            atol=accuracy.atol,
            rtol=accuracy.rtol,
            outputs=list(accuracy.outputs),
            key=self.key,
            check=self.references,
        )
        (self.workdir / "request.json").write_text(request.model_dump_json())
        with open(self.workdir / "serve.log", "wb") as log_file:
            self.proc = subprocess.Popen(
                child_command(self.workdir / "request.json"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdout is not None  # launched with pipes
        self.replies = ReplyLines(self.proc.stdout.fileno())
        if ctx.measure_cpus:
            try:  # before the child starts any thread: every thread it starts inherits the set
                os.sched_setaffinity(self.proc.pid, ctx.measure_cpus)
            except OSError as exc:
                log.warning("could not pin the serving process to CPUs %s: %s", sorted(ctx.measure_cpus), exc)

    def wait_ready(self, timeout: float) -> dict:
        return self._ready(self.key, self._reply(timeout, "load"))

    def start(self, timeout: float) -> dict:
        self.launch()
        return self.wait_ready(timeout)

    def wait_imported(self, timeout: float) -> None:
        """Wait until a process launched without an engine has done its imports (its `imported`
        line), at most `timeout` seconds: nothing of its start then runs beside a timing. A process
        that died or hung meanwhile is a ServerFailed."""
        if self.engine is None and not self.imported:
            self._reply(timeout, "imports")
            self.imported = True

    def load_first(self, engine: Path, timeout: float, key: str | None = None, check: bool | None = None) -> dict:
        """Load the first engine into a process launched without one (its imports done meanwhile):
        the `ready` reply, as `start`'s. `key` and `check` name the engine and whether its accuracy is
        checked, where the launch did not know them (a process launched ahead for whatever needs a
        fresh one next). A process that died or hung meanwhile is a ServerFailed."""
        deadline = time.monotonic() + timeout
        self.wait_imported(timeout)
        self.engine, self.key = engine, key or self.key
        self.references = self.references if check is None else check
        request = {"op": "load", "engine": str(engine), "key": self.key, "check": self.references}
        return self._ready(self.key, self._ask(request, max(1.0, deadline - time.monotonic())))

    def add(self, key: str, engine: Path, workdir: Path, timeout: float, check: bool = True, **backend) -> dict:
        """Load another engine into this process (its files under `workdir`), check its accuracy when
        `check` and the run has references; `backend`: `backend`/`backend_options` of its own."""
        return self._ready(
            key,
            self._ask(
                {"op": "load", "key": key, "engine": str(engine), "workdir": str(workdir), "check": check, **backend},
                timeout,
            ),
        )

    def drop(self, keys: Sequence[str], timeout: float) -> None:
        """Unload engines `keys` in one request (the serving process collects their garbage once:
        0.085 s a drop request on an H100, three drops a route before)."""
        self._ask({"op": "drop", "keys": list(keys)}, timeout)
        for key in keys:
            self.calls_of.pop(key, None)

    def _ready(self, key: str, ready: dict) -> dict:
        if not ready.get("ready"):
            raise ServerFailed(Outcome.crash, f"loading engine {key} failed: {ready.get('error')}")
        self.calls_of[key] = int(ready["calls"])
        return ready

    def time(self, timeout: float, key: str | None = None) -> float:
        """One round of engine `key` (default: the first): milliseconds per call."""
        key = key or self.key
        reply = self._timed({"op": "time", "key": key}, timeout)
        return self._timing(key, reply["ms"], reply["calls"])

    def interleave(self, keys: Sequence[str], timeout: float) -> list[float]:
        """One round of engines of this process, interleaved in blocks (`rounds.interleaved_round`):
        milliseconds per call of each, in the order of `keys`."""
        reply = self._timed({"op": "interleave", "keys": list(keys)}, timeout)
        self.busy_starts += int(reply.get("busy_starts", 0))
        return [self._timing(key, ms, calls) for key, ms, calls in zip(keys, reply["ms"], reply["calls"])]

    def _timing(self, key: str, ms, calls) -> float:
        """One engine's time from a reply (and its calls per round from now on), checked."""
        self.calls_of[key] = int(calls)
        ms = float(ms)
        if not ms > 0 or ms == float("inf"):  # a ratio of it would be meaningless
            raise ServerFailed(Outcome.crash, f"engine {key} timed {ms} ms per call")
        return ms

    def measurements(self, timeout: float, key: str | None = None) -> Measurements:
        reply = self._ask({"op": "measurements", "key": key or self.key}, timeout)
        return Measurements.model_validate(reply["measurements"])

    def _timed(self, request: dict, timeout: float) -> dict:
        """A timing request's reply; a call that raised is a ServerFailed naming its engine."""
        reply = self._ask(request, timeout)
        if "failed" in reply:
            raise ServerFailed(
                Outcome.crash, f"engine {reply['failed']} failed: {reply.get('error')}", engine=reply["failed"]
            )
        return reply

    def _running(self) -> tuple[subprocess.Popen[str], IO[str], ReplyLines]:
        """The serving process, its request pipe and its reply lines; asking a closed one is a
        caller's bug."""
        proc, replies = self.proc, self.replies
        if proc is None or proc.stdin is None or replies is None:
            raise RuntimeError(f"the process holding engine {self.key} is not running (closed, or never launched)")
        return proc, proc.stdin, replies

    def _ask(self, request: dict, timeout: float) -> dict:
        proc, requests, _ = self._running()
        # An engine is timed only once the threads of what ran before have gone idle: ONNX Runtime's
        # intra-op threads spin for tens of milliseconds after a run, and on 2 cores that tripled the
        # per-call time of the next process's 1 ms engine (3.1 ms against 1.1 ms with a 50 ms pause).
        # The wait comes before a request that times something, not after every reply: loads and
        # drops follow each other without timing anything, and waiting after each cost ~50 ms.
        # The wait watches only this serving process's threads: enough while a batch times in one
        # process at a time (builds never run during timing); a second process timing at once would
        # need its threads watched too.
        quiet = wait_quiet(proc.pid) if request["op"] in TIMED else True
        if not quiet and request["op"] != "interleave":
            # timed anyway (a host that stays busy must not stop the run) and counted; an interleaved
            # round's blocks are counted by the serving process, its first one included
            self.busy_starts += 1
        try:
            requests.write(json.dumps(request) + "\n")
            requests.flush()
        except (BrokenPipeError, OSError):
            pass  # the reply (none) says what happened
        return self._reply(timeout, request["op"])

    def _reply(self, timeout: float, what: str) -> dict:
        proc, _, replies = self._running()
        try:
            line = replies.next(time.monotonic() + timeout)
        except TimeoutError:
            self.close()
            raise ServerFailed(Outcome.timeout, f"{what} exceeded {timeout:.0f}s") from None
        if line is None:
            code = exit_code(proc, grace_s=10)
            raise ServerFailed(
                Outcome.crash,
                f"the process holding engine {self.key} "
                f"{how_it_ended(code, self.workdir / 'serve.log', f' during {what}')}",
            )
        return json.loads(line)

    def close(self) -> None:
        """End the process at once (its group killed, the process reaped): nothing it holds needs an
        orderly exit, and torch's took 0.6 s a process on an H100 (`server.close` in session 28's
        profile), on the run's critical path where the next timing waits for it. Once reaped, its
        memory and its device context are gone, as after an exit."""
        if self.proc is None:
            return
        proc, self.proc, self.replies = self.proc, None, None
        try:
            if proc.stdin is not None:  # (always: it is opened with a pipe)
                proc.stdin.close()
        except OSError:
            pass
        kill_group(proc)
