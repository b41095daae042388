"""Three ONNX Runtime configurations of the measure-cost model, interleaved in one process: 12 rounds
in alternating order, 3 runs of each per round; prints each one's median and its median per-round
ratio to the default. Run after `bench/measure_cost.py`, which writes the model:

    taskset -c 0,1 python bench/ort_interleaved_check.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))
from enginewright.backends.onnxruntime import session_options  # noqa: E402

MODEL = REPO / "out/measure-cost/model"
CONFIGS = {
    "default": {},
    "mem_pattern=0": {"enable_mem_pattern": "0"},
    "spinning=0": {"session.intra_op.allow_spinning": "0"},
}


def main() -> None:
    inputs = dict(np.load(MODEL / "inputs-0.npz"))
    sessions = {
        name: ort.InferenceSession(
            str(MODEL / "db_text_detector.onnx"), session_options(settings), providers=["CPUExecutionProvider"]
        )
        for name, settings in CONFIGS.items()
    }
    for session in sessions.values():
        for _ in range(3):
            session.run(None, inputs)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for round_index in range(12):
        order = list(sessions) if round_index % 2 == 0 else list(sessions)[::-1]
        for name in order:
            started = time.perf_counter()
            for _ in range(3):
                sessions[name].run(None, inputs)
            times[name].append((time.perf_counter() - started) / 3 * 1000)
    for name, values in times.items():
        ratio = statistics.median(a / b for a, b in zip(values, times["default"]))
        print(
            f"{name:15s} median {statistics.median(values):7.2f} ms  min {min(values):7.2f}  "
            f"max {max(values):7.2f}  per-round ratio to default (median) {ratio:.3f}"
        )


if __name__ == "__main__":
    main()
