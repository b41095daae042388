"""Issue 19, goal 3: what moves a launch-bound route's per-call time on the host — the host CPU's
speed, the process, or the device?

    python bench/host_state.py --out OUT [--workload block] [--seconds 75] [--calls 200] [--device cuda|cpu]

One process, the plain loop of bench/winner_vs_plain.py (the workload's module under `torch.compile`,
the default's options and `triton.cudagraphs`, `--calls` calls timed by CUDA events), in turns for
`--seconds`. Around every turn, on the same thread, a fixed amount of host work is timed: `probe_c`
(SHA-256 of 1 MiB: native code, no allocation) and `probe_py` (a pure-Python loop of 20,000 steps),
and the turn records the thread's CPU time, its context switches, the CPU it ran on, the VM's steal
time (/proc/stat) and the load average. If the default's per-call time follows the probes, what moves
it is the host CPU's speed (its clock, or the hypervisor's sharing of the physical core): a property
of the serving host that no measuring protocol inside the guest can remove, only see. If it moves
while the probes hold still, the cause is in the process or the device, and can be chased.

OUT/host_state.json holds every turn and the correlations (Spearman) of the default's and the
winner's per-call time with each probe, written as it goes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

PROBE_BYTES = b"\x5a" * (1 << 20)


def probe_c() -> float:
    """ms for SHA-256 of 1 MiB (native code: the CPU's speed, nothing of Python's)."""
    started = time.perf_counter()
    hashlib.sha256(PROBE_BYTES).digest()
    return (time.perf_counter() - started) * 1000


def probe_py() -> float:
    """ms for 20,000 steps of a pure-Python loop (the interpreter's speed: a launch path's)."""
    started = time.perf_counter()
    total = 0
    for step in range(20_000):
        total += step ^ 3
    return (time.perf_counter() - started) * 1000


def steal_ticks() -> int | None:
    """The VM's steal time so far, all CPUs (clock ticks; /proc/stat's 8th field)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8])
    except (OSError, ValueError, IndexError):
        return None


def current_cpu() -> int | None:
    try:
        with open("/proc/thread-self/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def ranks(values: list[float]) -> list[float]:
    """Ranks from 0, equal values sharing their average rank (steal ticks are mostly 0: broken by
    turn order, their ties made a correlation with the turn's number)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for index in order[start : end + 1]:
            out[index] = (start + end) / 2
        start = end + 1
    return out


def spearman(a: list[float], b: list[float]) -> float | None:
    if len(a) < 3 or len(set(a)) < 2 or len(set(b)) < 2:
        return None
    return statistics.correlation(ranks(a), ranks(b))


def summary(turns: list[dict]) -> dict:
    """The correlations, and the default's time in the probes' fast and slow halves."""
    out: dict = {"turns": len(turns)}
    probe = [(t["probe_c_ms"] + t["probe_c_after_ms"]) / 2 for t in turns]
    probe_python = [(t["probe_py_ms"] + t["probe_py_after_ms"]) / 2 for t in turns]
    for name in ("default", "winner"):
        ms = [t[f"{name}_ms"] for t in turns]
        out[name] = {
            "median_ms": statistics.median(ms),
            "range_ms": [min(ms), max(ms)],
            "spearman_probe_c": spearman(ms, probe),
            "spearman_probe_py": spearman(ms, probe_python),
            "spearman_cpu_share": spearman(ms, [t[f"{name}_cpu_share"] for t in turns]),
            "spearman_steal": spearman(ms, [float(t["steal_ticks"] or 0) for t in turns]),
        }
    ratio = [t["default_ms"] / t["winner_ms"] for t in turns]
    out["ratio"] = {"median": statistics.median(ratio), "range": [min(ratio), max(ratio)]}
    out["spearman_ratio_probe_py"] = spearman(ratio, probe_python)
    if len(turns) >= 4:
        cut = statistics.median(probe_python)
        fast = [t["default_ms"] for t, p in zip(turns, probe_python) if p <= cut]
        slow = [t["default_ms"] for t, p in zip(turns, probe_python) if p > cut]
        out["default_ms_when_probe_py_fast"] = statistics.median(fast) if fast else None
        out["default_ms_when_probe_py_slow"] = statistics.median(slow) if slow else None
    out["probe_c_ms_range"] = [min(probe), max(probe)]
    out["probe_py_ms_range"] = [min(probe_python), max(probe_python)]
    out["cpus_seen"] = sorted({t["cpu"] for t in turns if t["cpu"] is not None})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="block")
    parser.add_argument("--seconds", type=float, default=75.0)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    began = time.monotonic()
    import torch
    import torch._inductor.config as config

    from engine_overhead import workloads as overhead_workloads
    from enginewright.backends.inductor import route_options

    cuda = args.device == "cuda"
    dtype = torch.float16 if cuda else torch.float32
    workload = overhead_workloads()[args.workload]
    torch.backends.mha.set_fastpath_enabled(False)  # the exported program's unfused layer (winner_vs_plain.py)
    torch.manual_seed(0)
    x = torch.randn(*workload.input_shape, device=args.device, dtype=dtype)
    runs = {}
    for name, knobs in (("default", {}), ("winner", {"triton.cudagraphs": "true"})):
        module = workload.make().eval().to(args.device).to(dtype)
        runs[name] = torch.compile(module, backend="inductor", options=route_options(config, knobs), dynamic=False)
    graphs = {"default": False, "winner": True}

    def call(name):
        if graphs[name]:
            torch.compiler.cudagraph_mark_step_begin()
        return runs[name](x)

    def timed(name) -> tuple[float, float]:
        """(ms per call, the thread's CPU time over the turn's wall time)."""
        if cuda:
            torch.cuda.synchronize()
        call(name)  # queued ahead, as in a serving loop
        cpu, wall = time.thread_time(), time.perf_counter()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        for _ in range(args.calls):
            call(name)
        if cuda:
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / args.calls
        wall = time.perf_counter() - wall
        cpu = time.thread_time() - cpu
        if not cuda:
            ms = wall * 1000 / args.calls
        return ms, cpu / max(wall, 1e-9)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    figures: dict = {
        "workload": workload.name,
        "note": workload.note,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "calls": args.calls,
        "cpus": os.cpu_count(),
    }
    turns: list[dict] = []
    with torch.inference_mode():
        for name in runs:
            for _ in range(50):
                call(name)
        if cuda:
            torch.cuda.synchronize()
        print(f"[{time.monotonic() - began:6.1f}s] compiled and warm; turns for {args.seconds} s", flush=True)
        until = time.monotonic() + args.seconds
        while time.monotonic() < until:
            usage, steal = resource.getrusage(resource.RUSAGE_THREAD), steal_ticks()
            row: dict = {"t": round(time.monotonic() - began, 3), "cpu": current_cpu()}
            row["probe_c_ms"], row["probe_py_ms"] = probe_c(), probe_py()
            order = ("default", "winner") if len(turns) % 2 == 0 else ("winner", "default")
            for name in order:
                row[f"{name}_ms"], row[f"{name}_cpu_share"] = timed(name)
            row["probe_c_after_ms"], row["probe_py_after_ms"] = probe_c(), probe_py()
            after, steal_after = resource.getrusage(resource.RUSAGE_THREAD), steal_ticks()
            row["voluntary_switches"] = after.ru_nvcsw - usage.ru_nvcsw
            row["involuntary_switches"] = after.ru_nivcsw - usage.ru_nivcsw
            row["steal_ticks"] = None if steal is None or steal_after is None else steal_after - steal
            row["load_average"] = os.getloadavg()[0]
            row["cpu_after"] = current_cpu()
            turns.append(row)
            if len(turns) % 20 == 0:
                figures["summary"], figures["rows"] = summary(turns), turns
                (out / "host_state.json").write_text(json.dumps(figures, indent=1))
    figures["summary"], figures["rows"] = summary(turns), turns
    (out / "host_state.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures["summary"], indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
