"""False winners and power of the winner rule with loads as the unit, measured with the product's own
measuring code (`rounds.interleaved_round`, `measure.paired.compare` / `stop_after`, `search.winner.confirm`).

    python bench/aa_loads.py --out OUT [--workload attention] [--seconds 480] [--slowdown 0.05]
        [--loads 2] [--confirm-loads 3] [--confirm-rounds 5] [--power-every 3] [--export DIR]
    python bench/aa_loads.py table RUN.json...   # the figures of saved runs, as a markdown table

One Inductor engine (the workload's default route, built by the product's build child) is loaded into
this process once as its primer (the process's first load, never timed, as the worker does), then
each trial loads it afresh, as many times as the product would, and drops those loads afterwards:

- stage 1: `--loads` loads playing the default and `--loads` playing the route, timed in paired
  rounds interleaved block by block until `stop_after` places the route; the route is a
  confirmation candidate when its interval reaches below the noise-margin line (`could_win`);
- confirmation: fresh `--confirm-loads` loads of each, at most `--confirm-rounds` interleaved rounds
  (fewer once `search.winner.settled`, as the worker stops), judged by `search.winner.confirm`.

A false winner (A/A trial): the pipeline names the route, which is the same engine. A power trial:
the default's loads are slowed on purpose (a host spin after each call of `--slowdown` times that
call's own duration, calibrated by measurement at the start: `Injection`), the route's are not, so the route is
truly faster; it counts only after its injection was verified by measurement: each of the
confirmation's slowed loads timed with the injection on and off, interleaved, in that same load (so
no per-load offset enters), their mean within +-20% of what was asked; otherwise the trial is
discarded and recorded as such. (Until 2026-12-02 only the first slowed load was verified: on the
H200 one load's effect ranged -0.4%..+6.3% for 5% asked within one call, so one load did not say
what the confirmation's five had.)

The same rounds are also judged by the rules before loads (`before`: stage 1 on the first load of
each, the confirmation on one candidate load against two default loads, `confirm_by_rounds`; since
the early stop, on the rounds the confirmation timed, which the stop may have cut short).
Trials are independent in their loads (every trial loads afresh); they share the process and the
host. Results go to OUT/aa_loads.json after every trial.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from aa_power import lower_bound, upper_bound  # noqa: E402  (Clopper-Pearson bounds)


class Injection:
    """A slowdown added to chosen loads' calls, switched per load: `on` holds the loads it applies to.
    `host` (default): after each call a host spin of `amount` times that call's own duration (the host's time to
    issue it). `device`: after each call a sleep kernel (`torch.cuda._sleep`) on the call's stream of
    `amount` times the call's unslowed time; on a device-bound workload (the GPU never waits for the
    host) it adds exactly that, where on a launch-bound one it would hide behind the next launches. A launch-bound call's device time is its host time, so the spin adds the same share
    whatever the host's speed at the moment. (A device-side sleep after the call, tried first,
    hid behind the next call's launches by an amount that moved with the host's state: it measured
    1.4-17% for 5% asked, median 3.7%; docs/benchmarks.md.)"""

    def __init__(self, kind: str = "host"):
        self.on: set[int] = set()
        self.amount = 0.0  # share of the call's own duration
        self.kind = kind
        self.call_ms = 0.0  # device: the call's time unslowed (set at calibration)
        self.cycles_per_ms = 0.0  # device: GPU clock cycles of torch.cuda._sleep per ms

    def wrap(self, runner) -> None:
        call, me = runner._call, id(runner)

        def slowed(tensors):
            if me not in self.on:
                return call(tensors)
            if self.kind == "device":  # a sleep kernel on the call's stream, `amount` of its time
                out = call(tensors)
                import torch

                torch.cuda._sleep(max(1, int(self.amount * self.call_ms * self.cycles_per_ms)))
                return out
            started = time.perf_counter()
            out = call(tensors)
            until = time.perf_counter() + (time.perf_counter() - started) * self.amount
            while time.perf_counter() < until:
                pass
            return out

        runner._call = slowed

    def calibrate_device(self, held, objective: str, inputs: dict, round_seconds: float) -> None:
        """The sleep kernel's cycles per ms (CUDA events around a long sleep) and the call's own time."""
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(20_000_000)
        end.record()
        torch.cuda.synchronize()
        self.cycles_per_ms = 20_000_000 / start.elapsed_time(end)
        self.call_ms = statistics.median(held.round(objective, inputs, round_seconds) for _ in range(5))


def main() -> int:
    if sys.argv[1:2] == ["table"]:
        print(table(sys.argv[2:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--seconds", type=float, default=480.0, help="stop starting trials after this long")
    parser.add_argument("--slowdown", type=float, default=0.05)
    parser.add_argument("--loads", type=int, help="stage-1 loads of each engine (default: the product's)")
    parser.add_argument("--confirm-loads", type=int, help="confirmation loads of each (default: the product's)")
    parser.add_argument("--confirm-rounds", type=int, help="confirmation rounds (default: the product's)")
    parser.add_argument("--margin", type=float, help="noise margin (default: the product's)")
    parser.add_argument("--power-every", type=int, default=3, help="every Nth trial is a power trial")
    parser.add_argument("--objective", default="gpuTime")
    parser.add_argument("--round-seconds", type=float, help="timing.roundSeconds (default: the product's)")
    parser.add_argument("--max-trials", type=int, default=100000)
    parser.add_argument("--export", type=Path, help="also write aa_loads.json here after every trial")
    parser.add_argument(
        "--confirm-candidates-only",
        action="store_true",
        help="A/A trials run the confirmation only for a stage-1 candidate, as the product does (the "
        "`before` rule, which needs one in every trial, is then judged on the candidate trials only: a "
        "biased subset, not comparable with runs without this flag)",
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--injection",
        choices=("host", "device"),
        default="host",
        help="how power trials slow the default down (device: for device-bound workloads, e.g. mlp)",
    )
    args = parser.parse_args()
    import torch

    from enginewright.api.models import Confirm, Search
    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure.paired import (
        compare,
        interval,
        load_key,
        round_order,
        rounds_until,
        stop_after,
        summarise_loads,
    )
    from enginewright.measure.rounds import Held, interleaved_round
    from enginewright.measure.timing import calls_per_round, warm_up
    from enginewright.search.winner import confirm, confirm_by_rounds, settled, twin
    from enginewright.worker.child import load_npz
    from workloads import setup as bench_setup

    bench = bench_setup(args.out, args.workload, args.device, args.objective, REPO)
    timing = bench.timing
    if args.round_seconds is not None:
        timing = timing.model_copy(update={"round_seconds": args.round_seconds})
    loads = args.loads or timing.loads
    confirm_loads = args.confirm_loads or Confirm().loads
    confirm_rounds = args.confirm_rounds or Confirm().rounds
    margin = args.margin if args.margin is not None else Search().noise_margin
    objective, round_seconds = args.objective, timing.round_seconds
    inputs = load_npz(str(bench.files["inputs"][0]))
    engine = bench.build_default().read_bytes()
    injection = Injection(args.injection)
    counter = {"n": 0}

    first: list[Held] = []

    def load_one() -> Held:
        """A load of the engine, as the serving process loads one: warmed, and (as `child.load` does
        for a later load of an engine file it holds) with the calls per round the first load's
        trial rounds found."""
        counter["n"] += 1
        runner = InductorBackend(device=args.device).load(engine, args.out / "loads" / f"L{counter['n']}")
        runner.run(inputs)
        warm_up(runner, inputs, objective, timing.warmup_iterations)
        injection.wrap(runner)
        calls = first[0].calls if first else calls_per_round(runner, inputs, objective, round_seconds)
        held = Held(runner, calls, f"L{counter['n']}")
        if not first:  # the primer: the one whose trial rounds later loads take
            first.append(held)
        return held

    def rounds_of(held: dict[str, Held], count: int | None = None, stop=None) -> dict[str, list[float]]:
        keys = list(held)

        def one(index: int) -> dict[str, float]:
            order = round_order(keys, index)
            return dict(zip(order, interleaved_round([held[k] for k in order], objective, inputs, round_seconds)))

        times, _ = rounds_until(one, stop or (lambda t: "enough" if len(t[keys[0]]) >= count else None))
        return times

    def close(held) -> None:
        for h in held:
            injection.on.discard(id(h.runner))
            h.runner.close()

    primer = load_one()  # the process's first load: never timed (the worker's primer)
    bench.say(f"primer loaded ({primer.calls} calls a round)")

    def measured_slowdown(h: Held, rounds: int = 6) -> float:
        """The injection's own effect on one load: the load timed with it on and off, interleaved."""

        class Toggle(Held):
            def timed_calls(self, objective, inputs, calls):
                if self.key == "on":
                    injection.on.add(id(self.runner))
                try:
                    return super().timed_calls(objective, inputs, calls)
                finally:
                    if self.key == "on":
                        injection.on.discard(id(self.runner))

        was_on = id(h.runner) in injection.on
        injection.on.discard(id(h.runner))
        times = rounds_of({"off": Toggle(h.runner, h.calls, "off"), "on": Toggle(h.runner, h.calls, "on")}, rounds)
        if was_on:
            injection.on.add(id(h.runner))
        return math.exp(statistics.fmean(math.log(a / b) for a, b in zip(times["on"], times["off"]))) - 1

    # Calibrate the injection by measurement: scale it until it measures within 10% of what is asked.
    probe = load_one()
    injection.amount = args.slowdown
    if args.injection == "device":
        injection.calibrate_device(probe, objective, inputs, round_seconds)
    calibration = []
    for _ in range(5):
        got = measured_slowdown(probe, 8)
        calibration.append({"amount": injection.amount, "measured": got})
        if abs(got - args.slowdown) <= 0.1 * args.slowdown:
            break
        scaled = injection.amount * args.slowdown / max(got, args.slowdown / 4)
        injection.amount = min(4 * args.slowdown, max(args.slowdown / 4, scaled))  # a noisy read cannot run away
    close([probe])
    bench.say(f"injection calibrated: {calibration}")

    trials: list[dict] = []
    began = time.monotonic()

    def summary() -> dict:
        aa = [t for t in trials if t["kind"] == "aa"]
        power = [t for t in trials if t["kind"] == "power" and t["verified"]]
        discarded = [t for t in trials if t["kind"] == "power" and not t["verified"]]
        slowdowns = [t["verified_slowdown"] for t in trials if t["kind"] == "power"]
        result = {
            "workload": bench.workload.name,
            "note": bench.workload.note,
            "objective": objective,
            "gpu": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
            "torch": torch.__version__,
            "timing": timing.wire(),
            "injection": args.injection,
            "loads": loads,
            "confirm_loads": confirm_loads,
            "confirm_rounds": confirm_rounds,
            "confirm_stop": "settled",  # at most confirm_rounds: stopped once settled (since 2026-12-04)
            "margin": margin,
            "slowdown": args.slowdown,
            "calibration": calibration,
            "wall_s": round(time.monotonic() - bench.began, 1),
            "seconds_per_trial": round((time.monotonic() - began) / max(1, len(trials)), 2),
            "command": shlex.join(["python3", "bench/aa_loads.py", *sys.argv[1:]]),
        }
        for rule in ("after", "sweep_alone", "before"):
            judged = [t for t in aa if t[rule] is not None]  # `before` needs a confirmation every trial
            result[rule] = {
                "aa": {"trials": len(judged), "false_winners": sum(t[rule] for t in judged)},
                "power": {"trials": len(power), "found": sum(t[rule] for t in power)},
            }
            r = result[rule]
            r["aa"]["upper95"] = upper_bound(r["aa"]["false_winners"], len(judged))
            r["power"]["lower95"] = lower_bound(r["power"]["found"], len(power))
        result["confirm_candidates_only"] = args.confirm_candidates_only
        result["power_discarded"] = len(discarded)
        # every power trial, by the slowdown its confirmation loads measured: found / trials per bin
        edges = [(-1.0, 0.03), (0.03, 0.04), (0.04, 0.06), (0.06, 1.0)]
        result["power_by_verified"] = {
            f"{low:+.0%}..{high:+.0%}": {
                "trials": len(
                    hits := [
                        t
                        for t in trials
                        if t["kind"] == "power"
                        and t["verified_slowdown"] is not None
                        and low <= t["verified_slowdown"] < high
                    ]
                ),
                "found": sum(t["after"] for t in hits),
            }
            for low, high in edges
        }
        result["verified_slowdown_median"] = statistics.median(slowdowns) if slowdowns else None
        result["trials"] = trials
        return result

    def write() -> None:
        data = json.dumps(summary(), indent=1)
        for folder in filter(None, (args.out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "aa_loads.json").write_text(data)

    def progress() -> None:
        if len(trials) % 10 == 0:
            s = summary()
            bench.say(
                f"{len(trials)} trials ({s['seconds_per_trial']} s each): A/A false winners "
                f"{s['after']['aa']['false_winners']}/{s['after']['aa']['trials']} (before "
                f"{s['before']['aa']['false_winners']}), power {s['after']['power']['found']}/"
                f"{s['after']['power']['trials']} (discarded {s['power_discarded']}, verified slowdown "
                f"{s['verified_slowdown_median']})"
            )

    while time.monotonic() - began < args.seconds and len(trials) < args.max_trials:
        power = bool(args.power_every) and (len(trials) + 1) % args.power_every == 0
        started = time.monotonic()
        # stage 1: the default's loads (slowed in a power trial) against the route's, paired rounds
        held = {}
        for i in range(loads):
            held[load_key("d", i)] = load_one()
            held[load_key("r", i)] = load_one()
        if power:
            injection.on.update(id(h.runner) for k, h in held.items() if k.startswith("d"))
        d_keys, r_keys = [load_key("d", i) for i in range(loads)], [load_key("r", i) for i in range(loads)]

        def stop(t: dict) -> str | None:
            n = len(t[d_keys[0]])
            return stop_after(
                compare([t[k] for k in r_keys], [t[k] for k in d_keys]),
                n,
                margin=margin,
                precision=timing.precision,
                min_rounds=timing.min_rounds,
                max_rounds=timing.max_rounds,
                min_rounds_if_slower=timing.min_rounds_if_slower,
            )

        times = rounds_of(held, stop=stop)
        stage1 = summarise_loads(
            compare([times[k] for k in r_keys], [times[k] for k in d_keys]), len(times[d_keys[0]]), stop(times)
        )
        _, low_before, high_before = interval(times[r_keys[0]], times[d_keys[0]])
        close(held.values())
        line = 1.0 - margin
        candidate = stage1.low < line
        # confirmation: fresh loads of both (with --confirm-candidates-only, as the product does: a
        # candidate's, and every power trial's, whose injection it verifies)
        after = before = rounds = verified = per_load = None
        if candidate or power or not args.confirm_candidates_only:
            held = {}
            for i in range(confirm_loads):
                held[load_key("d", i)] = load_one()
                held[load_key("r", i)] = load_one()
            if power:
                injection.on.update(id(h.runner) for k, h in held.items() if k.startswith("d"))
            rounds = rounds_of(  # as the worker does: at most confirm_rounds, fewer once settled
                held, stop=lambda t: "enough" if len(t["d"]) >= confirm_rounds or settled(t, "d", margin) else None
            )
            after = confirm(rounds, "d", margin)
            before = (
                confirm_by_rounds(
                    {"d": rounds["d"], twin("d"): rounds[load_key("d", 1)], "r": rounds["r"]}, "d", margin
                )
                if confirm_loads > 1
                else after
            )
            if power:  # the injection's effect on every slowed load the confirmation timed, each in itself
                per_load = [measured_slowdown(held[load_key("d", i)], 6) for i in range(confirm_loads)]
                verified = statistics.fmean(per_load)
            close(held.values())
        record = {
            "kind": "power" if power else "aa",
            "seconds": round(time.monotonic() - started, 2),
            "stage1": stage1.wire(),
            "candidate": candidate,
            "confirm": None  # not run
            if after is None
            else {
                "ratio": after.ratios.get("r"),
                "low": after.low,
                "high": after.high,
                "named": not after.default_won,
            },
            "after": candidate and after is not None and not after.default_won,
            "sweep_alone": stage1.high < line,
            "before": None if before is None else low_before < line and not before.default_won,
            "verified_slowdown": verified,
            "verified": counts_as_power(verified, args.slowdown),
            "verified_per_load": per_load,
            "rounds": rounds,
        }
        trials.append(record)
        write()
        progress()
    close([primer])
    write()
    s = summary()
    bench.say(json.dumps({k: v for k, v in s.items() if k != "trials"}))
    return 0


def counts_as_power(measured: float | None, asked: float, tolerance: float = 0.2) -> bool:
    """A power trial counts only when its injected slowdown, measured in the trial's own slowed load,
    is within `tolerance` (relative) of what was asked: a 5% win that measured 1.9% says nothing
    about finding 5% wins."""
    return measured is not None and abs(measured - asked) <= tolerance * asked


def table(paths: list[str]) -> str:
    """One markdown row per saved run."""
    rows = [
        "| run | workload | loads (stage 1 / confirmation) | A/A trials | false winners: after (≤95%) | "
        "before | power trials (discarded) | found: after (≥95%) | before | verified slowdown (median) | "
        "s / trial |",
        "|" + " --- |" * 11,
    ]
    for path in paths:
        d = json.loads(Path(path).read_text())
        a, b = d["after"], d["before"]
        rows.append(
            f"| {Path(path).parent.name}/{Path(path).stem} | {d['workload']} | {d['loads']} / {d['confirm_loads']} | "
            f"{a['aa']['trials']} | {a['aa']['false_winners']} ({a['aa']['upper95']:.1%}) | {b['aa']['false_winners']} | "
            f"{a['power']['trials']} ({d['power_discarded']}) | {a['power']['found']} ({a['power']['lower95']:.0%}) | "
            f"{b['power']['found']} | {_pct(d['verified_slowdown_median'])} | {d['seconds_per_trial']} |"
        )
    return "\n".join(rows)


def _pct(value) -> str:
    return "—" if value is None else f"{value:+.1%}"


if __name__ == "__main__":
    sys.exit(main())
