"""`tune` builds as many routes at once as the host's usable cores and memory hold (`--build-parallelism
auto`, the default; a GPU node's 16 cores: 4; this 2-core host: 1): on an H100 that cut tune's wall
time to 0.882x and 0.937x (issue 19, session 31), and the MLP's engines built 4 at a time ran 1.001x
those built alone (95% 0.990-1.013, session 32). An operator's worker Job builds one at a time unless
its spec.search.buildParallelism says (its pod asks for one build's room)."""

from pathlib import Path

import pytest

from enginewright.cli import build_parser
from enginewright.worker.capacity import auto_build_parallelism, cpu_max_of, memory_of, usable_cores, usable_memory
from enginewright.worker.context import WorkerContext

GIB = 1 << 30
TUNE = ["tune", "model.onnx", "--backend", "onnxruntime", "--inputs", "i.npz", "--references", "r.npz"]


def test_the_width_follows_the_cores_and_the_memory():
    assert auto_build_parallelism(cores=16, memory=120 * GIB) == 4  # the H100's host
    assert auto_build_parallelism(cores=2, memory=20 * GIB) == 1  # this host, CI's
    assert auto_build_parallelism(cores=8, memory=120 * GIB) == 2
    assert auto_build_parallelism(cores=128, memory=1000 * GIB) == 4  # at most 4
    assert auto_build_parallelism(cores=16, memory=9 * GIB) == 2  # a pod's memory limit holds two builds
    assert auto_build_parallelism(cores=16, memory=GIB) == 1  # never none


def test_usable_memory_is_what_is_left_under_the_pods_limit_or_on_the_host():
    meminfo = "MemTotal:       131072000 kB\nMemAvailable:   100000000 kB\n"
    assert usable_memory(("8589934592\n", "0\n"), meminfo) == 8 * GIB  # a pod limited to 8 GiB, nothing used
    assert usable_memory(("8589934592\n", str(3 * GIB)), meminfo) == 5 * GIB  # 3 GiB of it used already
    assert usable_memory(("max\n", str(3 * GIB)), meminfo) == 100000000 * 1024  # no limit: what the host has left
    assert usable_memory(("", ""), "") > 0  # no file at all: room for one build


def cgroup(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return root


def test_a_cgroup_v1_pods_limits_count_as_a_v2_pods_do(tmp_path: Path):
    """A pod limited to 2 CPUs and 8 GiB on a 64-core node that still runs cgroup v1: its quota and
    what is left under its limit, not the node's cores, decide the builds (and ONNX Runtime's threads)."""
    meminfo = "MemAvailable:   500000000 kB\n"
    v1 = cgroup(
        tmp_path / "v1",
        {
            "cpu,cpuacct/cpu.cfs_quota_us": "200000",
            "cpu,cpuacct/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": str(8 * GIB),
            "memory/memory.usage_in_bytes": str(3 * GIB),
        },
    )
    assert usable_cores(64, cpu_max_of(v1)) == 2
    assert usable_memory(memory_of(v1), meminfo) == 5 * GIB
    v2 = cgroup(
        tmp_path / "v2", {"cpu.max": "200000 100000", "memory.max": str(8 * GIB), "memory.current": str(3 * GIB)}
    )
    assert cpu_max_of(v2).split() == cpu_max_of(v1).split() and memory_of(v2) == memory_of(v1)
    unlimited = cgroup(
        tmp_path / "none",
        {
            "cpu/cpu.cfs_quota_us": "-1",
            "cpu/cpu.cfs_period_us": "100000",
            "memory/memory.limit_in_bytes": "9223372036854771712",
            "memory/memory.usage_in_bytes": str(GIB),
        },
    )
    assert usable_cores(64, cpu_max_of(unlimited)) == 64
    assert usable_memory(memory_of(unlimited), meminfo) == 500000000 * 1024
    assert cpu_max_of(tmp_path / "absent") == "" and usable_cores(6, cpu_max_of(tmp_path / "absent")) == 6


def test_tune_builds_as_many_as_the_host_has_room_for_unless_asked_and_a_worker_job_one(tmp_path: Path):
    from enginewright.cli.tune import TuneOptions

    ctx = WorkerContext(
        backend="onnxruntime", model=tmp_path / "m", accuracy=None, store=None, prefix="p", target="t", workdir=tmp_path
    )
    assert ctx.build_parallelism == 1  # a Job's, unless its spec.search.buildParallelism says (its pod asks for 1 CPU)
    assert build_parser().parse_args(TUNE).build_parallelism is None  # tune's default: the host's room
    assert build_parser().parse_args([*TUNE, "--build-parallelism", "3"]).build_parallelism == 3
    assert build_parser().parse_args([*TUNE, "--build-parallelism", "auto"]).build_parallelism is None
    options = TuneOptions(backend="onnxruntime", model=tmp_path / "m", out=tmp_path, inputs=[])
    assert options.build_parallelism is None and options.spec().search.build_parallelism == auto_build_parallelism()
    assert (
        TuneOptions(backend="onnxruntime", model=tmp_path / "m", out=tmp_path, inputs=[], build_parallelism=3)
        .spec()
        .search.build_parallelism
        == 3
    )


@pytest.mark.parametrize("bad", ["0", "-2", "many"])
def test_a_build_parallelism_that_is_no_count_is_refused(bad, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*TUNE, "--build-parallelism", bad])
    assert "must be 'auto' or a whole number of 1 or more" in capsys.readouterr().err
