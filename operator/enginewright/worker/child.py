"""One route step in an isolated child process, so that a crash, hang or out-of-memory in one route
is recorded and the batch goes on.

    python -m enginewright.worker.child REQUEST.json

`build`: compile the route and write the engine bytes; the result is written as JSON to the
request's `result` path (a child that dies leaves none and the parent records a crash). `serve`: load
engine bytes in this fresh process (never a rebuild), run every reference pair and check accuracy,
warm up, then hold the engine and time it whenever the parent asks (paired rounds, confirmation
rounds).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from enginewright.api.models import Timing


class ChildRequest(BaseModel):
    """What the worker hands a child process (one JSON file); the one place its fields and defaults
    are written."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["build", "serve"]
    backend: str
    backend_options: dict = Field(default_factory=dict)
    workdir: str
    result: str | None = Field(None, description="Where build writes its JSON result.")
    engine: str = Field(description="build: where to write the engine; serve: the engine to load.")
    model: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    input_shapes: list[dict] = Field(default_factory=list)
    route: dict[str, str] = Field(default_factory=dict)
    inputs: list[str] = Field(default_factory=list, description=".npz files of the reference inputs.")
    references: list[str] = Field(default_factory=list, description="Empty: accuracy is not checked.")
    metric: str = "cosine"
    threshold: float | None = None
    atol: float = 1e-5
    rtol: float = 1e-5
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
    backend = _backend(request)
    workdir = Path(request.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sample = load_npz(request.inputs[0]) if request.inputs else None
    engine = backend.build(BuildRequest(model_path=Path(request.model), settings=request.settings,
                                        input_shapes=[InputShape.model_validate(s) for s in request.input_shapes],
                                        workdir=workdir, sample_inputs=sample), request.route)
    Path(request.engine).write_bytes(engine)
    return {"build_seconds": time.monotonic() - started, "engine_size": len(engine)}


def check(runner, request: ChildRequest, inputs: list[dict]) -> dict:
    """Run every reference pair and compare (no references: passed, nothing checked)."""
    if not request.references:
        return {"loss": None, "passed": True, "failing": []}
    from enginewright.accuracy import compare
    references = [load_npz(p) for p in request.references]
    outputs = [runner.run(pair) for pair in inputs]
    verdict = compare(outputs, references, request.metric, request.threshold, atol=request.atol, rtol=request.rtol)
    return {"loss": verdict.losses, "passed": verdict.passed, "failing": verdict.failing, "summary": verdict.summary()}


def serve(request: ChildRequest) -> None:
    """Load one engine, check it, warm it up and find how many calls fill a round; reply one `ready`
    JSON line (versions, load info, accuracy, calls per round), then answer requests read from stdin,
    one JSON line each: `{"op": "time"}` -> `{"ms": per-call time of one round}` (timed as
    `timing.objective` says), `{"op": "measurements"}` -> latency, throughput and device time. One
    engine per process, so engines timed against each other cannot slow each other down (several
    torch.compile'd copies of one program in one process add guard-checking overhead to every call;
    the H200 benchmark saw it). A round lasts about `timing.roundSeconds`: one short burst of host
    noise must not decide it."""
    import os
    from enginewright.backends.base import calls_per_round, measure_all, time_round, warm_up
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else the libraries print goes to the log, not into the protocol

    def say(message: dict) -> None:
        reply.write(json.dumps(message) + "\n")
        reply.flush()

    timing = request.timing
    objective = timing.objective.value
    try:
        backend = _backend(request)
        started = time.monotonic()
        runner = backend.load(Path(request.engine).read_bytes(), Path(request.workdir) / "load")
        inputs = [load_npz(p) for p in request.inputs]
        runner.run(inputs[0])  # first call: lazy compilers finish loading here
        load_info = {"load_seconds": round(time.monotonic() - started, 3), **runner.describe()}
        ready = {"ready": True, "versions": backend.versions().wire(), "load_info": load_info,
                 **check(runner, request, inputs)}
        # Rejected routes are timed too: the report plots every route's time against its loss.
        warm_up(runner, inputs[0], objective, timing.warmup_iterations)
        ready["calls"] = calls = calls_per_round(runner, inputs[0], objective, timing.round_seconds)
    except Exception as exc:
        say({"ready": False, "error": f"{type(exc).__name__}: {exc}".strip()[:4000]})
        traceback.print_exc()
        return
    say(ready)
    for line in sys.stdin:
        op = json.loads(line).get("op") if line.strip() else None
        if op == "time":
            # The process sat idle while the other engines of the round ran: a few untimed calls first
            # bring its host thread, caches and clocks back before the timed stretch.
            if calls >= 5:  # (a slow engine, one call a round, is not paid twice)
                runner.timed_calls(objective, inputs[0], calls // 5)
            say({"ms": time_round(runner, inputs[0], objective, calls)})
        elif op == "measurements":
            say({"measurements": measure_all(runner, inputs[0], timing.round_seconds).wire()})
        else:
            break
    runner.close()


ACTIONS = {"build": build}


def main(argv: list[str]) -> int:
    request = ChildRequest.model_validate_json(Path(argv[1]).read_text())
    if request.action == "serve":
        serve(request)
        return 0
    out = Path(request.result)
    try:
        result = {"ok": True, **ACTIONS[request.action](request)}
    except Exception as exc:  # recorded as build-failed / crash by the parent, with the message
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip()[:4000],
                  "traceback": traceback.format_exc()[-4000:]}
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
