"""Where the lasting per-process offsets of identical engines come from: one engine, held by several
serving processes (the worker's `Server`), timed in rotating rounds in several set-ups, in one run.

    python bench/process_offsets.py --out OUT [--workload attention] [--objective gpuTime]
        [--processes 6] [--rotations 12] [--phases unpinned,fixed-layout,pinned-local,pinned-remote,in-process]
        [--export DIR]

Phases (each a fresh set of processes serving the same engine bytes, one measuring at a time):
- `unpinned`: as the worker runs them.
- `fixed-layout`: PYTHONHASHSEED=0 and address-space layout randomisation off (personality
  ADDR_NO_RANDOMIZE, which exec keeps): every process gets the same memory layout.
- `pinned-local` / `pinned-remote`: each process pinned to a CPU of its own on the GPU's NUMA node /
  on another node (skipped where there is none).
- `in-process`: copies of the engine loaded into one process, rotated the same way.
- `pairs`: the product's serving process holding the default D, its twin T and copies R0.. of the
  same engine; each copy's ratio to D timed two ways in turn, in rounds one engine after the other
  (`Server.time`) and in rounds interleaved in blocks (`Server.interleave`), with its 95% interval.

For each process: the median of its rounds, their range, and the CPUs its main thread ran the
rounds on (/proc/PID/stat); for each phase the spread slowest/fastest of the process medians, which
is what a route measured in one process against a default in another inherits. Results go to
OUT/process_offsets.json (and --export) after every phase.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

ADDR_NO_RANDOMIZE = 0x0040000


def cpu_node(cpu: int) -> int | None:
    folder = Path(f"/sys/devices/system/cpu/cpu{cpu}")
    nodes = [p.name for p in folder.glob("node*")] if folder.exists() else []
    return int(nodes[0][4:]) if nodes else None


def parse_cpulist(text: str) -> list[int]:
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def topology(torch) -> dict:
    """CPUs this process may use, their NUMA nodes, and the GPU's node and local CPUs."""
    allowed = sorted(os.sched_getaffinity(0))
    info: dict = {"allowed_cpus": allowed, "cpu_nodes": {cpu: cpu_node(cpu) for cpu in allowed}}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        bus = (
            f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', 0):02x}:"
            f"{getattr(props, 'pci_device_id', 0):02x}.0"
        )
        device = Path("/sys/bus/pci/devices") / bus
        info["gpu_pci"] = bus
        for name in ("numa_node", "local_cpulist"):
            try:
                info[f"gpu_{name}"] = (device / name).read_text().strip()
            except OSError as exc:
                info[f"gpu_{name}"] = f"unreadable: {exc}"
    try:
        info["nvidia_smi_topo"] = subprocess.run(
            ["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=20
        ).stdout[-3000:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        info["nvidia_smi_topo"] = f"unavailable: {exc}"
    try:
        info["lscpu"] = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=20).stdout[-3000:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        info["lscpu"] = f"unavailable: {exc}"
    return info


def last_cpu(pid: int) -> int | None:
    """The CPU the process's main thread last ran on (field 39 of /proc/PID/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text[text.rindex(")") + 2 :].split()[36])


def fixed_layout_python(folder: Path) -> str:
    """An interpreter wrapper that turns address-space randomisation off, then execs Python."""
    wrapper = folder / "python-fixed-layout"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import ctypes, os, sys\n"
        f"ctypes.CDLL(None).personality({ADDR_NO_RANDOMIZE})\n"
        f"os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def rotate(servers: dict, rotations: int) -> dict:
    """Every server once per rotation, the order shifted each time; per-round ms and CPUs by key."""
    keys = list(servers)
    ms = {k: [] for k in keys}
    cpus = {k: [] for k in keys}
    for index in range(rotations):
        shift = index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            ms[key].append(servers[key].time(600))
            cpus[key].append(last_cpu(servers[key].proc.pid))
    return {"ms": ms, "cpus": cpus}


def describe_phase(name: str, rounds: dict, extra: dict | None = None) -> dict:
    medians = {k: statistics.median(v) for k, v in rounds["ms"].items()}
    result = {
        "phase": name,
        "process_median_ms": medians,
        "spread_slowest_over_fastest": max(medians.values()) / min(medians.values()),
        "within_process_range": {k: max(v) / min(v) for k, v in rounds["ms"].items()},
        **rounds,
        **(extra or {}),
    }
    return result


def copies_child(
    engine: str,
    sample: str,
    copies: int,
    rotations: int,
    objective: str,
    round_seconds: float,
    warmup: int,
    workdir: str,
) -> None:
    """(run in a subprocess) Load `copies` copies of the engine into this one process and time them
    in rotating rounds, as the serving processes are; print one JSON line."""
    import numpy as np

    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure.timing import calls_per_round, time_round, warm_up

    data = np.load(sample)
    inputs = {name: data[name] for name in data.files}
    runners = []
    for index in range(copies):
        runner = InductorBackend().load(Path(engine).read_bytes(), Path(workdir) / f"copy-{index}")
        runner.run(inputs)
        warm_up(runner, inputs, objective, warmup)
        runners.append(runner)
    calls = [calls_per_round(r, inputs, objective, round_seconds) for r in runners]
    ms = {f"C{i}": [] for i in range(copies)}
    for index in range(rotations):
        shift = index % copies
        for i in list(range(copies))[shift:] + list(range(copies))[:shift]:
            if calls[i] >= 5:
                runners[i].timed_calls(objective, inputs, calls[i] // 5)
            ms[f"C{i}"].append(time_round(runners[i], inputs, objective, calls[i]))
    print(json.dumps({"ms": ms, "calls": calls, "cpus": {k: [] for k in ms}}), flush=True)


def main() -> int:
    if sys.argv[1:2] == ["copies"]:
        engine, sample, copies, rotations, objective, round_seconds, warmup, workdir = sys.argv[2:10]
        copies_child(engine, sample, int(copies), int(rotations), objective, float(round_seconds), int(warmup), workdir)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--objective", default="gpuTime")
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--rotations", type=int, default=12)
    parser.add_argument("--phases", default="unpinned,fixed-layout,pinned-local,pinned-remote,in-process")
    parser.add_argument("--export", type=Path)
    parser.add_argument("--device", default="cuda", help="cpu: a quick check of the script without a GPU")
    args = parser.parse_args()
    import torch

    from enginewright.worker.server import Server
    from workloads import setup as bench_setup

    bench = bench_setup(args.out, args.workload, args.device, args.objective, REPO)
    out, files, timing, say, workload = bench.out, bench.files, bench.timing, bench.say, bench.workload
    ctx = bench.context()
    engine = bench.build_default()

    topo = topology(torch)
    result: dict = {
        "workload": workload.name,
        "objective": args.objective,
        "timing": timing.wire(),
        "torch": torch.__version__,
        "topology": topo,
        "phases": [],
    }

    def write() -> None:
        result["wall_s"] = round(time.monotonic() - bench.began, 1)
        for folder in filter(None, (out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "process_offsets.json").write_text(json.dumps(result, indent=1))

    gpu_node = topo.get("gpu_numa_node")
    allowed = topo["allowed_cpus"]
    local = [c for c in allowed if gpu_node not in (None, "-1") and str(topo["cpu_nodes"].get(c)) == str(gpu_node)]
    remote = [c for c in allowed if c not in local and topo["cpu_nodes"].get(c) is not None] if local else []
    say(f"GPU NUMA node {gpu_node}; CPUs allowed {len(allowed)}: local {local}, other {remote}")

    def serve_phase(name: str, contexts: list, python: str | None = None, env: dict | None = None) -> None:
        saved_env = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update(env or {})
        real = sys.executable
        servers: dict = {}
        try:
            if python:
                sys.executable = python  # Server.launch runs sys.executable
            for index, context in enumerate(contexts):
                servers[f"P{index}"] = Server(
                    context, f"P{index}", engine, out / "serve" / name / f"P{index}", references=False
                )
                servers[f"P{index}"].launch()
        finally:
            sys.executable = real
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        try:
            for server in servers.values():
                server.wait_ready(600)
            rounds = rotate(servers, args.rotations)
            extra = {
                "pinned": {k: sorted(c.measure_cpus or []) for k, c in zip(servers, contexts)},
                "calls": {k: s.calls for k, s in servers.items()},
            }
        finally:
            for server in servers.values():
                server.close()
        phase = describe_phase(name, rounds, extra)
        result["phases"].append(phase)
        write()
        say(
            f"{name}: process medians "
            + ", ".join(f"{k} {v:.4f}" for k, v in phase["process_median_ms"].items())
            + f" ms; slowest/fastest {phase['spread_slowest_over_fastest']:.3f}"
        )

    def pairs_phase() -> None:
        """One serving process holding the default D, its twin T and copies R0.. of the same engine;
        each copy's ratio to D, measured two ways in turn: rounds one engine after the other
        (Server.time) and rounds interleaved in blocks (Server.interleave)."""
        from enginewright.measure.paired import interval

        server = Server(ctx, "D", engine, out / "serve" / "pairs", references=False)
        copies = ["T", *[f"R{i}" for i in range(args.processes - 2)]]
        ms: dict = {method: {c: ([], []) for c in copies} for method in ("rounds", "blocks")}
        try:
            server.start(600)
            for index, key in enumerate(copies):
                server.add(key, engine, out / "serve" / "pairs" / f"load-{index}", 600, check=False)
            for index in range(args.rotations):
                for key in copies:
                    copy_ms, default_ms = ms["rounds"][key]
                    if index % 2 == 0:
                        default_ms.append(server.time(600, key="D"))
                        copy_ms.append(server.time(600, key=key))
                    else:
                        copy_ms.append(server.time(600, key=key))
                        default_ms.append(server.time(600, key="D"))
                    copy_ms, default_ms = ms["blocks"][key]
                    if index % 2 == 0:
                        d, c = server.interleave(["D", key], 600)
                    else:
                        c, d = server.interleave([key, "D"], 600)
                    copy_ms.append(c)
                    default_ms.append(d)
        finally:
            server.close()
        phase = {"phase": "pairs", "ms": ms, "calls": dict(server.calls_of)}
        for method in ("rounds", "blocks"):
            ratios = {key: interval(*ms[method][key]) for key in copies}
            phase[f"{method}_ratio_interval"] = ratios
            phase[f"{method}_spread"] = max(r[0] for r in ratios.values()) / min(r[0] for r in ratios.values())
            say(
                f"pairs ({method}): copy/D "
                + ", ".join(f"{k} {r[0]:.3f} [{r[1]:.3f}-{r[2]:.3f}]" for k, r in ratios.items())
                + f"; slowest/fastest {phase[f'{method}_spread']:.3f}"
            )
        result["phases"].append(phase)
        write()

    for name in args.phases.split(","):
        try:
            if name == "unpinned":
                serve_phase(name, [ctx] * args.processes)
            elif name == "fixed-layout":
                serve_phase(name, [ctx] * args.processes, python=fixed_layout_python(out), env={"PYTHONHASHSEED": "0"})
            elif name in ("pinned-local", "pinned-remote"):
                cpus = local if name == "pinned-local" else remote
                cpus = [c for c in cpus if c != 0][: args.processes]  # (CPU 0 takes most interrupts)
                if len(cpus) < 2:
                    say(f"{name}: skipped (CPUs {cpus})")
                    continue
                serve_phase(name, [replace(ctx, measure_cpus=frozenset([c])) for c in cpus])
            elif name == "pairs":
                pairs_phase()
            elif name == "in-process":
                started = time.monotonic()
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "copies",
                        str(engine),
                        str(files["inputs"][0]),
                        str(args.processes),
                        str(args.rotations),
                        args.objective,
                        str(timing.round_seconds),
                        str(timing.warmup_iterations),
                        str(out / "copies"),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if proc.returncode != 0:
                    raise RuntimeError(proc.stderr[-2000:])
                rounds = json.loads(proc.stdout.strip().splitlines()[-1])
                phase = describe_phase(name, rounds, {"seconds": round(time.monotonic() - started, 1)})
                result["phases"].append(phase)
                write()
                say(
                    f"{name}: copy medians "
                    + ", ".join(f"{k} {v:.4f}" for k, v in phase["process_median_ms"].items())
                    + f" ms; slowest/fastest {phase['spread_slowest_over_fastest']:.3f}"
                )
            else:
                raise SystemExit(f"unknown phase {name}")
        except Exception as exc:  # one phase failing must not lose the others
            result["phases"].append({"phase": name, "error": f"{type(exc).__name__}: {exc}"[:3000]})
            write()
            say(f"{name}: failed: {exc}")
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
