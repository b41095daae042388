"""Do engines built side by side run differently from engines built alone? (issue 19, session 31)

    python bench/parallel_build_effect.py --out OUT [--workload mlp] [--device cuda] [--reps 3]
        [--routes ';coordinate_descent_tuning=true;triton.cudagraphs=true;compile=false']
        [--rounds 5] [--loads 2] [--build-budget-s S] [--export DIR]

`tune --build-parallelism auto` builds up to 4 routes at once (0.82-0.94x tune's wall time on an
H100, session 31). Timing never overlaps a build, but a build that times kernels to choose among
them (Inductor's autotuning of its kernels' configurations, coordinate descent; TensorRT's tactics)
then times them beside the other builds, on the same GPU and cores, and the engine keeps what it
chose. This measures what that does to the engines, with the product's own code:

1. `--reps` times: every route of `--routes` (`;`-separated, each `knob=value,knob=value`, empty:
   the default) built alone, one after another (`worker.measure.build`, one build process), then all
   of them at once (a build process and a thread each, as a batch's group is built: `Builders`);
2. all the engines loaded `--loads` times each into one fresh serving process and timed in
   `--rounds` interleaved rounds (`worker.measure.interleave`, as a confirmation times its engines):
   an engine's time is the geometric mean over its loads and rounds, so a load's lasting offset
   (up to +-20% on an H200) weighs 1/loads in it;
3. per route, each rep's engine built beside the others over the one built alone, their geometric
   mean over the reps with a 95% interval across reps, and how many distinct engine digests each way
   (equal bytes: the builds chose alike); and `pooled`, the same over every rep of every route whose
   builds did not all give the same bytes (identical engines cannot differ by how they were built).

4. per route, how far its builds run apart (`build_spread`: alone, beside, all): a one-way analysis
   of variance over the loads' times, builds as groups, that separates a build's lasting offset
   (`between_builds`) from a load's (`between_loads`), with F's p-value; the slowest build over the
   fastest. Session 42 built coordinate descent + CUDA graphs on resnet50 twice, 1.578 and 1.803 ms
   (14% apart), while CUDA graphs alone ran 1.616 and 1.622: this says whether a tuned route rebuilds
   to the same speed (a route built to the same bytes every time, as the eager one, is the control);
   and `config_spread`, how many of its kernels' configs, chosen by timing while building, differ
   among its builds (on an H100, session 44: all 24 of resnet50's with coordinate descent), and
   `best_of_two`, what keeping the faster of two builds would give over one build.

A ratio whose interval holds 1 says no effect was seen at that precision. OUT/parallel_build_effect.json
(and --export) is written after each step, from this run's own measurements.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from enginewright.api.routes import Route  # noqa: E402
from enginewright.measure.paired import load_key  # noqa: E402
from enginewright.measure.stats import f_sf, t_quantile  # noqa: E402
from gpu_tuning import geomean  # noqa: E402


def parse_routes(text: str) -> list[dict[str, str]]:
    """`;`-separated routes, each `knob=value,knob=value` (empty: the default route)."""
    routes = []
    for part in text.split(";"):
        knobs = dict(pair.split("=", 1) for pair in part.split(",") if pair.strip())
        routes.append({k.strip(): v.strip() for k, v in knobs.items()})
    if len({json.dumps(r, sort_keys=True) for r in routes}) != len(routes):
        raise SystemExit(f"--routes names a route twice: {text!r}")
    return routes


def engine_name(index: int, how: str, rep: int) -> str:
    """An engine's key in the rounds: its route's index in --routes, how it was built, and its rep
    (plain letters: a load key's own marks, `@`, must not appear in it)."""
    return f"r{index}-{how}{rep}"


def ratio_across_reps(beside_ms: list[float], alone_ms: list[float]) -> dict:
    """Rep by rep, the engine built beside others over the one built alone: their geometric mean and
    its 95% interval (Student t on the log ratios; none with one rep)."""
    logs = [math.log(b / a) for b, a in zip(beside_ms, alone_ms, strict=True)]
    mean = statistics.fmean(logs)
    figures = {"ratio": round(math.exp(mean), 4), "per_rep": [round(math.exp(x), 4) for x in logs]}
    if len(logs) > 1:
        half = t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        figures.update(low=round(math.exp(mean - half), 4), high=round(math.exp(mean + half), 4))
    return figures


def pooled_ratio(by_route: dict) -> dict | None:
    """The beside/alone ratio over every rep of every route whose engines were not all the same
    bytes (one distinct digest each way, shared: nothing the build did could differ), with its 95%
    interval across those reps; None where no route qualifies."""
    beside, alone, names = [], [], []
    for name, figures in by_route.items():
        if figures["distinct_digests"] == {"alone": 1, "beside": 1} and figures["shared_digests"] == 1:
            continue
        beside += figures["beside_ms"]
        alone += figures["alone_ms"]
        names.append(name)
    if not names:
        return None
    return {"routes": names, **ratio_across_reps(beside, alone)}


def build_spread(rounds: dict[str, list[float]], engines: list[str], loads: int) -> dict | None:
    """How far one route's builds (ENGINES, the same recipe each) run apart beyond what loading one
    engine again does. Each load's time is the geometric mean of its rounds; a one-way analysis of
    variance on their logs, builds as groups and loads as replicates, splits the spread into
    `between_builds` (the standard deviation of a build's lasting offset, ~ its coefficient of
    variation) and `between_loads` (a load's, the per-load offset the protocol already averages),
    with F and its p-value (small: the builds differ by more than their loads do). `max_over_min`:
    the slowest build's time over the fastest's. None with fewer than 2 builds or 2 loads."""
    if len(engines) < 2 or loads < 2:
        return None
    logs = [[math.log(geomean(rounds[load_key(e, i)])) for i in range(loads)] for e in engines]
    means = [statistics.fmean(y) for y in logs]
    grand = statistics.fmean(means)
    between = loads * sum((m - grand) ** 2 for m in means) / (len(engines) - 1)
    df_within = len(engines) * (loads - 1)
    within = sum((v - m) ** 2 for y, m in zip(logs, means, strict=True) for v in y) / df_within
    f = between / within if within > 0 else (math.inf if between > 0 else math.nan)  # nan: all alike
    return {
        "builds": len(engines),
        "max_over_min": round(math.exp(max(means) - min(means)), 4),
        "between_builds": round(math.sqrt(max(0.0, (between - within) / loads)), 4),
        "between_loads": round(math.sqrt(within), 4),
        "f": round(f, 3) if math.isfinite(f) else None,
        "p": 1.0 if math.isnan(f) else round(f_sf(f, len(engines) - 1, df_within), 4),
    }


def config_spread(builds: list[dict[str, dict]]) -> dict:
    """How one route's builds chose their kernels' configs by timing (`inductor.tuned_configs` of each
    build's engine): the kernels any build tuned, how many each tuned (and of those by coordinate
    descent), and `differ`, the kernels whose config is not the same in every build (one a build did
    not tune counts). Builds that choose alike every time would show no spread of this kind."""
    kernels = sorted(set().union(*builds)) if builds else []
    return {
        "kernels": len(kernels),
        "tuned": [len(b) for b in builds],
        "by_descent": [sum(c.get("found_by_coordesc") is True for c in b.values()) for b in builds],
        "differ": sum(len({json.dumps(b.get(k), sort_keys=True) for b in builds}) > 1 for k in kernels),
    }


def best_of_two(ms: list[float]) -> dict | None:
    """What keeping the faster of two builds of one route would give over taking one build, from
    builds already timed side by side (MS, one time per build): over every pair of them, the mean of
    the faster one's time against the mean of one build's, and the worst build over the best. None
    with fewer than 2 builds. (It takes the times as known; a product that keeps the faster of two
    must also measure which one is, in the same rounds.)"""
    if len(ms) < 2:
        return None
    pairs = list(itertools.combinations(ms, 2))
    faster = statistics.fmean(min(pair) for pair in pairs)
    return {
        "builds": len(ms),
        "one_over_faster_of_two": round(statistics.fmean(ms) / faster, 4),
        "worst_over_best": round(max(ms) / min(ms), 4),
    }


def rep_fits(spent: float, longest_rep: float, budget: float) -> bool:
    """Whether another rep of builds fits --build-budget-s: the first always, then while the seconds
    spent plus the longest rep so far stay within it (0: no budget)."""
    return budget <= 0 or spent + longest_rep <= budget


def engine_ms(rounds: dict[str, list[float]], engine: str, loads: int) -> float:
    """An engine's ms per call: the geometric mean over all its loads' rounds."""
    return geomean([ms for index in range(loads) for ms in rounds[load_key(engine, index)]])


def save(args, figures: dict) -> None:
    text = json.dumps(figures, indent=1)
    (args.out / "parallel_build_effect.json").write_text(text)
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        (args.export / "parallel_build_effect.json").write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--routes", default=";coordinate_descent_tuning=true;triton.cudagraphs=true;compile=false")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loads", type=int, default=2, help="loads of each engine in the rounds")
    parser.add_argument(
        "--build-budget-s",
        type=float,
        default=0.0,
        help="start another rep only while the seconds since the first build plus the longest rep "
        "so far fit in this (0: all --reps); the engines built are then timed as usual",
    )
    parser.add_argument("--export", type=Path)
    args = parser.parse_args()
    routes = parse_routes(args.routes)

    from enginewright.backends.inductor import tuned_configs
    from enginewright.worker.measure import build, interleave
    from enginewright.worker.process import Builders
    from inductor_cost import known_workloads
    from workloads import setup

    shutil.rmtree(args.out, ignore_errors=True)
    bench = setup(args.out, known_workloads()[args.workload], args.device, "gpuTime", REPO)
    ctx = bench.context()
    engines_dir = args.out / "engines"
    engines_dir.mkdir(parents=True)
    figures: dict = {
        "workload": args.workload,
        "device": args.device,
        "routes": {f"r{i}": str(Route.of(r)) for i, r in enumerate(routes)},
        "reps": args.reps,
        "rounds": args.rounds,
        "loads": args.loads,
        "command": sys.argv,
        "builds": [],
    }
    engines: dict[str, Path] = {}
    digests: dict[str, str | None] = {}
    configs: dict[str, dict[str, dict]] = {}

    def keep(built, index: int, how: str, rep: int) -> None:
        if built.engine_path is None:
            raise SystemExit(f"{built.route} ({how}, rep {rep}) failed to build: {built.entry.error}")
        name = engine_name(index, how, rep)
        engines[name] = engines_dir / f"{name}{ctx.engine_suffix}"
        shutil.copyfile(built.engine_path, engines[name])
        digests[name] = built.entry.engine_sha256  # (the build's own digest of these bytes)
        configs[name] = tuned_configs(engines[name].read_bytes())  # (this bench's workloads are Inductor's)
        figures["builds"].append({"engine": name, "build_s": built.entry.build_seconds, "sha256": digests[name]})
        save(args, figures)

    first, longest, reps = time.monotonic(), 0.0, 0
    while reps < args.reps and rep_fits(time.monotonic() - first, longest, args.build_budget_s):
        rep, rep_began = reps, time.monotonic()
        with Builders(args.out / "builds" / f"alone-{rep}", 1) as builders:
            for index, knobs in enumerate(routes):
                keep(build(ctx, Route.of(knobs), "bench", f"alone-{rep}", builders), index, "alone", rep)
        began = time.monotonic()
        with Builders(args.out / "builds" / f"beside-{rep}", len(routes)) as builders:
            with ThreadPoolExecutor(len(routes)) as pool:
                group = list(pool.map(lambda k: build(ctx, Route.of(k), "bench", f"beside-{rep}", builders), routes))
        for index, built in enumerate(group):
            keep(built, index, "beside", rep)
        reps, longest = reps + 1, max(longest, time.monotonic() - rep_began)
        figures["reps_built"] = reps
        bench.say(
            f"rep {rep}: {len(routes)} routes built alone in {began - rep_began:.1f} s, "
            f"then side by side in {time.monotonic() - began:.1f} s"
        )
    if reps < args.reps:
        bench.say(f"built {reps} of {args.reps} reps: another would pass --build-budget-s {args.build_budget_s:.0f}")

    bench.say(f"timing {len(engines)} engines, {args.loads} loads each, in {args.rounds} interleaved rounds")
    rounds = interleave(ctx, engines, args.rounds, args.out / "interleave", loads=args.loads)
    figures["ms"] = {name: round(engine_ms(rounds, name, args.loads), 5) for name in engines}
    figures["by_route"] = {}
    for index, knobs in enumerate(routes):
        name = str(Route.of(knobs))
        alone, beside = ([engine_name(index, how, rep) for rep in range(reps)] for how in ("alone", "beside"))
        built_alike = {how: {digests[e] for e in keys} for how, keys in (("alone", alone), ("beside", beside))}
        alone_ms, beside_ms = ([figures["ms"][e] for e in keys] for keys in (alone, beside))
        figures["by_route"][name] = {
            "beside_over_alone": ratio_across_reps(beside_ms, alone_ms),
            "alone_ms": alone_ms,
            "beside_ms": beside_ms,
            "distinct_digests": {how: len(d) for how, d in built_alike.items()},
            "shared_digests": len(built_alike["alone"] & built_alike["beside"]),
            "build_spread": {
                how: build_spread(rounds, keys, args.loads)
                for how, keys in (("alone", alone), ("beside", beside), ("all", alone + beside))
            },
            "config_spread": config_spread([configs[e] for e in alone + beside]),
            "best_of_two": best_of_two(alone_ms + beside_ms),
        }
        bench.say(f"{name}: built beside others / alone {json.dumps(figures['by_route'][name]['beside_over_alone'])}")
        bench.say(f"{name}: spread across its builds {json.dumps(figures['by_route'][name]['build_spread'])}")
    figures["pooled"] = pooled_ratio(figures["by_route"])
    bench.say(f"pooled: built beside others / alone {json.dumps(figures['pooled'])}")
    save(args, figures)
    print(json.dumps({"by_route": figures["by_route"], "pooled": figures["pooled"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
