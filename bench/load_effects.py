"""Per-load offsets of one engine, their cause, and whether an injected slowdown measures what it asks,
with the product's own loading and timing code, in one process.

    python bench/load_effects.py --out OUT [--workload attention] [--routes default,cudagraphs]
        [--loads 8] [--rounds 10] [--objective gpuTime] [--phases loads,weights,inject,kernels]
        [--export DIR] [--device cuda|cpu]

Phases, each written to OUT/load_effects.json as soon as it ends:
- `loads`: per route, the engine (built by the product's build child) loaded `--loads` times into
  this process (`InductorBackend.load`, as the serving process loads engines) and timed in
  `--rounds` rounds interleaved block by block over all loads (`rounds.interleaved_round`, the
  product's timing, `round_order` rotation). Per load: the geometric mean of its per-round ratio to
  load 0 with a 95% interval (paired by round: what an interleaved comparison sees), and its median
  over all rounds. The between-load spread is the standard deviation of the loads' mean log times,
  and the part of it that round-to-round noise explains (what is left is a lasting per-load offset).
  Also each load's median over the rounds of a random half, against load 0's median over the other
  half: the kind of statistic that compares medians taken at different moments.
- `weights`: the same loads with every parameter and buffer moved to fresh device memory
  (`p.data = p.data.clone()`), timed again: if the offsets follow the weights' addresses, they are
  re-drawn (low correlation with the first phase); if they stay, they live elsewhere (the load's
  host objects, CUDA-graph pools).
- `order`: which first load is slow: the default's engine and a second route's (`--second`) loaded
  alternately (A0 B0 A1 B1 ...) and timed interleaved; each load against its own engine's later
  loads. A slow A0 alone: the process's first load pays; slow A0 and B0: each engine's first load.
- `inject`: one load of the default route made slower on purpose, two ways, each toggled on and off
  in the same load so the measured ratio is the injection's effect alone (no per-load offset): a
  device-side sleep after the call (`torch.cuda._sleep`, sized to 5% of the call's device time)
  and a host-side spin at the start of the call (5% of the call's wall time). Reports what each
  measures against what it asked.
- `kernels`: the default route's engine against `torch.compile` on the original module, profiled
  (torch.profiler, CUDA activity): kernels per call, kernel time per call, host CPU time per call.
  Says whether a gap between them is GPU work (other kernels) or host work.
Host facts (CPU model, load average, the CPUs the timing thread ran on) are recorded too.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

ROUTES = {
    "default": {},
    "cudagraphs": {"triton.cudagraphs": "true"},
    "freezing": {"freezing": "true"},
    "coordinate_descent": {"coordinate_descent_tuning": "true"},
}


def cpu_now() -> int | None:
    """The CPU this thread last ran on (/proc field 39)."""
    try:
        text = Path(f"/proc/self/task/{threading.get_native_id()}/stat").read_text()
        return int(text.rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def host_facts() -> dict:
    model = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            None,
        )
        if Path("/proc/cpuinfo").exists()
        else None
    )
    return {"cpu_model": model, "cpus": len(os.sched_getaffinity(0)), "loadavg": os.getloadavg()}


def mean_ci(logs: list[float]) -> tuple[float, float, float]:
    from enginewright.search.winner import t_quantile

    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), float("nan"), float("nan")
    half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def analyse(times: dict[str, list[float]], rng: random.Random) -> dict:
    """Per-load ratios to the first load (paired by round), medians, and the spread's parts."""
    keys = list(times)
    first = keys[0]
    rounds = len(times[first])
    per_load = {}
    for key in keys:
        ratio, low, high = mean_ci([math.log(a / b) for a, b in zip(times[key], times[first])])
        per_load[key] = {"ratio_to_first": ratio, "low": low, "high": high, "median_ms": statistics.median(times[key])}
    # round-centred log times: what interleaving leaves of each load's rounds
    centred = {k: [] for k in keys}
    for r in range(rounds):
        mean_r = statistics.fmean(math.log(times[k][r]) for k in keys)
        for k in keys:
            centred[k].append(math.log(times[k][r]) - mean_r)
    load_means = [statistics.fmean(v) for v in centred.values()]
    within = statistics.fmean(statistics.variance(v) for v in centred.values()) if rounds > 1 else 0.0
    between = statistics.variance(load_means) if len(keys) > 1 else 0.0
    lasting = max(0.0, between - within / rounds)
    # medians of disjoint halves of the rounds, taken at different moments
    halves = {}
    for key in keys[1:]:
        picked = sorted(rng.sample(range(rounds), rounds // 2))
        rest = [r for r in range(rounds) if r not in picked]
        halves[key] = statistics.median(times[key][r] for r in picked) / statistics.median(
            times[first][r] for r in rest
        )
    ratios = [v["ratio_to_first"] for v in per_load.values()]
    return {
        "per_load": per_load,
        "rounds": rounds,
        "sd_load_means_pct": 100 * math.sqrt(between),
        "sd_lasting_pct": 100 * math.sqrt(lasting),
        "sd_round_noise_pct": 100 * math.sqrt(within),
        "paired_ratio_range": [min(ratios), max(ratios)],
        "disjoint_median_ratio_range": [min(halves.values()), max(halves.values())] if halves else None,
        "drift_first_load_ms": [min(times[first]), max(times[first])],
    }


def timed_rounds(held: list, objective: str, inputs: dict, round_seconds: float, rounds: int) -> tuple[dict, list]:
    from enginewright.measure.paired import round_order
    from enginewright.measure.rounds import interleaved_round

    keys = [h.key for h in held]
    times = {k: [] for k in keys}
    cpus = []
    by_key = {h.key: h for h in held}
    for index in range(rounds):
        order = round_order(keys, index)
        values = interleaved_round([by_key[k] for k in order], objective, inputs, round_seconds)
        for k, v in zip(order, values):
            times[k].append(v)
        cpus.append(cpu_now())
    return times, cpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--routes", default="default,cudagraphs")
    parser.add_argument("--loads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--objective", default="gpuTime")
    parser.add_argument("--round-seconds", type=float, default=None)
    parser.add_argument("--phases", default="loads,weights,order,inject,kernels")
    parser.add_argument("--second", default="freezing", help="order: the second route (a key of ROUTES)")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--export", type=Path)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    import torch

    from enginewright.api.routes import Route
    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure.rounds import Held
    from enginewright.measure.timing import calls_per_round, warm_up
    from enginewright.worker.child import load_npz
    from enginewright.worker.measure import build
    from workloads import WORKLOADS, setup as bench_setup

    workload = args.workload
    if workload not in {w.name for w in WORKLOADS}:  # engine_overhead.py's mlp / block / tiny
        from engine_overhead import workloads as overhead_workloads

        workload = overhead_workloads()[workload]
    bench = bench_setup(args.out, workload, args.device, args.objective, REPO)
    timing = bench.timing
    round_seconds = args.round_seconds if args.round_seconds is not None else timing.round_seconds
    phases = args.phases.split(",")
    inputs = load_npz(str(bench.files["inputs"][0]))
    rng = random.Random(7)
    result: dict = {
        "workload": bench.workload.name,
        "objective": args.objective,
        "round_seconds": round_seconds,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "host": host_facts(),
        "phases": {},
    }

    def write() -> None:
        result["wall_s"] = round(time.monotonic() - bench.began, 1)
        for folder in filter(None, (args.out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "load_effects.json").write_text(json.dumps(result, indent=1))

    def phase(name: str, work) -> None:
        if name.split(":")[0] not in phases:
            return
        started = time.monotonic()
        try:
            result["phases"][name] = work()
        except Exception as exc:  # one phase's failure must not lose the others
            traceback.print_exc()
            result["phases"][name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        result["phases"][name]["seconds"] = round(time.monotonic() - started, 1)
        write()
        bench.say(
            f"phase {name} done: "
            + json.dumps({k: v for k, v in result["phases"][name].items() if k != "per_load"})[:600]
        )

    engines = {}
    ctx = bench.context()
    names = args.routes.split(",") + ([args.second] if "order" in phases else [])
    for name in dict.fromkeys(names):
        if args.device != "cuda" and name == "cudagraphs":
            continue
        built = build(ctx, Route.of(ROUTES[name]), "bench", "bench")
        if built.engine_path is None:
            raise SystemExit(f"{name}: build failed: {built.entry.error}")
        path = args.out / f"{name}.inductor.tar"
        path.write_bytes(built.engine_path.read_bytes())
        engines[name] = path
        bench.say(f"{name} built in {built.entry.build_seconds:.1f}s")

    def load_copies(name: str, count: int) -> list:
        held = []
        for index in range(count):
            started = time.monotonic()
            runner = InductorBackend().load(engines[name].read_bytes(), args.out / "loads" / name / f"L{index}")
            runner.run(inputs)
            warm_up(runner, inputs, args.objective, timing.warmup_iterations)
            held.append(Held(runner, calls_per_round(runner, inputs, args.objective, round_seconds), f"L{index}"))
            bench.say(f"{name} load {index} in {time.monotonic() - started:.2f}s ({held[-1].calls} calls a round)")
        return held

    loaded: dict[str, list] = {}

    def loads_phase(name: str):
        def work() -> dict:
            loaded[name] = load_copies(name, args.loads)
            times, cpus = timed_rounds(loaded[name], args.objective, inputs, round_seconds, args.rounds)
            return {**analyse(times, rng), "times": times, "cpus": cpus}

        return work

    def weights_phase(name: str):
        def work() -> dict:
            before = result["phases"][f"loads:{name}"]
            for held in loaded[name]:
                module = held.runner.compiled
                module = getattr(module, "_orig_mod", module)
                with torch.no_grad():
                    for tensor in list(module.parameters()) + list(module.buffers()):
                        tensor.data = tensor.data.clone()
            times, cpus = timed_rounds(loaded[name], args.objective, inputs, round_seconds, args.rounds)
            after = analyse(times, rng)
            first = [before["per_load"][k]["ratio_to_first"] for k in before["per_load"]]
            second = [after["per_load"][k]["ratio_to_first"] for k in after["per_load"]]
            corr = (
                statistics.correlation([math.log(x) for x in first[1:]], [math.log(x) for x in second[1:]])
                if len(first) > 2
                else None
            )
            return {**after, "times": times, "cpus": cpus, "offset_correlation_before_after": corr}

        return work

    for name in args.routes.split(","):
        if name not in engines:
            continue
        phase(f"loads:{name}", loads_phase(name))
        phase(f"weights:{name}", weights_phase(name))
        for held in loaded.pop(name, []):
            held.runner.close()

    def order() -> dict:
        held = []
        for index in range(3):
            for name in ("default", args.second):
                runner = InductorBackend().load(
                    engines[name].read_bytes(), args.out / "loads" / "order" / f"{name}{index}"
                )
                runner.run(inputs)
                warm_up(runner, inputs, args.objective, timing.warmup_iterations)
                held.append(
                    Held(runner, calls_per_round(runner, inputs, args.objective, round_seconds), f"{name}#{index}")
                )
        times, cpus = timed_rounds(held, args.objective, inputs, round_seconds, args.rounds)
        report = {"times": times, "cpus": cpus}
        for name in ("default", args.second):
            keys = [f"{name}#{i}" for i in range(3)]
            later = [statistics.fmean(math.log(times[k][r]) for k in keys[1:]) for r in range(args.rounds)]
            ratio, low, high = mean_ci([math.log(times[keys[0]][r]) - later[r] for r in range(args.rounds)])
            report[name] = {"first_over_later": ratio, "low": low, "high": high}
        for h in held:
            h.runner.close()
        return report

    phase("order", order)

    def inject() -> dict:
        runner = InductorBackend().load(engines["default"].read_bytes(), args.out / "loads" / "inject")
        runner.run(inputs)
        warm_up(runner, inputs, args.objective, timing.warmup_iterations)
        call = runner._call
        prepared = runner.prepare(inputs)
        state = {"mode": None, "sleep": 0, "spin": 0.0}
        per_call_device = runner.timed_calls("gpuTime", inputs, 200) / 200 if args.device == "cuda" else None
        started = time.perf_counter()
        for _ in range(200):
            runner.run_prepared(prepared)
        if args.device == "cuda":
            torch.cuda.synchronize()
        per_call_wall = (time.perf_counter() - started) / 200
        if args.device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(10_000_000)
            end.record()
            end.synchronize()
            state["sleep"] = int(args.slowdown * per_call_device * 10_000_000 / start.elapsed_time(end))
        state["spin"] = args.slowdown * per_call_wall

        def slowed(tensors):
            if state["mode"] == "spin":
                until = time.perf_counter() + state["spin"]
                while time.perf_counter() < until:
                    pass
            out = call(tensors)
            if state["mode"] == "sleep":
                torch.cuda._sleep(state["sleep"])
            return out

        runner._call = slowed

        class Toggle(Held):
            def timed_calls(self, objective, inputs, calls):
                state["mode"] = self.key.split("-")[0] if "-" in self.key else None
                try:
                    return super().timed_calls(objective, inputs, calls)
                finally:
                    state["mode"] = None

        calls = calls_per_round(runner, inputs, args.objective, round_seconds)
        report = {
            "per_call_device_ms": per_call_device,
            "per_call_wall_ms": per_call_wall * 1000,
            "asked": args.slowdown,
        }
        for mode in ["sleep", "spin"] if args.device == "cuda" else ["spin"]:
            held = [Toggle(runner, calls, "plain"), Toggle(runner, calls, f"{mode}-on")]
            times, _ = timed_rounds(held, args.objective, inputs, round_seconds, args.rounds)
            ratio, low, high = mean_ci([math.log(a / b) for a, b in zip(times[f"{mode}-on"], times["plain"])])
            report[mode] = {"measured_slowdown": ratio - 1, "low": low - 1, "high": high - 1, "times": times}
        runner.close()
        return report

    phase("inject", inject)

    def kernels() -> dict:
        if args.device != "cuda":
            return {"skipped": "needs CUDA"}
        from torch.profiler import ProfilerActivity, profile

        engine = InductorBackend().load(engines["default"].read_bytes(), args.out / "loads" / "kernels")
        torch.manual_seed(0)
        module = bench.workload.make().eval().to("cuda").half()
        compiled = torch.compile(module, backend="inductor", dynamic=False)
        x = torch.from_numpy(inputs[engine.names[0]]).to("cuda").half()
        prepared = engine.prepare(inputs)
        report = {}
        with torch.inference_mode():
            for label, call in (("engine", lambda: engine.run_prepared(prepared)), ("compile", lambda: compiled(x))):
                for _ in range(30):
                    call()
                torch.cuda.synchronize()
                cpu0 = time.thread_time()
                wall0 = time.perf_counter()
                for _ in range(200):
                    call()
                torch.cuda.synchronize()
                host_ms = (time.thread_time() - cpu0) / 200 * 1000
                wall_ms = (time.perf_counter() - wall0) / 200 * 1000
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(20):
                        call()
                    torch.cuda.synchronize()
                kernels = [
                    e
                    for e in prof.events()
                    if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA")
                ]
                busy = sum(getattr(e, "device_time", 0.0) or getattr(e, "cuda_time", 0.0) for e in kernels)
                names: dict[str, float] = {}
                for e in kernels:
                    names[e.name] = names.get(e.name, 0.0) + (getattr(e, "device_time", 0.0) or 0.0)
                top = sorted(names.items(), key=lambda kv: -kv[1])[:12]
                report[label] = {
                    "host_cpu_ms_per_call": host_ms,
                    "wall_ms_per_call": wall_ms,
                    "kernels_per_call": len(kernels) / 20,
                    "kernel_ms_per_call": busy / 20 / 1000,
                    "top_kernels_us_per_call": [(n[:120], v / 20) for n, v in top],
                }
        engine.close()
        return report

    phase("kernels", kernels)
    result["host_after"] = host_facts()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
