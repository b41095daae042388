"""The example model and reference data, and a helper that runs `enginewright tune` as a user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

FAST_TIMING = [
    "--warmup",
    "2",
    "--round-seconds",
    "0.01",
    "--min-rounds",
    "2",
    "--max-rounds",
    "3",
    "--confirm-loads",
    "2",
]


@pytest.fixture(scope="session")
def example(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    from make_example import write_example

    folder = tmp_path_factory.mktemp("example")
    write_example(folder)
    return folder


def tune_args(example: Path, out: Path, *extra: str, references: str = "references") -> list[str]:
    return [
        sys.executable,
        "-m",
        "enginewright",
        "tune",
        str(example / "mlp.onnx"),
        "--backend",
        "onnxruntime",
        "--inputs",
        str(example / "inputs-0.npz"),
        "--inputs",
        str(example / "inputs-1.npz"),
        "--references",
        str(example / f"{references}-0.npz"),
        "--references",
        str(example / f"{references}-1.npz"),
        "--metric",
        "cosine",
        "--threshold",
        "1e-4",
        "--setting",
        "intra_op_num_threads=1",
        "--out",
        str(out),
        *FAST_TIMING,
        *extra,
    ]


def recording_worker(example: Path, tmp_path: Path, monkeypatch, **timing):
    """A worker on the interval-recording test backend (`interval_backend`): every build, load and
    timed stretch of its children is written to the returned `intervals.jsonl`; `timing`: fields of
    `make_worker`'s timing to change."""
    intervals = tmp_path / "intervals.jsonl"
    monkeypatch.setenv("ENGINEWRIGHT_TEST_INTERVALS", str(intervals))
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", f"{repo}:{repo / 'operator'}")  # the children import the test backend
    worker = make_worker(example, tmp_path, timeout=120)
    worker.ctx.backend = "tests.worker.interval_backend:IntervalRecordingBackend"
    worker.ctx.timing = worker.ctx.timing.model_copy(update=timing)
    return worker, intervals


def make_worker(example: Path, tmp_path: Path, timeout: float = 120.0):
    """A Worker on the example model with a local store under `tmp_path` and short timing."""
    from enginewright.store import LocalStore
    from enginewright.worker.batch import Worker
    from enginewright.worker.context import Accuracy, WorkerContext

    return Worker(
        WorkerContext(
            backend="onnxruntime",
            model=example / "mlp.onnx",
            store=LocalStore(tmp_path / "store"),
            prefix="runs/x",
            target="cpu",
            workdir=tmp_path / "work",
            route_timeout=timeout,
            accuracy=Accuracy([example / "inputs-0.npz"], [example / "references-0.npz"], "cosine", 1e-4),
            timing={"warmup_iterations": 1, "round_seconds": 0.0, "min_rounds": 2, "max_rounds": 2},
        )
    )


def run_tune(example: Path, out: Path, *extra: str, references: str = "references") -> subprocess.CompletedProcess:
    return subprocess.run(
        tune_args(example, out, *extra, references=references), capture_output=True, text=True, timeout=600
    )
