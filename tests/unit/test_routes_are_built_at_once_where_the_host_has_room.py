"""Where no build parallelism is asked for, the worker builds as many routes at once as the host's
usable cores and memory hold (a GPU node's 16 cores: 4; this 2-core host: 1): parallel builds cut
tune's wall time on an H100 to 0.882x and 0.937x (issue 19, session 31), and building never overlaps
measuring, so the width changes what a batch costs, not what it measures."""

from pathlib import Path

from enginewright.cli import build_parser
from enginewright.worker.capacity import auto_build_parallelism, usable_memory
from enginewright.worker.context import WorkerContext

GIB = 1 << 30


def test_the_width_follows_the_cores_and_the_memory():
    assert auto_build_parallelism(cores=16, memory=120 * GIB) == 4  # the H100's host
    assert auto_build_parallelism(cores=2, memory=20 * GIB) == 1  # this host, CI's
    assert auto_build_parallelism(cores=8, memory=120 * GIB) == 2
    assert auto_build_parallelism(cores=128, memory=1000 * GIB) == 4  # at most 4
    assert auto_build_parallelism(cores=16, memory=9 * GIB) == 2  # a pod's memory limit holds two builds
    assert auto_build_parallelism(cores=16, memory=GIB) == 1  # never none


def test_usable_memory_is_the_pods_limit_or_what_the_host_has_left():
    meminfo = "MemTotal:       131072000 kB\nMemAvailable:   100000000 kB\n"
    assert usable_memory("8589934592\n", meminfo) == 8 * GIB  # a pod limited to 8 GiB
    assert usable_memory("max\n", meminfo) == 100000000 * 1024  # no limit: what the host has left
    assert usable_memory("", "") > 0  # neither file: room for one build


def test_a_worker_and_tune_take_the_hosts_width_unless_one_is_given(tmp_path: Path):
    ctx = WorkerContext(
        backend="onnxruntime", model=tmp_path / "m", accuracy=None, store=None, prefix="p", target="t", workdir=tmp_path
    )
    assert ctx.build_parallelism == auto_build_parallelism()
    args = build_parser().parse_args(
        ["tune", "model.onnx", "--backend", "onnxruntime", "--inputs", "i.npz", "--references", "r.npz"]
    )
    assert args.build_parallelism is None  # tune decides from the host
    args = build_parser().parse_args(
        [
            "tune",
            "model.onnx",
            "--backend",
            "onnxruntime",
            "--inputs",
            "i.npz",
            "--references",
            "r.npz",
            "--build-parallelism",
            "3",
        ]
    )
    assert args.build_parallelism == 3
