"""What the worker's host can hold: the cores and memory this process may use (a cgroup v2 pod's
limits, a cpuset), and how many routes `tune --build-parallelism auto` builds at once from them. (A
cgroup v1 host's limits are not read: there the host's figures count.)"""

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
        cpu_max = _read(CGROUP / "cpu.max")
    quota, _, period = cpu_max.strip().partition(" ")
    if quota.isdigit() and period.isdigit() and int(period) > 0:
        return max(1, min(affinity, -(-int(quota) // int(period))))
    return max(1, affinity)


def usable_memory(memory_max: str | None = None, meminfo: str | None = None, memory_current: str | None = None) -> int:
    """Bytes this process may still use: the host's available memory (`MemAvailable`), capped by
    what is left under a cgroup v2 memory limit (`memory.max` less `memory.current`, as a pod's
    memory limit sets it; "max": none)."""
    if memory_max is None:
        memory_max = _read(CGROUP / "memory.max")
    if memory_current is None:
        memory_current = _read(CGROUP / "memory.current")
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


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
