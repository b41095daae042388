"""One route step in an isolated child process, so that a crash, hang or out-of-memory in one route
is recorded and the batch goes on.

    python -m enginewright.worker.child REQUEST.json

`build`: compile the route and write the engine bytes. `measure`: load engine bytes in this fresh
process (never a rebuild), run every reference pair, check accuracy, then time it. `confirm`: load
several engines and time them interleaved, round after round. The result is written as JSON to
the request's `result` path; a child that dies leaves no result and the parent records a crash.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path

import numpy as np


def load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _backend(request: dict):
    from enginewright.backends import get_backend
    return get_backend(request["backend"], **request.get("backend_options", {}))


def _plan(request: dict):
    from enginewright.backends.base import TimingPlan
    return TimingPlan(**request["timing"])


def build(request: dict) -> dict:
    from enginewright.api.models import InputShape
    from enginewright.backends.base import BuildRequest
    backend = _backend(request)
    workdir = Path(request["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sample = load_npz(request["inputs"][0]) if request.get("inputs") else None
    engine = backend.build(BuildRequest(model_path=Path(request["model"]), settings=request.get("settings", {}),
                                        input_shapes=[InputShape.model_validate(s) for s in request.get("input_shapes", [])],
                                        workdir=workdir, sample_inputs=sample), request["route"])
    Path(request["engine"]).write_bytes(engine)
    return {"build_seconds": time.monotonic() - started, "engine_size": len(engine)}


def measure(request: dict) -> dict:
    from enginewright.accuracy import compare
    from enginewright.backends.base import measure as time_runner
    backend = _backend(request)
    started = time.monotonic()
    runner = backend.load(Path(request["engine"]).read_bytes(), Path(request["workdir"]) / "load")
    try:
        inputs = [load_npz(p) for p in request["inputs"]]
        runner.run(inputs[0])  # first call: lazy compilers finish loading here
        load_info = {"load_seconds": round(time.monotonic() - started, 3), **runner.describe()}
        result: dict = {"versions": backend.versions().wire(), "load_info": load_info}
        if request.get("references"):
            references = [load_npz(p) for p in request["references"]]
            outputs = [runner.run(pair) for pair in inputs]
            verdict = compare(outputs, references, request["metric"], request["threshold"],
                              atol=request.get("atol", 1e-5), rtol=request.get("rtol", 1e-5))
            result.update(loss=verdict.losses, passed=verdict.passed, failing=verdict.failing,
                          summary=verdict.summary())
            if not verdict.passed and not request.get("time_rejected", True):
                return result
        else:
            runner.run(inputs[0])
            result.update(loss=None, passed=True, failing=[])
        result["timing"] = time_runner(runner, inputs[0], _plan(request)).wire()
        return result
    finally:
        runner.close()


def confirm(request: dict) -> dict:
    """Interleaved rounds: every round times each engine once (A B C, A B C, ...), rotating the
    start so no engine always runs right after the same neighbour."""
    from dataclasses import replace
    from enginewright.backends.base import measure as time_runner
    backend = _backend(request)
    inputs = load_npz(request["inputs"][0])
    runners = {rid: backend.load(Path(path).read_bytes(), Path(request["workdir"]) / rid)
               for rid, path in request["engines"].items()}
    plan = replace(_plan(request), repeats=1, min_seconds=0.0)
    ids = list(runners)
    rounds: dict[str, list[float]] = {rid: [] for rid in ids}
    try:
        for runner in runners.values():  # warm every engine before round 1
            time_runner(runner, inputs, plan)
        for index in range(request["rounds"]):
            order = ids[index % len(ids):] + ids[:index % len(ids)]
            for rid in order:
                rounds[rid].append(time_runner(runners[rid], inputs, plan).median_ms)
    finally:
        for runner in runners.values():
            runner.close()
    return {"rounds": rounds, "versions": backend.versions().wire()}


ACTIONS = {"build": build, "measure": measure, "confirm": confirm}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text())
    out = Path(request["result"])
    try:
        result = {"ok": True, **ACTIONS[request["action"]](request)}
    except Exception as exc:  # recorded as build-failed / crash by the parent, with the message
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}".strip()[:4000],
                  "traceback": traceback.format_exc()[-4000:]}
    out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
