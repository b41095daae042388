"""One route step in an isolated child process, so that a crash, hang or out-of-memory in one route
is recorded and the batch goes on.

    python -m enginewright.worker.child REQUEST.json

`build`: compile the route and write the engine bytes; the result is written as JSON to the
request's `result` path (a child that dies leaves none and the parent records a crash). `serve`: load
engine bytes (never a rebuild), run every reference pair and check accuracy, warm up, then hold the
engine and time it whenever the parent asks; the parent loads and drops further engines in the same
process, so that engines timed against each other run on the same thread (paired rounds,
confirmation rounds).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from enginewright.api.models import Accuracy as AccuracySpec, Timing, default_of
from enginewright.backends.base import Runner, calls_per_round, calls_to_fill, measure_all, warm_up
from enginewright.worker.quiet import cpu_nanoseconds, wait_quiet


class ChildRequest(BaseModel):
    """What the worker hands a child process (one JSON file); the one place its fields and defaults
    are written."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["build", "serve"]
    backend: str
    backend_options: dict = Field(default_factory=dict)
    workdir: str
    result: str | None = Field(None, description="Where build writes its JSON result.")
    engine: str = Field(description="build: where to write the engine; serve: the first engine to load.")
    key: str = Field("engine", description="serve: the name the first engine is timed by.")
    check: bool = Field(True, description="serve: check the first engine's accuracy against `references`.")
    model: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    input_shapes: list[dict] = Field(default_factory=list)
    route: dict[str, str] = Field(default_factory=dict)
    inputs: list[str] = Field(default_factory=list, description=".npz files of the reference inputs.")
    references: list[str] = Field(default_factory=list, description="Empty: accuracy is not checked.")
    outputs: list[str] = Field(default_factory=list, description="The outputs checked; empty: every reference.")
    metric: str = default_of(AccuracySpec, "metric").value
    threshold: float | None = None
    atol: float = default_of(AccuracySpec, "atol")
    rtol: float = default_of(AccuracySpec, "rtol")
    timing: Timing = Field(default_factory=Timing)


def load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _backend(request: ChildRequest):
    from enginewright.backends import get_backend

    return get_backend(request.backend, **request.backend_options)


def build(request: ChildRequest) -> dict:
    from enginewright.api.models import InputShape
    from enginewright.backends.base import BuildRequest

    if request.model is None:
        raise ValueError("a build request needs `model`, the model file to build (got none)")
    backend = _backend(request)
    workdir = Path(request.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sample = load_npz(request.inputs[0]) if request.inputs else None
    engine = backend.build(
        BuildRequest(
            model_path=Path(request.model),
            settings=request.settings,
            input_shapes=[InputShape.model_validate(s) for s in request.input_shapes],
            workdir=workdir,
            sample_inputs=sample,
        ),
        request.route,
    )
    Path(request.engine).write_bytes(engine)
    return {"build_seconds": time.monotonic() - started, "engine_size": len(engine)}


def check(runner: Runner, request: ChildRequest, inputs: list[dict]) -> dict:
    """Run every reference pair and compare (no references: passed, nothing checked)."""
    if not request.references:
        return {"loss": None, "passed": True, "failing": []}
    if request.threshold is None:
        raise ValueError("a serve request with `references` needs `threshold`, the accuracy bound (got none)")
    from enginewright.accuracy import compare

    references = [load_npz(p) for p in request.references]
    outputs = [runner.run(pair) for pair in inputs]
    verdict = compare(
        outputs,
        references,
        request.metric,
        request.threshold,
        atol=request.atol,
        rtol=request.rtol,
        checked=request.outputs,
    )
    return {"loss": verdict.losses, "passed": verdict.passed, "failing": verdict.failing, "summary": verdict.summary()}


def serve(request: ChildRequest) -> None:
    """Hold engines loaded in this process and time them whenever the parent asks: paired rounds of
    a route against the default, confirmation rounds. The request's engine is loaded first (key
    `request.key`); the reply is one `ready` JSON line (versions, load info, accuracy, calls per
    round). Then one JSON request per stdin line, one JSON reply line each:

    - `{"op": "load", "key": K, "engine": PATH, "workdir": DIR, "check": bool}` loads another engine
      beside the others (optionally with its own `backend`/`backend_options`) and replies as `ready`;
    - `{"op": "time", "key": K}` -> `{"ms": per-call time of one round, "calls": calls per round
      from now on}`, timed as `timing.objective` says (no key: the first engine);
    - `{"op": "interleave", "keys": [A, B, ...]}` -> `{"ms": [A's, B's, ... per-call time],
      "calls": [their calls per round from now on]}`: one round of those engines, interleaved in
      blocks (`interleaved_round`);
    - a timed call that raises (`time`, `interleave`) -> `{"failed": the engine's key, "error": ...}`
      (the process goes on; a crash of the process names no engine);
    - `{"op": "measurements", "key": K}` -> latency, throughput and device time;
    - `{"op": "drop", "key": K}` closes that engine -> `{"dropped": K}`.

    Engines timed against each other share this process and its one thread: two processes holding
    the same engine ran lastingly apart on the H200 (up to 1.7x in gpuTime, by the CPU each process's
    thread sat on; bench/process_offsets.py), so a route timed in a process of its own against the
    default in another measured the processes, not the engines. A round lasts about
    `timing.roundSeconds`: one short burst of host noise must not decide it."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else the libraries print goes to the log, not into the protocol

    def say(message: dict) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    timing = request.timing
    objective = timing.objective.value
    inputs = [load_npz(p) for p in request.inputs]
    engines: dict[str, Held] = {}

    def failed(exc: Exception) -> dict:
        traceback.print_exc()
        return {"ready": False, "error": f"{type(exc).__name__}: {exc}".strip()[:4000]}

    def answer(timed) -> dict:
        """The reply of a timing request, or which engine's call raised."""
        try:
            return timed()
        except EngineFailed as exc:
            traceback.print_exc()
            return {"failed": exc.key, "error": str(exc)}

    try:
        say(
            load(
                engines,
                request.key,
                Path(request.engine),
                Path(request.workdir) / "load",
                request.check,
                _backend(request),
                request,
                inputs,
            )
        )
    except Exception as exc:
        say(failed(exc))
        return
    for line in sys.stdin:
        message = json.loads(line) if line.strip() else {}
        op, key = message.get("op"), message.get("key", request.key)
        if op == "load":
            backend_request = request.model_copy(
                update={k: message[k] for k in ("backend", "backend_options") if k in message}
            )
            try:
                say(
                    load(
                        engines,
                        key,
                        Path(message["engine"]),
                        Path(message["workdir"]),
                        bool(message.get("check", True)),
                        _backend(backend_request),
                        request,
                        inputs,
                    )
                )
            except Exception as exc:
                say(failed(exc))
        elif op == "time":
            held = engines[key]
            say(
                answer(lambda: {"ms": held.round(objective, inputs[0], timing.round_seconds), "calls": held.calls})
            )  # (calls after the round: it may re-size them)
        elif op == "interleave":
            many = [engines[k] for k in message["keys"]]
            say(
                answer(
                    lambda: {
                        "ms": interleaved_round(many, objective, inputs[0], timing.round_seconds),
                        "calls": [h.calls for h in many],
                    }
                )
            )
        elif op == "measurements":
            say({"measurements": measure_all(engines[key].runner, inputs[0], timing.round_seconds).wire()})
        elif op == "drop":
            engines.pop(key).runner.close()
            gc.collect()  # what the engine's compiled code still held (device memory included)
            say({"dropped": key})
        else:
            break
    for held in reversed(list(engines.values())):
        held.runner.close()


WARM_SHARE = 0.5  # untimed calls before each round, for this share of `roundSeconds`
SPIN_SHARE = 0.2  # other threads busy for more than this share of a block's wall time: wait for them


@dataclass
class Held:
    """An engine loaded in the serving process, and the calls that fill one of its rounds."""

    runner: Runner
    calls: int = 1
    key: str = ""

    def timed_calls(self, objective: str, inputs: dict, calls: int) -> float:
        """The runner's `timed_calls`; a call that raises is an EngineFailed naming this engine."""
        try:
            return self.runner.timed_calls(objective, inputs, calls)
        except Exception as exc:
            raise EngineFailed(self.key, exc) from exc

    def round(self, objective: str, inputs: dict, round_seconds: float) -> float:
        """One timed round (ms per call). The thread sat idle while other engines ran (or the parent
        waited), so untimed calls come first, for WARM_SHARE of a round of wall time: on the H200 a
        launch-bound engine read up to 30% slower in rounds begun straight after idling, and the
        slowdown lasts a time, not a number of calls. A slow engine (under 5 calls a round) is not
        paid twice. Then the calls per round follow the wall time rounds really take: a count
        calibrated while the host was busy (other engines loading) made rounds of a few
        milliseconds, mostly warm-up, and their times read apart from the other engines'."""
        warm_in_turns([self], objective, inputs, round_seconds)
        started = time.perf_counter()
        ms = self.timed_calls(objective, inputs, self.calls) / self.calls
        self.follow(time.perf_counter() - started, self.calls, round_seconds)
        return ms

    def follow(self, took: float, calls: int, round_seconds: float) -> None:
        """Calls per round from now on, from `calls` having taken `took` seconds of wall time."""
        if round_seconds > 0 and not 0.7 <= max(took, 1e-6) / round_seconds <= 1.5:
            self.calls = calls_to_fill(round_seconds, max(took, 1e-6) / calls)


def warm_in_turns(held: list[Held], objective: str, inputs: dict, round_seconds: float) -> None:
    """Untimed calls of the engines of 5 calls a round or more (a slow engine, a call or so a round,
    is not paid twice), taking turns, a tenth of a round's calls at a time, for WARM_SHARE of a
    round of wall time."""
    warmed = [h for h in held if h.calls >= 5]
    until = time.perf_counter() + WARM_SHARE * round_seconds
    while warmed and time.perf_counter() < until:
        for h in warmed:
            h.timed_calls(objective, inputs, max(1, h.calls // 10))


def interleaved_round(held: list[Held], objective: str, inputs: dict, round_seconds: float) -> list[float]:
    """One round of several engines of this process, interleaved: 10 blocks of each
    (`Runner.interleave_blocks`; fewer when an engine's round has fewer calls), taking turns in the
    order given (A, B, A, B, ...), each block an equal share of the engine's round of calls, after
    untimed calls of each (of 5 calls a round or more), taking turns, for WARM_SHARE of a round.
    Returns each engine's per-call time (ms) over its blocks. The engines are timed within milliseconds of each other, so what drifts on the
    host meanwhile hits them alike and cancels in their ratios: on the H200 a launch-bound engine's
    rounds ranged 0.19-0.53 ms within seconds, and copies of one engine timed in whole rounds one
    after the other read 0.93-0.99 of each other (95% intervals up to ±10%), in interleaved rounds
    0.98-1.00 (±1.5%; bench/process_offsets.py, `pairs`). A block starts only once the other
    threads of the process are quiet, when they used more than SPIN_SHARE of a core during the last
    block (a runtime's worker threads, spinning after a run, would slow the next engine's block;
    one read of their CPU time per block, which /proc shows a tick or so late: threads that spun
    through a block of a few ms can go unseen; rounds' blocks are tens of ms); a runner whose
    threads do so keeps its blocks few (`Runner.interleave_blocks`)."""
    me, own = os.getpid(), threading.get_native_id()
    others, since = cpu_nanoseconds(me, but=own), time.perf_counter()
    warm_in_turns(held, objective, inputs, round_seconds)
    # (an engine of a call a round: one block; a runner whose threads spin after a run: its own)
    blocks = max(1, min([*(h.calls for h in held), *(h.runner.interleave_blocks for h in held)]))

    totals, counts, walls = [0.0] * len(held), [0] * len(held), [0.0] * len(held)
    for _ in range(blocks):
        for index, h in enumerate(held):
            # Other threads of the process that kept a core busy since the last block or the warm-up
            # (a runtime's worker threads spin on after a run; ONNX Runtime's do): let them stop first.
            now = cpu_nanoseconds(me, but=own)
            window = (time.perf_counter() - since) * 1e9
            if others is not None and now is not None and now - others > SPIN_SHARE * window:
                wait_quiet(me, but=own)
                now = cpu_nanoseconds(me, but=own)
            others, since = now, time.perf_counter()
            calls = max(1, h.calls // blocks)
            started = time.perf_counter()
            totals[index] += h.timed_calls(objective, inputs, calls)
            walls[index] += time.perf_counter() - started
            counts[index] += calls
    for h, wall, count in zip(held, walls, counts):
        h.follow(wall, count, round_seconds)
    return [total / count for total, count in zip(totals, counts)]


class EngineFailed(Exception):
    """A timed call of one engine raised: the reply names that engine (`failed`)."""

    def __init__(self, key: str, cause: Exception):
        super().__init__(f"{type(cause).__name__}: {cause}".strip()[:4000])
        self.key = key


def load(
    engines: dict[str, Held],
    key: str,
    engine: Path,
    workdir: Path,
    checked: bool,
    backend,
    request: ChildRequest,
    inputs: list[dict],
) -> dict:
    """Load one engine from its bytes into `engines[key]`, check its accuracy (when `checked`), warm it
    up and find how many calls fill a round; the `ready` reply. An engine that fails is closed again."""
    if key in engines:
        raise ValueError(f"an engine is already loaded as {key!r}")
    started = time.monotonic()
    runner = backend.load(engine.read_bytes(), workdir)
    try:
        runner.run(inputs[0])  # first call: lazy compilers finish loading here
        load_info = {"load_seconds": round(time.monotonic() - started, 3), **runner.describe()}
        ready = {
            "ready": True,
            "key": key,
            "versions": backend.versions().wire(),
            "load_info": load_info,
            **check(runner, request if checked else request.model_copy(update={"references": []}), inputs),
        }
        # Rejected routes are timed too: the report plots every route's time against its loss.
        objective = request.timing.objective.value
        warm_up(runner, inputs[0], objective, request.timing.warmup_iterations)
        ready["calls"] = calls_per_round(runner, inputs[0], objective, request.timing.round_seconds)
    except BaseException:
        runner.close()
        raise
    engines[key] = Held(runner, ready["calls"], key)
    return ready


ACTIONS = {"build": build}


def main(argv: list[str]) -> int:
    request = ChildRequest.model_validate_json(Path(argv[1]).read_text())
    if request.action == "serve":
        serve(request)
        return 0
    if request.result is None:
        raise ValueError(f"a {request.action} request needs `result`, the file its JSON result goes to (got none)")
    out = Path(request.result)
    try:
        result = {"ok": True, **ACTIONS[request.action](request)}
    except Exception as exc:  # recorded as build-failed / crash by the parent, with the message
        result = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}".strip()[:4000],
            "traceback": traceback.format_exc()[-4000:],
        }
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
