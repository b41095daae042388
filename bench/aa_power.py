"""False winners and power of the winner rule, measured with the product's own measuring code, for
two layouts side by side in one run — the protocol before loads (one load of each engine); the
protocol with loads is measured by bench/aa_loads.py. Two of its figures compare medians taken at
different moments and so measure the host's drift as much as the engines: `copy_over_default` (a
copy's median over the trials it served against its default's over all trials) and
`measured_slowdown` (slowed holders' medians against plain ones in other processes); the same
copies read within 6% of each other interleaved (bench/load_effects.py, docs/benchmarks.md).

    python bench/aa_power.py --out OUT [--workload attention] [--seconds 420 (of trials)] [--slowdown 0.05]
        [--layouts processes,shared]
    python bench/aa_power.py table RUN.json...   # the figures of saved runs, as a markdown table

One Inductor engine (the workload's default route) is built with the product's build child, then held
by serving processes (`worker.server.Server`, the code that measures every route), plain or made slower
on purpose by a known amount (`--slowed`: each call is followed by a device-side spin of `--slowdown`
times the call's device time, calibrated at load; the measured slowdown is reported). Trials, taking
turns between the layouts until `--seconds`:

- `processes` (the product before): every engine in a process of its own. A/A trial: three distinct
  plain processes play default, its twin and the route.
- `shared` (the product now): engines loaded side by side in one process, each round of them
  interleaved in blocks on its thread (`Server.interleave`).
  Each shared process holds the default `D`, its twin `T` (the same engine loaded again) and
  `--copies` copies of the route `R0..`; an A/A trial runs stage 1 in one process (its `D` against one
  of its route copies) and the confirmation round in another (its `D`, `T` and a route copy), as the
  product runs stage 1 in the batch's process and the confirmation in a fresh one.

Stage 1 is the worker's paired rounds (`measure.paired.alternate` with its stopping rule; in the
processes layout whole rounds one after the other, `one_after_the_other`); the route is
a stage-1 candidate when its paired interval reaches below the noise-margin line. The confirmation
round is timed for every trial (rotating order, `--confirm-rounds` rounds) and judged by the
product's rule (`search.winner.confirm`, candidate against both default copies) and by the rule
before paired rounds (one default, no stage-1 gate). A false winner: a rule names the route, which
is the same engine. A power trial: the defaults are slowed, the route plain, so the route is truly
faster by the slowdown; a rule finds it when it names the route.

Processes and copies are drawn at random (seeded), so lasting per-process and per-copy offsets are
part of what is measured; every process's and copy's median time over all its rounds is reported.
Results go to OUT/aa_power.json after every trial.
"""

from __future__ import annotations

import argparse
import json
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
        return sum(comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(failures + 1))

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
    default copies decides); sweep_alone: the product's rule when no confirmation round decides
    (the whole paired interval below the line); before: the confirmation rule before paired rounds
    (one default, no gate), on the same rounds."""
    line = 1.0 - margin
    return {
        "after": trial["paired"]["low"] < line and trial["confirm_only"],
        "sweep_alone": trial["paired"]["high"] < line,
        "before": trial["before"],
    }


RULES = ("after", "sweep_alone", "before")


def counts(trials: list[dict], margin: float) -> dict:
    """Trials and named routes per kind and rule."""
    result = {kind: {"trials": 0, **{rule: 0 for rule in RULES}} for kind in ("aa", "power")}
    for trial in trials:
        result[trial["kind"]]["trials"] += 1
        for rule, named in verdicts(trial, margin).items():
            result[trial["kind"]][rule] += named
    return result


def table(paths: list[str]) -> str:
    """The figures of saved runs (aa_power.json files), one markdown row per run and layout, the
    rules applied to the recorded trials."""
    rows = [
        "| run | layout | objective | A/A trials | false winners: after | sweep alone | before | power trials | "
        "found: after | sweep alone | before | measured slowdown | plain holders: slowest / fastest | "
        "stage-1 rounds (median) |",
        "|" + " --- |" * 14,
    ]
    for path in paths:
        d = json.loads(Path(path).read_text())
        layouts = sorted({t.get("layout", "processes") for t in d["trials"]})
        for layout in layouts:
            trials = [t for t in d["trials"] if t.get("layout", "processes") == layout]
            c = counts(trials, d["margin"])
            aa, pw = c["aa"], c["power"]
            n_aa, n_pw = max(aa["trials"], 1), max(pw["trials"], 1)
            plain = [
                v
                for k, v in d["process_median_ms"].items()
                if (k.startswith("A") and layout == "processes") or (k.startswith("P") and layout == "shared")
            ]
            rounds = (
                statistics.median(t["paired"]["rounds"] for t in trials if t["kind"] == "aa") if aa["trials"] else "-"
            )
            rows.append(
                f"| {Path(path).stem} | {layout} | {d['objective']} | {aa['trials']} | {aa['after']} "
                f"({aa['after'] / n_aa:.1%}, ≤{upper_bound(aa['after'], aa['trials']):.1%}) | "
                f"{aa['sweep_alone']} ({aa['sweep_alone'] / n_aa:.0%}) | {aa['before']} ({aa['before'] / n_aa:.1%}) | "
                f"{pw['trials']} | {pw['after']} ({pw['after'] / n_pw:.0%}, ≥{lower_bound(pw['after'], pw['trials']):.0%}) | "
                f"{pw['sweep_alone']} ({pw['sweep_alone'] / n_pw:.0%}) | {pw['before']} ({pw['before'] / n_pw:.0%}) | "
                f"{d.get('measured_slowdown', float('nan')):+.1%} | "
                f"{(max(plain) / min(plain)) if plain else float('nan'):.3f} | {rounds} |"
            )
    return "\n".join(rows)


def main() -> int:
    if sys.argv[1:2] == ["table"]:
        print(table(sys.argv[2:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument(
        "--seconds",
        type=float,
        default=420.0,
        help="stop starting trials this long after the serving processes are ready",
    )
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--layouts", default="processes,shared")
    parser.add_argument("--pool", type=int, default=5, help="processes layout: processes serving the plain engine")
    parser.add_argument("--slowed", type=int, default=3, help="processes layout: processes serving the slowed engine")
    parser.add_argument("--shared-plain", type=int, default=4, help="shared layout: processes with a plain default")
    parser.add_argument("--shared-slowed", type=int, default=3, help="shared layout: processes with a slowed default")
    parser.add_argument("--copies", type=int, default=3, help="shared layout: route copies per process")
    parser.add_argument("--confirm-rounds", type=int, default=5)
    parser.add_argument("--margin", type=float, default=0.03)
    parser.add_argument("--power-every", type=int, default=3, help="every Nth trial of a layout is a power trial")
    parser.add_argument("--objective", default="gpuTime")
    parser.add_argument(
        "--round-seconds",
        type=float,
        help="timing.roundSeconds (the product's default otherwise); on CPU, where a call "
        "takes milliseconds, rounds long enough for 10 blocks of calls",
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--export", type=Path, help="also write aa_power.json here after every trial")
    parser.add_argument("--device", default="cuda", help="cpu: a quick check of the script without a GPU")
    args = parser.parse_args()
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from enginewright.measure.paired import alternate, one_after_the_other, round_order, stop_reason, summarise
    from enginewright.search.winner import confirm, twin
    from enginewright.worker.context import measuring_cpus
    from enginewright.worker.server import Server
    from workloads import setup as bench_setup

    bench = bench_setup(args.out, args.workload, args.device, args.objective, REPO)
    if args.round_seconds is not None:
        bench.timing = bench.timing.model_copy(update={"round_seconds": args.round_seconds})
    out, files, timing, say, workload = bench.out, bench.files, bench.timing, bench.say, bench.workload
    layouts = args.layouts.split(",")
    os.environ["AA_POWER_SAMPLE"] = str(files["inputs"][0])  # the slowed engine calibrates on it
    plain_backend = {"backend": "inductor", "backend_options": {"device": args.device}}
    plain = bench.context(margin=args.margin, measure_cpus=measuring_cpus())
    slowed = bench.context(
        "aa_power:SlowedInductor",
        {"device": args.device, "slowdown": args.slowdown},
        margin=args.margin,
        measure_cpus=measuring_cpus(),
    )
    engine = bench.build_default()

    # processes layout: one engine per process (A: plain, S: slowed); shared: P (plain default) and
    # Q (slowed default) processes, each with D, T and route copies R0.. loaded beside each other.
    servers: dict[str, Server] = {}
    if "processes" in layouts:
        for i in range(args.pool):
            servers[f"A{i}"] = Server(plain, "D", engine, out / "serve" / f"A{i}", references=False)
        for i in range(args.slowed):
            servers[f"S{i}"] = Server(slowed, "D", engine, out / "serve" / f"S{i}", references=False)
    route_keys = [f"R{i}" for i in range(args.copies)]
    if "shared" in layouts:
        for i in range(args.shared_plain):
            servers[f"P{i}"] = Server(plain, "D", engine, out / "serve" / f"P{i}", references=False)
        for i in range(args.shared_slowed):
            servers[f"Q{i}"] = Server(slowed, "D", engine, out / "serve" / f"Q{i}", references=False)
    for server in servers.values():
        server.launch()

    def ready(name: str) -> None:
        server = servers[name]
        server.wait_ready(600)
        if name[0] in "PQ":  # the twin as the default is served, the route copies plain
            server.add("T", engine, server.workdir / "load-T", 600, check=False)
            for key in route_keys:
                server.add(key, engine, server.workdir / f"load-{key}", 600, check=False, **plain_backend)

    with ThreadPoolExecutor(max_workers=len(servers)) as pool:
        list(pool.map(ready, servers))
    say(
        f"{len(servers)} serving processes ready ({args.objective}; calls per round: "
        + "; ".join(f"{n} " + ",".join(f"{k}={c}" for k, c in s.calls_of.items()) for n, s in servers.items())
        + ")"
    )

    rng = random.Random(args.seed)
    times: dict[str, list[float]] = {}
    trials: list[dict] = []

    def timer(name: str, key: str = "D"):
        def timed() -> float:
            value = servers[name].time(600, key=key)
            times.setdefault(f"{name}/{key}" if name[0] in "PQ" else name, []).append(value)
            return value

        return timed

    def summary() -> dict:
        medians = {k: statistics.median(v) for k, v in times.items() if v}
        result = {
            "workload": workload.name,
            "note": workload.note,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "torch": torch.__version__,
            "objective": args.objective,
            "slowdown": args.slowdown,
            "margin": args.margin,
            "confirm_rounds": args.confirm_rounds,
            "timing": timing.wire(),
            "layouts": layouts,
            "copies": args.copies,
            "cpus": len(os.sched_getaffinity(0)),
            "measure_cpus": sorted(plain.measure_cpus or []),
            "wall_s": round(time.monotonic() - bench.began, 1),
            "process_median_ms": medians,
        }
        for layout in layouts:
            mine = [t for t in trials if t["layout"] == layout]
            c = counts(mine, args.margin)
            result[layout] = {
                "aa": {**c["aa"], "after_rate_upper95": upper_bound(c["aa"]["after"], c["aa"]["trials"])},
                "power": {**c["power"], "after_power_lower95": lower_bound(c["power"]["after"], c["power"]["trials"])},
            }
        slow = [x for k, v in times.items() if k[0] == "S" or (k[0] == "Q" and k.endswith(("/D", "/T"))) for x in v]
        fast = [x for k, v in times.items() if k[0] == "A" or (k[0] in "PQ" and "/R" in k) for x in v]
        if slow and fast:
            result["measured_slowdown"] = statistics.median(slow) / statistics.median(fast) - 1
        # Lasting offsets: each shared process's route copies and twin against its default, and each
        # plain holder of the processes layout against the median of them all.
        result["copy_over_default"] = {
            k: medians[k] / medians[k.split("/")[0] + "/D"] for k in medians if k[0] in "PQ" and not k.endswith("/D")
        }
        result["trials"] = trials
        return result

    def write(result: dict) -> None:
        for folder in filter(None, (out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "aa_power.json").write_text(json.dumps(result, indent=1))

    def interleaved(name: str, keys: list[str]) -> list[float]:
        """One round of engines of a shared process, interleaved in blocks (as the worker times them)."""
        values = servers[name].interleave(keys, 600)
        for key, value in zip(keys, values):
            times.setdefault(f"{name}/{key}", []).append(value)
        return values

    def trial(layout: str, power: bool) -> dict:
        if layout == "processes":
            default, other = rng.sample([k for k in servers if k[0] == ("S" if power else "A")], 2)
            route = rng.choice([k for k in servers if k[0] == "A" and k not in (default, other)])
            time_round = one_after_the_other(timer(default), timer(route))
            confirmation = {"d": timer(default), twin("d"): timer(other), "r": timer(route)}

            def confirm_round(order: list[str]) -> list[float]:
                return [confirmation[key]() for key in order]

            names = {"default": default, "twin": other, "route": route}
        else:
            first, second = rng.sample([k for k in servers if k[0] == ("Q" if power else "P")], 2)
            r1, r2 = rng.choice(route_keys), rng.choice(route_keys)

            def time_round(default_first: bool) -> tuple[float, float]:
                if default_first:
                    d, r = interleaved(first, ["D", r1])
                else:
                    r, d = interleaved(first, [r1, "D"])
                return r, d

            in_process = {"d": "D", twin("d"): "T", "r": r2}

            def confirm_round(order: list[str]) -> list[float]:
                return interleaved(second, [in_process[key] for key in order])

            names = {"stage1": f"{first}/D vs {first}/{r1}", "confirmation": f"{second}/D,T vs {second}/{r2}"}
        route_ms, default_ms, stopped = alternate(
            time_round,
            lambda r, d: stop_reason(
                r,
                d,
                margin=args.margin,
                precision=timing.precision,
                min_rounds=timing.min_rounds,
                max_rounds=timing.max_rounds,
                min_rounds_if_slower=timing.min_rounds_if_slower,
            ),
        )
        paired = summarise(route_ms, default_ms, stopped)
        keys = ["d", twin("d"), "r"]
        rounds: dict[str, list[float]] = {k: [] for k in keys}
        for r in range(args.confirm_rounds):
            order = round_order(keys, r)
            for key, value in zip(order, confirm_round(order)):
                rounds[key].append(value)
        after = confirm(rounds, "d", args.margin)
        before = confirm({"d": rounds["d"], "r": rounds["r"]}, "d", args.margin)
        record = {
            "layout": layout,
            "kind": "power" if power else "aa",
            **names,
            "paired": paired.wire(),
            "confirm_ratio": after.ratios["r"],
            "rounds": rounds,
            "confirm_only": not after.default_won,
            "before": not before.default_won,
        }
        return {**record, **verdicts(record, args.margin)}

    index = 0
    trials_from = time.monotonic()
    while time.monotonic() - trials_from < args.seconds:
        layout = layouts[index % len(layouts)]
        index += 1
        per_layout = (index + len(layouts) - 1) // len(layouts)
        trials.append(trial(layout, bool(args.power_every) and per_layout % args.power_every == 0))
        write(summary())
        if index % 20 == 0:
            s = summary()
            say(
                f"{index} trials: "
                + "; ".join(
                    f"{layout} A/A {s[layout]['aa']['trials']} (after {s[layout]['aa']['after']}, "
                    f"before {s[layout]['aa']['before']}), "
                    f"power {s[layout]['power']['trials']} (after {s[layout]['power']['after']})"
                    for layout in layouts
                )
            )
    for server in servers.values():
        server.close()
    result = summary()
    write(result)
    for layout in layouts:
        aa, pw = result[layout]["aa"], result[layout]["power"]
        say(
            f"{layout}: A/A false winners after {aa['after']}/{aa['trials']} (95% upper bound "
            f"{aa['after_rate_upper95']:.1%}), before {aa['before']}/{aa['trials']}; power for a {args.slowdown:.0%} "
            f"win (measured {result.get('measured_slowdown', float('nan')):.1%}): after {pw['after']}/{pw['trials']} "
            f"(95% lower bound {pw['after_power_lower95']:.1%}), before {pw['before']}/{pw['trials']}"
        )
    say("copy/default (shared): " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(result["copy_over_default"].items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
