"""What the worker's host can hold: the cores and memory this process may use (a pod's limits, in
cgroup v2's files or cgroup v1's, and a cpuset), and how many routes `tune --build-parallelism auto`
builds at once from them (and how many threads ONNX Runtime's space offers: `backends.onnxruntime`)."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
# A build (compiler threads, Inductor's codegen, a forked interpreter holding torch) and its share of
# the host beside the serving processes: a GPU node's 16 cores build 4 routes at once (the MLP on an
# H100: tune 0.882x and 0.937x its wall time with 4 against 1, issue 19, session 31), 2 to 7 cores 1.
CORES_PER_BUILD = 4
MEMORY_PER_BUILD = 4 << 30  # a forked build's compile and its share of torch: room, not a measured peak
MAX_AUTO_BUILDS = 4


def usable_cores(affinity: int | None = None, cpu_max: str | None = None) -> int:
    """The cores this process may use: its CPU affinity (a cpuset), capped by a cgroup v2 CPU quota
    (`cpu.max`, e.g. "200000 100000" = 2 cores, as a pod's CPU limit sets it), rounded up."""
    if affinity is None:
        affinity = len(os.sched_getaffinity(0))
    if cpu_max is None:
        cpu_max = cpu_max_of()
    quota, _, period = cpu_max.strip().partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        return max(1, min(affinity, -(-int(quota) // int(period))))
    return max(1, affinity)


def usable_memory(limit_and_usage: tuple[str, str] | None = None, meminfo: str | None = None) -> int:
    """Bytes this process may still use: the host's available memory (`MemAvailable`), capped by
    what is left under a pod's memory limit (`limit_and_usage`, as `memory_of` reads them: cgroup
    v2's `memory.max` and `memory.current`, or v1's; "max": none)."""
    memory_max, memory_current = memory_of() if limit_and_usage is None else limit_and_usage
    if meminfo is None:
        meminfo = _read(Path("/proc/meminfo"))
    available = next(
        (int(line.split()[1]) * 1024 for line in meminfo.splitlines() if line.startswith("MemAvailable:")), None
    )
    left = None
    if memory_max.strip().isdigit():
        used = int(memory_current) if memory_current.strip().isdigit() else 0
        left = max(0, int(memory_max) - used)
    limits = [v for v in (available, left) if v is not None]
    return min(limits) if limits else MEMORY_PER_BUILD  # (neither known: room for one build)


def auto_build_parallelism(cores: int | None = None, memory: int | None = None) -> int:
    """Routes built at once for `--build-parallelism auto`: one per CORES_PER_BUILD usable cores and
    per MEMORY_PER_BUILD of usable memory, 1 to MAX_AUTO_BUILDS. Timing never overlaps a build
    (`batch.Worker.run_batch`), but builds that time kernels to choose among them time them beside
    the other builds of their group."""
    cores = usable_cores() if cores is None else cores
    memory = usable_memory() if memory is None else memory
    return max(1, min(MAX_AUTO_BUILDS, cores // CORES_PER_BUILD, memory // MEMORY_PER_BUILD))


def cpu_max_of(root: Path = CGROUP) -> str:
    """The CPU quota of the cgroup mounted at `root` (a container's own), in cgroup v2's `cpu.max`
    notation ("QUOTA PERIOD"; "max PERIOD": none): v2's file, else cgroup v1's `cpu.cfs_quota_us`
    (-1: none) and `cpu.cfs_period_us` (GPU nodes on older distributions still run v1); "" where
    neither is there."""
    v2 = _read(root / "cpu.max")
    if v2.strip():
        return v2
    for folder in ("cpu", "cpu,cpuacct"):
        quota = _read(root / folder / "cpu.cfs_quota_us").strip()
        period = _read(root / folder / "cpu.cfs_period_us").strip()
        if quota and period:
            return f"{'max' if quota.startswith('-') else quota} {period}"
    return ""


def memory_of(root: Path = CGROUP) -> tuple[str, str]:
    """The memory limit and usage of the cgroup mounted at `root`: cgroup v2's `memory.max` and
    `memory.current`, else v1's `memory.limit_in_bytes` and `memory.usage_in_bytes` (no limit: a
    number near 2**63, larger than any host's memory); "" for a file that is not there."""
    v2 = _read(root / "memory.max")
    if v2.strip():
        return v2, _read(root / "memory.current")
    return _read(root / "memory" / "memory.limit_in_bytes"), _read(root / "memory" / "memory.usage_in_bytes")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
