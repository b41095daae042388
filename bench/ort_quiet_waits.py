"""What the quiet waits cost an ONNX Runtime engine's interleaved rounds (issue 19, ask 7): how long
an ONNX Runtime session's intra-op threads stay runnable after a run (they spin), how long
`measure.quiet.wait_quiet` then waits, and one interleaved round of several loads of one engine
(`measure.rounds.interleaved_round`, the serving process's own) against its calls alone.

    python bench/ort_quiet_waits.py MODEL.onnx INPUTS.npz [--loads 4] [--rounds 15] [--round-seconds 0.05]

MODEL: an ONNX model (e.g. bench/measure_cost.py's OUT/model/db_text_detector.onnx), built here as
the default route with the product's backend; INPUTS: its inputs (`inputs-0.npz`). Prints each
trial and round, then the medians: a round's wall time, the share of it spent in quiet waits, and
the calls' own share (the warm-up of WARM_SHARE of a round plus each load's round of calls).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

import numpy as np  # noqa: E402

import enginewright.measure.rounds as rounds_module  # noqa: E402
from enginewright.backends.base import BuildRequest  # noqa: E402
from enginewright.backends.onnxruntime import OnnxRuntimeBackend  # noqa: E402
from enginewright.measure.quiet import sample, wait_quiet  # noqa: E402
from enginewright.measure.rounds import Held, interleaved_round  # noqa: E402
from enginewright.measure.timing import WARM_SHARE, calls_per_round, warm_up  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path)
    parser.add_argument("inputs", type=Path)
    parser.add_argument("--loads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--round-seconds", type=float, default=0.05)
    args = parser.parse_args()
    inputs = dict(np.load(args.inputs))
    backend = OnnxRuntimeBackend()
    work = Path(tempfile.mkdtemp(prefix="ort-quiet-"))
    engine = backend.build(BuildRequest(args.model, workdir=work), {})
    me, own = os.getpid(), threading.get_native_id()

    # 1. one session: how long its threads stay runnable after a run, and what wait_quiet waits
    runner = backend.load(engine, work / "alone")
    for _ in range(20):
        runner.run(inputs)
    runnable, waited = [], []
    for _ in range(5):
        for _ in range(10):
            runner.run(inputs)
        began, trace = time.perf_counter(), []
        while time.perf_counter() - began < 0.15:
            trace.append((time.perf_counter() - began, sample(me, but=own)[1]))
            time.sleep(0.002)
        runnable.append(max([t for t, r in trace if r] or [0.0]) * 1000)
        runner.run(inputs)
        began = time.perf_counter()
        wait_quiet(me, but=own)
        waited.append((time.perf_counter() - began) * 1000)
        print(f"after a run: threads runnable for {runnable[-1]:.0f} ms; wait_quiet waited {waited[-1]:.0f} ms")
    runner.close()

    # 2. interleaved rounds of `loads` loads of the engine, as the serving process times them
    held = []
    for i in range(args.loads):
        r = backend.load(engine, work / f"load-{i}")
        r.run(inputs)
        warm_up(r, inputs, "gpuTime", 10)
        calls = held[0].calls if held else calls_per_round(r, inputs, "gpuTime", args.round_seconds)
        held.append(Held(r, calls, f"load-{i}"))
    spent = [0.0]
    real_wait = rounds_module.wait_quiet

    def counted(*a, **k):
        began = time.perf_counter()
        try:
            return real_wait(*a, **k)
        finally:
            spent[0] += time.perf_counter() - began

    rounds_module.wait_quiet = counted
    nominal = WARM_SHARE * args.round_seconds + args.loads * args.round_seconds
    walls, shares = [], []
    for n in range(args.rounds):
        spent[0] = 0.0
        began = time.perf_counter()
        ms = interleaved_round(held, "gpuTime", inputs, args.round_seconds)
        wall = time.perf_counter() - began
        walls.append(wall)
        shares.append(spent[0] / wall)
        print(
            f"round {n}: {wall * 1000:.0f} ms (calls and warm-up: ~{nominal * 1000:.0f}), quiet waits "
            f"{spent[0] * 1000:.0f} ms, calls {[h.calls for h in held]}, ms a call {[round(m, 2) for m in ms]}"
        )
    print(
        f"\nmedians: threads runnable {statistics.median(runnable):.0f} ms after a run; wait_quiet "
        f"{statistics.median(waited):.0f} ms; a round of {args.loads} loads {statistics.median(walls) * 1000:.0f} ms "
        f"({statistics.median(walls) / nominal:.2f}x its calls and warm-up), quiet waits "
        f"{statistics.median(shares):.0%} of it"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
