"""One route step in an isolated child process, so that a crash, hang or out-of-memory in one route
is recorded and the batch goes on.

    python -m enginewright.worker.child REQUEST.json

`build`: compile the route and write the engine bytes. `measure`: load engine bytes in this fresh
process (never a rebuild), run every reference pair, check accuracy, then time it. The result is
written as JSON to the request's `result` path; a child that dies leaves no result and the parent
records a crash. `serve`: hold one engine and time it whenever the parent asks (confirmation rounds).
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

    action: Literal["build", "measure", "serve"]
    backend: str
    backend_options: dict = Field(default_factory=dict)
    workdir: str
    result: str | None = Field(None, description="Where build/measure write their JSON result.")
    engine: str = Field(description="build: where to write the engine; measure/serve: the engine to load.")
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


def _plan(request: ChildRequest):
    from enginewright.backends.base import TimingPlan
    return TimingPlan(**request.timing.model_dump())


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


def measure(request: ChildRequest) -> dict:
    from enginewright.accuracy import compare
    from enginewright.backends.base import measure as time_runner
    backend = _backend(request)
    started = time.monotonic()
    runner = backend.load(Path(request.engine).read_bytes(), Path(request.workdir) / "load")
    try:
        inputs = [load_npz(p) for p in request.inputs]
        runner.run(inputs[0])  # first call: lazy compilers finish loading here
        load_info = {"load_seconds": round(time.monotonic() - started, 3), **runner.describe()}
        result: dict = {"versions": backend.versions().wire(), "load_info": load_info}
        if request.references:
            references = [load_npz(p) for p in request.references]
            outputs = [runner.run(pair) for pair in inputs]
            verdict = compare(outputs, references, request.metric, request.threshold,
                              atol=request.atol, rtol=request.rtol)
            result.update(loss=verdict.losses, passed=verdict.passed, failing=verdict.failing,
                          summary=verdict.summary())
        else:
            result.update(loss=None, passed=True, failing=[])
        # Rejected routes are timed too: the report plots every route's time against its loss.
        result["timing"] = time_runner(runner, inputs[0], _plan(request)).wire()
        return result
    finally:
        runner.close()


def serve(request: ChildRequest) -> None:
    """Hold one loaded engine and time it on request: the parent sends `measure` lines on stdin and
    reads one JSON line per measurement from stdout. One engine per process, so engines measured in
    the same confirmation round cannot slow each other down (several torch.compile'd copies of one
    program in one process add guard-checking overhead to every call; the H200 benchmark saw it).
    A round times repeats of `iterations` runs until `min_seconds` were timed (one repeat at least):
    one short repeat (15 ms for a 0.3 ms engine) let a single burst of host noise decide a round."""
    import os
    from dataclasses import replace
    from enginewright.backends.base import measure as time_runner
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else the libraries print goes to the log, not into the protocol
    backend = _backend(request)
    runner = backend.load(Path(request.engine).read_bytes(), Path(request.workdir))
    inputs = load_npz(request.inputs[0])
    plan = _plan(request)
    time_runner(runner, inputs, replace(plan, repeats=1, min_seconds=0.0))  # warm: cache load, first calls
    round_plan = replace(plan, warmup_iterations=0, repeats=1)  # repeats until min_seconds were timed
    reply.write(json.dumps({"ready": True}) + "\n")
    reply.flush()
    for line in sys.stdin:
        if line.strip() != "measure":
            break
        reply.write(json.dumps({"median_ms": time_runner(runner, inputs, round_plan).median_ms}) + "\n")
        reply.flush()
    runner.close()


ACTIONS = {"build": build, "measure": measure}


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
