"""False winners and power of the winner rule, measured with the product's own measuring code.

    python bench/aa_power.py --out OUT [--workload attention] [--seconds 420] [--slowdown 0.05]
    python bench/aa_power.py table RUN.json...   # the figures of saved runs, as a markdown table

One Inductor engine (the workload's default route) is built with the product's build child, then held
by a pool of serving processes (`worker.batch.Server`, the code that measures every route): `--pool`
processes serve it as is, `--slowed` processes serve it made slower on purpose by a known amount (each
call is followed by a device-side spin of `--slowdown` times the call's device time, calibrated at
load; the measured slowdown is reported). Then trials, until `--seconds`:

- A/A trial: three distinct plain processes play default, its twin and a route. Stage 1 is the
  worker's paired rounds (default, route; route, default; ...) with its stopping rule
  (`search.paired.stop_reason`); the route is a stage-1 candidate when its paired speedup beats the
  noise margin. The confirmation round is then timed for every trial (rotating order, one process at
  a time, `--confirm-rounds` rounds) and judged by the product's rule (`search.winner.confirm`,
  candidate against both default processes) and by the rule before this change (against one default
  process, no paired stage-1 gate). A false winner: a rule names the route, which is the same engine.
- Power trial: default and twin are slowed processes, the route a plain one: the route is truly
  faster by the slowdown; a rule finds it when it names the route.

Trials draw their processes at random (seeded), so lasting per-process offsets are part of what is
measured; each process's median time over all its rounds is reported. Results go to OUT/aa_power.json
after every trial.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from enginewright.backends.inductor import InductorBackend  # noqa: E402  (imports no torch)


class SlowedInductor(InductorBackend):
    """The Inductor backend, its engine made `slowdown` slower per call on purpose: after each call a
    device-side spin (`torch.cuda._sleep`) of `slowdown` times the call's device time, calibrated when
    the engine loads (on CPU: a host spin of `slowdown` times each call's own duration). For measuring
    the winner rule's power only."""

    def __init__(self, device: str | None = None, slowdown: float = 0.05):
        super().__init__(device=device)
        self.slowdown = slowdown

    def load(self, engine: bytes, workdir: Path):
        import statistics as stats
        import numpy as np
        runner = super().load(engine, workdir)
        call, factor = runner._call, self.slowdown
        if runner.device != "cuda":
            def slowed(tensors):
                started = time.perf_counter()
                out = call(tensors)
                until = started + (time.perf_counter() - started) * (1.0 + factor)
                while time.perf_counter() < until:
                    pass
                return out
            runner._call = slowed
            return runner
        torch = runner.torch
        sample = np.load(os.environ["AA_POWER_SAMPLE"])
        prepared = runner.prepare({name: sample[name] for name in sample.files})
        for _ in range(20):
            call(prepared)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per_call = []
        for _ in range(50):
            start.record()
            call(prepared)
            end.record()
            end.synchronize()
            per_call.append(start.elapsed_time(end))
        cycles = 10_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        extra = int(factor * stats.median(per_call) * cycles / start.elapsed_time(end))

        def slowed(tensors):
            out = call(tensors)
            torch.cuda._sleep(extra)
            return out
        runner._call = slowed  # run() and run_prepared() both go through _call
        return runner


def upper_bound(failures: int, trials: int, level: float = 0.95) -> float:
    """One-sided Clopper-Pearson upper bound of a rate (bisection on the binomial tail)."""
    from math import comb
    if trials == 0:
        return 1.0
    if failures == trials:
        return 1.0

    def tail(p: float) -> float:  # P(X <= failures)
        return sum(comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(failures + 1))
    lo, hi = failures / trials, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > 1 - level else (lo, mid)
    return hi


def lower_bound(successes: int, trials: int, level: float = 0.95) -> float:
    return 1.0 - upper_bound(trials - successes, trials, level) if trials else 0.0


def verdicts(trial: dict, margin: float) -> dict[str, bool]:
    """Whether each rule names the trial's route. after: the product's pipeline (a route whose paired
    interval reaches below the margin line is a candidate, and the confirmation round against both
    default processes decides); sweep_alone: the product's rule when no confirmation round decides
    (the whole paired interval below the line); before: the confirmation rule before paired rounds
    (one default process, no gate), on the same rounds."""
    line = 1.0 - margin
    return {"after": trial["paired"]["low"] < line and trial["confirm_only"],
            "sweep_alone": trial["paired"]["high"] < line, "before": trial["before"]}


def table(paths: list[str]) -> str:
    """The figures of saved runs (aa_power.json files), one markdown row each, the rules applied to
    the recorded trials."""
    rules = ("after", "sweep_alone", "before")
    rows = ["| run | objective | A/A trials | false winners: after | sweep alone | before | power trials | "
            "found: after | sweep alone | before | measured slowdown | plain processes: slowest / fastest | "
            "stage-1 rounds (median) |", "|" + " --- |" * 13]
    for path in paths:
        d = json.loads(Path(path).read_text())
        counts = {kind: {rule: 0 for rule in rules} for kind in ("aa", "power")}
        for trial in d["trials"]:
            for rule, named in verdicts(trial, d["margin"]).items():
                counts[trial["kind"]][rule] += named
        n_aa, n_pw = d["aa"]["trials"], d["power"]["trials"]
        aa, pw = counts["aa"], counts["power"]
        plain = [v for k, v in d["process_median_ms"].items() if k.startswith("A")]
        rows.append(
            f"| {Path(path).stem} | {d['objective']} | {n_aa} | {aa['after']} ({aa['after'] / n_aa:.1%}, "
            f"≤{upper_bound(aa['after'], n_aa):.1%}) | {aa['sweep_alone']} ({aa['sweep_alone'] / n_aa:.0%}) | "
            f"{aa['before']} ({aa['before'] / n_aa:.1%}) | {n_pw} | {pw['after']} ({pw['after'] / n_pw:.0%}) | "
            f"{pw['sweep_alone']} ({pw['sweep_alone'] / n_pw:.0%}) | {pw['before']} ({pw['before'] / n_pw:.0%}) | "
            f"{d.get('measured_slowdown', float('nan')):+.1%} | {max(plain) / min(plain):.3f} | "
            f"{d['aa']['stage1_rounds_median']} |")
    return "\n".join(rows)


def main() -> int:
    if sys.argv[1:2] == ["table"]:
        print(table(sys.argv[2:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--seconds", type=float, default=420.0, help="stop starting trials after this long")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--pool", type=int, default=5, help="processes serving the plain engine")
    parser.add_argument("--slowed", type=int, default=3, help="processes serving the slowed engine")
    parser.add_argument("--confirm-rounds", type=int, default=5)
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--power-every", type=int, default=3, help="every Nth trial is a power trial")
    parser.add_argument("--objective", default="gpuTime")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--export", type=Path, help="also write aa_power.json here after every trial")
    parser.add_argument("--device", default="cuda", help="cpu: a quick check of the script without a GPU")
    args = parser.parse_args()
    began = time.monotonic()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO / "operator"), str(REPO / "bench"),
                                                os.environ.get("PYTHONPATH", "")])

    import torch
    from enginewright.api.models import Timing
    from enginewright.search.paired import alternate, stop_reason, summarise
    from enginewright.search.winner import confirm, twin
    from enginewright.store import LocalStore
    from enginewright.worker.batch import Accuracy, Server, Worker, WorkerContext, measuring_cpus
    from enginewright.search.routes import Route
    from workloads import WORKLOADS, prepare

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    say = lambda message: print(f"[{time.monotonic() - began:6.1f}s] {message}", flush=True)  # noqa: E731
    workload = next(w for w in WORKLOADS if w.name == args.workload)
    files = prepare(workload, out / "data", args.device, dtype="float16" if args.device == "cuda" else "float32")
    os.environ["AA_POWER_SAMPLE"] = str(files["inputs"][0])  # the slowed engine calibrates on it
    timing = Timing(objective=args.objective)

    def context(backend: str, options: dict, workdir: Path) -> WorkerContext:
        return WorkerContext(backend=backend, model=files["program"], store=LocalStore(out / "store"),
                             prefix="runs/aa", target="local", workdir=workdir, engine_suffix=".inductor.tar",
                             settings={"input_dtype": "float16"} if args.device == "cuda" else {}, timing=timing, noise_margin=args.margin,
                             accuracy=Accuracy(files["inputs"][:1], [], "cosine", None), route_timeout=600,
                             backend_options=options, progress=say,
                             measure_cpus=measuring_cpus())

    plain = context("inductor", {"device": args.device}, out / "work")
    slowed = context("aa_power:SlowedInductor", {"device": args.device, "slowdown": args.slowdown}, out / "work")
    built = Worker(plain).build(Route.of({}), "aa", "aa")
    if built.engine_path is None:
        raise SystemExit(f"build failed: {built.entry.error}")
    say(f"{workload.name}: default route built in {built.entry.build_seconds:.1f}s")
    engine = out / "engine.inductor.tar"
    engine.write_bytes(built.engine_path.read_bytes())

    servers: dict[str, Server] = {}
    for i in range(args.pool):
        servers[f"A{i}"] = Server(plain, f"A{i}", engine, out / "serve" / f"A{i}", references=False)
    for i in range(args.slowed):
        servers[f"S{i}"] = Server(slowed, f"S{i}", engine, out / "serve" / f"S{i}", references=False)
    for server in servers.values():
        server.launch()
    for key, server in servers.items():
        server.wait_ready(600)
    say(f"{len(servers)} serving processes ready ({args.objective}; calls per round: "
        + ", ".join(f"{k} {s.calls}" for k, s in servers.items()) + ")")

    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {key: [] for key in servers}
    trials: list[dict] = []

    def timed(key: str) -> float:
        value = servers[key].time(600)
        times[key].append(value)
        return value

    def summary() -> dict:
        result = {"workload": workload.name, "note": workload.note, "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
                  "torch": torch.__version__, "objective": args.objective, "slowdown": args.slowdown,
                  "margin": args.margin, "confirm_rounds": args.confirm_rounds, "timing": timing.wire(),
                  "cpus": len(os.sched_getaffinity(0)), "measure_cpus": sorted(plain.measure_cpus or []),
                  "wall_s": round(time.monotonic() - began, 1),
                  "process_median_ms": {k: statistics.median(v) for k, v in times.items() if v}}
        for kind in ("aa", "power"):
            done = [t for t in trials if t["kind"] == kind]
            counts = {rule: sum(t[rule] for t in done) for rule in ("sweep_alone", "after", "confirm_only", "before")}
            result[kind] = {"trials": len(done), **{f"{rule}_named_route": n for rule, n in counts.items()}}
            if kind == "aa":
                result[kind].update({f"{rule}_rate_upper95": upper_bound(n, len(done)) for rule, n in counts.items()})
            else:
                result[kind].update({f"{rule}_power_lower95": lower_bound(n, len(done)) for rule, n in counts.items()})
            result[kind]["stage1_rounds_median"] = statistics.median(t["paired"]["rounds"] for t in done) if done else None
        slow = [v for k, v in times.items() if k.startswith("S")]
        fast = [v for k, v in times.items() if k.startswith("A")]
        if slow and fast and all(slow) and all(fast):
            result["measured_slowdown"] = (statistics.median(x for v in slow for x in v) /
                                           statistics.median(x for v in fast for x in v)) - 1
        result["trials"] = trials
        return result

    def write(result: dict) -> None:
        for folder in filter(None, (out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "aa_power.json").write_text(json.dumps(result, indent=1))

    plain_keys = [k for k in servers if k.startswith("A")]
    slow_keys = [k for k in servers if k.startswith("S")]
    index = 0
    while time.monotonic() - began < args.seconds:
        index += 1
        power = args.power_every and index % args.power_every == 0
        if power:
            default, other = rng.sample(slow_keys, 2)
            route = rng.choice(plain_keys)
        else:
            default, other, route = rng.sample(plain_keys, 3)
        # Stage 1, as the worker does it.
        route_ms, default_ms, stopped = alternate(
            lambda: timed(default), lambda: timed(route),
            lambda r, d: stop_reason(r, d, margin=args.margin, precision=timing.precision,
                                     min_rounds=timing.min_rounds, max_rounds=timing.max_rounds))
        paired = summarise(route_ms, default_ms, stopped)
        # Confirmation round, rotating order, timed for every trial.
        keys = [default, other, route]
        rounds: dict[str, list[float]] = {k: [] for k in keys}
        for r in range(args.confirm_rounds):
            shift = r % len(keys)
            for key in keys[shift:] + keys[:shift]:
                rounds[key].append(timed(key))
        after = confirm({"d": rounds[default], twin("d"): rounds[other], "r": rounds[route]}, "d", args.margin)
        before = confirm({"d": rounds[default], "r": rounds[route]}, "d", args.margin)
        trial = {"kind": "power" if power else "aa", "default": default, "twin": other, "route": route,
                 "paired": paired.wire(), "confirm_ratio": after.ratios["r"], "rounds": rounds,
                 "confirm_only": not after.default_won, "before": not before.default_won}
        trials.append({**trial, **verdicts(trial, args.margin)})
        write(summary())
        if index % 10 == 0:
            s = summary()
            say(f"{index} trials: A/A {s['aa']['trials']} (after {s['aa']['after_named_route']}, before "
                f"{s['aa']['before_named_route']}), power {s['power']['trials']} (after "
                f"{s['power']['after_named_route']}, before {s['power']['before_named_route']})")
    for server in servers.values():
        server.close()
    result = summary()
    write(result)
    aa, pw = result["aa"], result["power"]
    say(f"A/A false winners: after {aa['after_named_route']}/{aa['trials']} (95% upper bound "
        f"{aa['after_rate_upper95']:.1%}), before {aa['before_named_route']}/{aa['trials']}; power for a "
        f"{args.slowdown:.0%} win (measured {result.get('measured_slowdown', float('nan')):.1%}): after "
        f"{pw['after_named_route']}/{pw['trials']} (95% lower bound {pw['after_power_lower95']:.1%}), before "
        f"{pw['before_named_route']}/{pw['trials']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
