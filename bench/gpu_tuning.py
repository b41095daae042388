"""Measure tuning on a real GPU with the Inductor backend: search modes, speedups, cost and noise.

    python bench/gpu_tuning.py run --workloads resnet50,encoder --out OUT [--gpus 0,1] [--export $OUT]
    python bench/gpu_tuning.py docs RESULTS.json... --docs docs   # writes docs/benchmarks.md

`run` tunes each workload with the product's own flow (`enginewright.cli.tune`):
  1. mixed search over KNOBS (or BENCH_KNOBS; its stage 1 is exactly the fast search; the fast winner is read from
     stage 1 with the same noise-margin rule), with the confirmation round;
  2. full search over the three knobs of FULL_KNOBS (every combination), sharing the cache, with no
     confirmation round (top_k 0, to fit the call's budget): its winner is its sweep's, and only
     the side-by-side measurement says how it stands (the product's full mode confirms its top 3);
  3. side by side, in one interleaved measurement: default, fast winner, mixed winner, full winner,
     all loaded into one serving process, each round interleaved block by block (the worker's
     confirmation; the committed tables predate it: each engine was then in a process of its own);
  4. an A/A test: the default engine against two copies of itself for AA_ROUNDS rounds, split into
     trials of CONFIRM_ROUNDS rounds; how often the confirmation rule, and a strict "any faster
     measurement wins" rule, would name a false winner.
Workloads listed together run in parallel, one GPU each (--gpus), each GPU's process on its own share
of the cores, or one after another. `run` again with the same --out resumes a workload's run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

# mixed search's knobs; BENCH_KNOBS (comma-separated) names others, as a call too short for all five does
KNOBS = os.environ.get(
    "BENCH_KNOBS", "compile,triton.cudagraphs,max_autotune,coordinate_descent_tuning,freezing"
).split(",")
FULL_KNOBS = ["triton.cudagraphs", "coordinate_descent_tuning", "freezing"]
TIMING = {"objective": os.environ.get("BENCH_OBJECTIVE", "gpuTime")}  # the rest: api.models.Timing's defaults
MODES = os.environ.get("BENCH_MODES", "mixed,full").split(",")  # mixed always runs (its stage 1 is fast)
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "520"))  # per call: the device allows 10 minutes
STARTED = time.time()
CONFIRM_ROUNDS = 5
SIDE_BY_SIDE_ROUNDS = 9
AA_ROUNDS = int(os.environ.get("BENCH_AA_ROUNDS", "40"))
MIXED_MAX_ROUTES = 10  # stage 1 (6 routes, the eager one included) + at most 4 combinations, best predicted first
# What the tables of docs/benchmarks.md were measured with (2026-11-29, before paired rounds): the
# page renders them from docs/benchmarks/raw/, so it describes that run, not today's constants.
TABLES_RUN = {
    "knobs": ["triton.cudagraphs", "max_autotune", "coordinate_descent_tuning", "freezing"],
    "max_routes": 9,
    "timing": {"warmup_iterations": 10, "iterations": 50, "repeats": 5, "min_seconds": 0.2},
}
THRESHOLD = 1e-3  # cosine distance to the float32 eager reference (fp16 routes land near 1e-6)


def geomean(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


def cost_seconds(entries) -> float:
    """Build + measuring time of a set of routes (what a mode spends)."""
    return sum((e.build_seconds or 0) + (e.load_info or {}).get("load_seconds", 0) + e.spent_seconds for e in entries)


def sweep_winner(entries, default: str) -> str:
    """The winner of `entries` by their sweep alone, with the 3% noise margin (`choose_winner`): fast
    mode's (stage 1 of mixed) and full's. Routes an earlier call measured count as much as this
    call's: full runs with no confirmation round (top_k 0) after mixed in the same cache, and the
    product's own decision, by which a reused number alone never wins, would leave out every route
    mixed measured (on the H100, resnet50's full search then named `-freezing=true
    -triton.cudagraphs=true`, 5% slower side by side than cudagraphs alone, which led its sweep)."""
    from enginewright.search.winner import choose_winner, noise_margin

    return choose_winner(entries, default, noise_margin(entries, 0.03)).winner_id


def run_workload(name: str, out: Path, say) -> dict:
    import torch

    from enginewright.cli.tune import TuneError, TuneOptions, tune
    from enginewright.worker.batch import Worker
    from workloads import WORKLOADS, prepare

    workload = next(w for w in WORKLOADS if w.name == name)
    folder = out / name
    began = time.monotonic()
    data = folder / "data"
    if (data / f"{name}.pt2").exists() and (data / "references-1.npz").exists():  # a resumed run: same bytes
        files = {
            "program": data / f"{name}.pt2",
            "inputs": sorted(data.glob("inputs-*.npz")),
            "references": sorted(data.glob("references-*.npz")),
        }
        say(f"{name}: resuming the run in {folder}")
    else:
        files = prepare(workload, data, "cuda")
        say(f"{name}: exported in {time.monotonic() - began:.1f}s")
    cache = folder / "cache"
    common = dict(
        backend="inductor",
        model=files["program"],
        inputs=files["inputs"],
        references=files["references"],
        metric="cosine",
        threshold=THRESHOLD,
        settings={"input_dtype": "float16"},
        timing=TIMING,
        route_timeout=300,
        deadline=STARTED + BUDGET_S - 120,
        confirm_rounds=CONFIRM_ROUNDS,
        top_k=3,
        noise_margin=0.03,
        build_parallelism=int(os.environ.get("BUILD_PARALLELISM", "4")),
        cache=cache,
        backend_options={"device": "cuda"},
        routes_per_batch=16,
        max_routes=24,
    )
    from enginewright.backends.inductor import InductorBackend

    available = {k.name for k in InductorBackend(device="cuda").knobs()}
    knobs = [(k, ["true", "false"]) for k in KNOBS if k in available]
    full_knobs = [(k, ["true", "false"]) for k in FULL_KNOBS if k in available]

    planned = {}
    t0 = time.monotonic()
    mixed = tune(
        TuneOptions(**{**common, "max_routes": MIXED_MAX_ROUTES}, out=folder / "mixed", mode="mixed", knobs=knobs),
        say,
        on_plan=lambda n: planned.__setitem__("mixed", n),
    )
    mixed_wall = time.monotonic() - t0
    t0 = time.monotonic()
    full, full_not_run = mixed, None
    # A search the call's deadline cut short is finished by the next call of the same command (it
    # resumes from the cache): full search, side by side and A/A wait for it, so this call ends at once
    # and gives back the device-seconds they would take (resnet50 on the H100: ~90 s a call). A search
    # cut short for another reason (maxRoutes kept some of stage 2's combinations) goes on: a rerun
    # would cut it the same way.
    cut_short = mixed.summary.get("cut_short") if time.time() >= common["deadline"] else None
    if cut_short:
        full_not_run = f"mixed search cut short ({cut_short}): run the same command again"
        say(f"{name}: {full_not_run}; no full search, side-by-side or A/A in this call")
    elif "full" in MODES:
        try:
            full = tune(
                TuneOptions(**{**common, "top_k": 0}, out=folder / "full", mode="full", knobs=full_knobs),
                say,
                on_plan=lambda n: planned.__setitem__("full", n),
            )
        except TuneError as exc:
            if time.time() < common["deadline"]:
                raise
            # mixed's result is kept: the call's budget ran out before full could measure its default
            # (on the H200 resnet50's two max-autotune builds, 201 and 220 s, took a whole call)
            full_not_run = f"the call's budget ran out before full search: {exc}"
            say(f"{name}: {full_not_run}; mixed's result is written without it")
    full_wall = time.monotonic() - t0

    by_id = {e.route_id: e for e in mixed.entries + full.entries}
    default = mixed.summary["default_id"]
    stage1 = [e for e in mixed.entries if e.stage == "stage1"]
    full_entries = full.entries  # tune() returns the entries of the routes it planned
    winners = {
        "fast": sweep_winner(stage1, default),
        "mixed": mixed.decision.winner_id,
        "full": sweep_winner(full_entries, default) if full is not mixed else mixed.decision.winner_id,
    }

    # Side by side: every distinct winner and the default, interleaved, as the confirmation round times them.
    ctx_worker = Worker(_context(common, folder / "side", cache, say))
    distinct = [by_id[i] for i in dict.fromkeys(winners.values()) if i != default and by_id[i].engine_uri]
    side, side_rounds = {}, {}
    t0 = time.monotonic()
    if distinct and not cut_short:
        side_rounds = ctx_worker.confirm(distinct, by_id[default], SIDE_BY_SIDE_ROUNDS, early_stop=False)
        for rid, times in side_rounds.items():
            side[rid] = geomean([d / t for d, t in zip(side_rounds[default], times)])
    side[default] = 1.0
    side_wall = time.monotonic() - t0

    # A/A: the default engine against two copies of itself.
    t0 = time.monotonic()
    if cut_short:
        aa = {"skipped": full_not_run}
    else:
        aa = _aa_test(ctx_worker, by_id[default], say) if AA_ROUNDS else {"skipped": "see bench/aa_power.py"}
    aa_wall = time.monotonic() - t0

    in_mixed = {e.route_id for e in mixed.entries}
    mixed_cost = cost_seconds(mixed.entries)
    fast_cost = cost_seconds(stage1)
    full_cost = cost_seconds(full_entries)
    result = {
        "workload": name,
        "note": workload.note,
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cpus": len(os.sched_getaffinity(0)),
        "default_ms": by_id[default].median_ms,
        "planned": planned,
        "mixed_knobs": [k for k, _ in knobs],
        "side_by_side_rounds": side_rounds,
        "phase_wall_s": {
            "mixed": round(mixed_wall, 1),
            "full": round(full_wall, 1),
            "side_by_side": round(side_wall, 1),
            "aa": round(aa_wall, 1),
        },
        "modes": {
            mode: {
                "winner": by_id[rid].route or "(default)",
                "winner_ms": by_id[rid].median_ms,
                "speedup_side_by_side": side.get(rid),
                "speedup_sweep": by_id[rid].speedup if rid != default else 1.0,
                "headline": mixed.summary["headline"] if mode == "mixed" else None,
                "loss": max((by_id[rid].loss or {"": 0}).values()),
                "routes": n,
                "cost_s": round(cost, 1),
                "wall_s": wall,
            }
            for mode, rid, n, cost, wall in (
                ("fast", winners["fast"], len(stage1), fast_cost, None),
                ("mixed", winners["mixed"], len(mixed.entries), mixed_cost, round(mixed_wall, 1)),
                ("full", winners["full"], len(full_entries), full_cost, round(full_wall, 1)),
            )
        },
        "full_not_run": full_not_run,
        "cut_short": cut_short,
        "mixed_decision": mixed.summary["decision"],
        "efficiency": {
            "mixed_winner_over_full_winner_time": by_id[winners["mixed"]].median_ms / by_id[winners["full"]].median_ms,
            "mixed_winner_over_full_winner_side_by_side": (
                side.get(winners["full"], 1.0) / side.get(winners["mixed"], 1.0)
            ),
            "mixed_cost_over_full_cost": mixed_cost / full_cost if full_cost else None,
        },
        "aa": aa,
        "routes": [_route_row(e) for e in sorted(mixed.entries, key=lambda e: (e.stage, e.median_ms or 1e9))],
        "full_routes": [
            _route_row(e) for e in sorted(full.entries, key=lambda e: e.median_ms or 1e9) if e.route_id not in in_mixed
        ],
        "default_baselines_ms": sorted({e.baseline_ms for e in mixed.entries + full.entries if e.baseline_ms}),
        "wall_s": round(time.monotonic() - began, 1),
    }
    if full_not_run:  # nothing of full's own (its routes are already none): no winner, cost or ratio to show
        result["modes"]["full"] = None
        result["efficiency"] = dict.fromkeys(result["efficiency"])
    (folder / "result.json").write_text(json.dumps(result, indent=2))
    export = os.environ.get("BENCH_EXPORT")
    if export:  # only the small files, flat: the device's reply carries a limited number of files
        import shutil

        Path(export).mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "result.json", Path(export) / f"{name}.json")
        shutil.copy(folder / "mixed" / "report.png", Path(export) / f"{name}.png")
    say(done_line(result))
    return result


def done_line(result: dict) -> str:
    """A workload's last line: its wall time, the default's time and mixed's winner with its side-by-side
    speedup, or that side by side did not run (a call the deadline cut short; before, it printed
    x1.000, as if the winner measured the default's time)."""
    mixed = result["modes"]["mixed"]
    side = mixed["speedup_side_by_side"]
    how = f"x{side:.3f} side by side" if side is not None else "not measured side by side"
    return (
        f"{result['workload']}: done in {result['wall_s']}s — default {result['default_ms']:.4f} ms, "
        f"mixed {mixed['winner']} {how}"
    )


def _route_row(e) -> dict:
    return {
        "route": e.route or "(default)",
        "stage": e.stage,
        "outcome": e.outcome.value,
        "median_ms": e.median_ms,
        "baseline_ms": e.baseline_ms,
        "build_s": e.build_seconds,
        "speedup": e.speedup,
        "paired": e.paired.wire() if e.paired else None,
        "measure_s": e.measure_seconds,
        "measurements": e.measurements.wire() if e.measurements else None,
        "loss": max(e.loss.values()) if e.loss else None,
        "load": e.load_info,
    }


def _context(common: dict, workdir: Path, cache: Path, say):
    from enginewright.store import LocalStore
    from enginewright.worker.context import Accuracy, WorkerContext, measuring_cpus

    return WorkerContext(
        backend="inductor",
        model=common["model"],
        store=LocalStore(cache),
        prefix="runs/local",
        target="local",
        workdir=workdir,
        engine_suffix=".inductor.tar",
        settings=common["settings"],
        accuracy=Accuracy(common["inputs"], common["references"], "cosine", THRESHOLD),
        timing=common["timing"],
        route_timeout=common["route_timeout"],
        backend_options=common["backend_options"],
        progress=say,
        measure_cpus=measuring_cpus(),
    )


def _aa_test(worker, default_entry, say, rounds_wanted: int = AA_ROUNDS) -> dict:
    """Default vs two copies of itself, interleaved rounds, as the confirmation round times them."""
    from enginewright.worker.measure import interleave

    ctx = worker.ctx
    folder = ctx.workdir / "aa"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "default.inductor.tar"
    path.write_bytes(ctx.store.get(ctx.engine_key(default_entry.route_id)))
    say(f"A/A test: {rounds_wanted} rounds")
    try:
        rounds = interleave(ctx, {"default": path, "copy-a": path, "copy-b": path}, rounds_wanted, folder)
    except RuntimeError as exc:
        return {"error": str(exc)}
    return {**aa_verdicts(rounds, CONFIRM_ROUNDS), "rounds": rounds}


def aa_verdicts(rounds: dict[str, list[float]], window: int) -> dict:
    """Split A/A rounds into trials of `window` rounds; count the trials where the confirmation rule,
    and the strict "any faster single measurement wins" rule, name a copy faster than the default.
    `process_bias` (copy / default over all rounds) tells a lasting offset of one copy (a process
    of its own, or a load of its own in one process) from round-to-round drift, which the
    interleaving shares between the engines of a round."""
    from enginewright.search.winner import confirm

    trials = len(rounds["default"]) // window
    rule_false = strict_false = 0
    for t in range(trials):
        part = {k: v[t * window : (t + 1) * window] for k, v in rounds.items()}
        rule_false += not confirm(part, "default", 0.03).default_won
        first = {k: v[0] for k, v in part.items()}  # one measurement each, as a sweep sees them
        strict_false += min(first, key=first.get) != "default"
    spread = [max(v) / min(v) - 1 for v in rounds.values()]
    bias = {
        k: round(geomean([c / d for c, d in zip(v, rounds["default"])]), 4) for k, v in rounds.items() if k != "default"
    }
    return {
        "trials": trials,
        "rule_false_winners": rule_false,
        "strict_false_winners": strict_false,
        "max_relative_spread": round(max(spread), 4),
        "round_cv": round(statistics.pstdev(rounds["default"]) / statistics.fmean(rounds["default"]), 4),
        "process_bias": bias,
    }


def cmd_noise(args) -> int:
    """Small check of the confirmation measurement: default vs `triton.cudagraphs=true`, side by
    side, and the A/A test, for one workload (as the confirmation round times them)."""
    from enginewright.cli.tune import TuneOptions, tune
    from enginewright.worker.batch import Worker
    from workloads import WORKLOADS, prepare

    out = Path(args.out)

    def say(message: str) -> None:
        print(f"[{args.workload}] {message}", flush=True)

    workload = next(w for w in WORKLOADS if w.name == args.workload)
    files = prepare(workload, out / "data", "cuda")
    common = dict(
        backend="inductor",
        model=files["program"],
        inputs=files["inputs"],
        references=files["references"],
        metric="cosine",
        threshold=THRESHOLD,
        settings={"input_dtype": "float16"},
        timing=TIMING,
        route_timeout=300,
        build_parallelism=2,
        cache=out / "cache",
        backend_options={"device": "cuda"},
    )
    result = tune(
        TuneOptions(
            **common,
            out=out / "fast",
            mode="fast",
            knobs=[("triton.cudagraphs", ["true"])],
            top_k=0,
            save_all_engines=True,
        ),
        say,
    )
    by_id = {e.route_id: e for e in result.entries}
    default = result.summary["default_id"]
    other = next(e for e in result.entries if e.route_id != default)
    worker = Worker(_context(common, out / "side", out / "cache", say))
    rounds = worker.confirm([other], by_id[default], SIDE_BY_SIDE_ROUNDS, early_stop=False)
    side = geomean([d / t for d, t in zip(rounds[default], rounds[other.route_id])])
    report = {
        "workload": args.workload,
        "sweep_speedup": other.baseline_ms / other.median_ms,
        "side_by_side_speedup": side,
        "rounds": rounds,
        "aa": _aa_test(worker, by_id[default], say, args.rounds),
    }
    (out / "noise.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}, indent=2))
    return 0


def split_cores(cores: list[int], parts: int) -> list[list[int]]:
    """Contiguous, near-equal shares of `cores` (one per GPU process)."""
    size, extra = divmod(len(cores), parts)
    shares, start = [], 0
    for i in range(parts):
        end = start + size + (i < extra)
        shares.append(cores[start:end] or cores[:1])
        start = end
    return shares


def cmd_run(args) -> int:
    if args.export:
        os.environ["BENCH_EXPORT"] = args.export
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.export:
        Path(args.export).mkdir(parents=True, exist_ok=True)
    names = args.workloads.split(",")
    gpus = args.gpus.split(",") if args.gpus else []
    if len(names) > 1 and len(gpus) > 1:
        # One process per GPU, workloads dealt round-robin; each process runs its share in turn.
        # Each process gets its own share of the host's cores: a launch-bound engine timed on one GPU
        # is slowed by the other GPU's compiles if they share cores (the first runs saw 18-26% drift).
        shares = {g: names[i :: len(gpus)] for i, g in enumerate(gpus)}
        cores = split_cores(sorted(os.sched_getaffinity(0)), len(gpus))
        procs = []
        for (gpu, share), mine in zip(shares.items(), cores):
            if not share:
                continue
            env = {
                **os.environ,
                "CUDA_VISIBLE_DEVICES": gpu,
                "PYTHONUNBUFFERED": "1",
                "TORCHINDUCTOR_COMPILE_THREADS": str(len(mine)),
            }
            log = open(out / f"gpu{gpu}.log", "w")
            print(f"GPU {gpu}: {','.join(share)} on cores {mine[0]}-{mine[-1]}", flush=True)
            procs.append(
                (
                    gpu,
                    subprocess.Popen(
                        [sys.executable, __file__, "run", "--workloads", ",".join(share), "--out", str(out)],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        preexec_fn=lambda c=mine: os.sched_setaffinity(0, c),
                    ),
                )
            )
        codes = [p.wait() for _, p in procs]
        for gpu, _ in procs:
            print((out / f"gpu{gpu}.log").read_text()[-3000:])
            if args.export:
                import shutil

                shutil.copy(out / f"gpu{gpu}.log", Path(args.export) / f"{'-'.join(shares[gpu])}.log")
        return max(codes)
    status = 0
    for name in names:
        try:
            run_workload(name, out, lambda m, n=name: print(f"[{n}] {m}", flush=True))
        except Exception as exc:  # one workload failing must not lose the others
            import traceback

            traceback.print_exc()
            (out / name).mkdir(parents=True, exist_ok=True)
            (out / name / "error.txt").write_text(f"{type(exc).__name__}: {exc}")
            status = 1
    return status


def overhead_section(
    path: str,
    date: str,
    revision: str,
    commands: list[str] | None,
    title: str = "## Engine per-call time vs `torch.compile` in the user's process",
) -> list[str]:
    """The engine-vs-torch.compile per-call table of a `bench/engine_overhead.py` result file."""
    from engine_overhead import table

    o = json.loads(Path(path).read_text())
    timing = o["timing"]
    one_round = (
        f"{timing['iterations']}-call repeats until {timing['min_seconds']} s were timed, CUDA events"
        if "iterations" in timing
        else f"about {timing['round_seconds']} s of calls back to back, CUDA events around them: {timing['objective']}"
    )
    return [
        title,
        "",
        f"Measured {date} at git revision `{revision}` with "
        f"`bench/engine_overhead.py`: torch {o['torch']}, {o['gpu']}. Per workload and route, each key is "
        "held in a process of its own and timed one at a time in rotating order for "
        f"{o['rounds']} rounds (a round: {one_round}). `compile`: `torch.compile` on the original "
        "fp16 module with the route's options, called under one `inference_mode`; `engine`: built and served by "
        "the product's own child processes (the code the worker measures with is the code that serves); "
        "other columns: earlier backends, built and served the same way. Ratio: median over rounds of the "
        "per-round ratio to `compile`.",
        "",
        "```",
        *(commands or []),
        "```",
        "",
        table(o["results"]),
    ]


def protocol_section(before: list[dict], after_paths: list[str]) -> list[str]:
    """Ask 8's table: each workload's later run (`after_paths`, result files of `run` with the
    protocol of issue 19: loads as the unit, the confirmation round across loads, "don't compile"
    measured) beside its run in the tables below (`before`), by workload: the mixed winner, its
    headline with its interval across loads, side by side, what each mode cost a route, and the A/A
    false winners. An after file's revision is the `rev.txt` beside it, its card the one it names."""
    earlier = {r["workload"]: r for r in before}
    lines = [
        "## Before and after the new protocol (issue 19, ask 8)",
        "",
        "Each workload's run with the protocol of issue 19 beside its run in the tables below (the same "
        "`bench/gpu_tuning.py run`, later revisions; the card each ran on is named: not all are the "
        "H200). Cost a route: build + engine load + timed seconds of the routes a mode needs, divided "
        'by their number, the GPU-holding seconds per route ("5 of 9": the call\'s deadline cut the search; '
        "each later run has one route more: the "
        "eager `compile=false`, measured in every space since ask 4). Headline: the mixed winner's "
        "speedup in the confirmation round, with its 95% interval across loads and rounds (none "
        "before: the protocol had no such round).",
        "",
        "| workload | after: card, revision | mixed winner before → after | headline after (95%) | "
        "side by side before → after | mixed: routes, s a route, before → after | full: routes, s a "
        "route, before → after | A/A false winners (rule) before → after |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def per_route(r: dict, name: str) -> str:
        mode, planned = r["modes"][name], r.get("planned", {}).get(name)
        if mode is None:
            return "not run"
        of = f" of {planned}" if planned and planned != mode["routes"] else ""  # the deadline cut it
        return f"{mode['routes']}{of}, {mode['cost_s'] / mode['routes']:.1f}"

    def side(mode: dict | None) -> str:
        if mode is None or mode["winner"] == "(default)":
            return "1 (default kept)" if mode else "—"
        sbs = mode["speedup_side_by_side"]
        return "—" if sbs is None else f"{sbs:.3f}"

    def aa(r: dict) -> str:
        a = r["aa"]
        return "—" if "trials" not in a else f"{a['rule_false_winners']}/{a['trials']}"

    for path in after_paths:
        after = json.loads(Path(path).read_text())
        rev_file = Path(path).parent / "rev.txt"
        revision = rev_file.read_text().strip() if rev_file.exists() else "?"
        old = earlier.get(after["workload"])
        if old is None:
            raise SystemExit(f"{path}: no earlier run of {after['workload']} among the results")
        m, o = after["modes"], old["modes"]
        head = m["mixed"]["headline"] or {}
        headline = (
            "default kept"
            if m["mixed"]["winner"] == "(default)"
            else f"{head['speedup']:.3f} ({head['low']:.3f}-{head['high']:.3f})"
            if head.get("low") is not None
            else "—"
        )
        winners = (
            f"`{m['mixed']['winner']}` both"
            if m["mixed"]["winner"] == o["mixed"]["winner"]
            else f"`{o['mixed']['winner']}` → `{m['mixed']['winner']}`"
        )
        lines.append(
            f"| {after['workload']} | {after['gpu']}, `{revision}` | {winners} | {headline} | "
            f"{side(o['mixed'])} → {side(m['mixed'])} | {per_route(old, 'mixed')} → {per_route(after, 'mixed')} | "
            f"{per_route(old, 'full')} → {per_route(after, 'full')} | {aa(old)} → {aa(after)} |"
        )
    return lines


NOTES_BEGIN, NOTES_END = "<!-- notes: written by hand, kept by `gpu_tuning.py docs` -->", "<!-- /notes -->"


def cmd_docs(args) -> int:
    """Merge result files into docs/benchmarks.md (+ copy the per-workload plots). The hand-written
    notes between the NOTES markers of an existing benchmarks.md are kept."""
    import shutil

    results = [json.loads(Path(p).read_text()) for p in args.results]
    docs = Path(args.docs)
    (docs / "benchmarks").mkdir(parents=True, exist_ok=True)
    for path, r in zip(args.results, results):
        plot = next(
            (p for p in (Path(path).parent / "mixed" / "report.png", Path(path).with_suffix(".png")) if p.exists()),
            None,
        )
        if plot:
            shutil.copy(plot, docs / "benchmarks" / f"{r['workload']}.png")
    target = docs / "benchmarks.md"
    old = target.read_text() if target.exists() else ""
    notes = (
        old[old.index(NOTES_BEGIN) : old.index(NOTES_END) + len(NOTES_END)]
        if NOTES_BEGIN in old and NOTES_END in old
        else f"{NOTES_BEGIN}\n{NOTES_END}"
    )
    r0 = results[0]
    cores = ", ".join(f"{r['workload']} {r.get('cpus', '?')}" for r in results)
    lines = [
        "# GPU tuning benchmark (Inductor on NVIDIA H200)",
        "",
        f"Measured {args.date or datetime.now(timezone.utc).date()} at git revision `{args.revision}` with "
        f"`bench/gpu_tuning.py`: torch {r0['torch']}, {r0['gpu']}; CPU cores of each workload's process: "
        f"{cores}. Raw results: `docs/benchmarks/raw/`.",
        "",
        notes,
        "",
        "## How it was run",
        "",
        "```",
        *(
            args.command
            or [
                "python bench/gpu_tuning.py run --workloads W1,W2 --gpus 0,1 --out OUT --export EXPORT",
                "python bench/gpu_tuning.py docs EXPORT/*.json --docs docs --revision REV",
            ]
        ),
        "```",
        "",
        f"Each workload is tuned with the product's own flow (`enginewright.cli.tune`, the same as "
        f"`enginewright tune`). Knobs: fast and mixed over {', '.join(TABLES_RUN['knobs'])} (mixed: at most "
        f"{TABLES_RUN['max_routes']} routes, so stage 2 tries the best predicted combinations first); full over "
        f"{', '.join(FULL_KNOBS)} (8 routes), with no confirmation round (top_k 0: its winner is its sweep's, "
        "and the side-by-side column says how it stands; the product's full mode confirms its top 3). "
        "Mixed and full share one cache, so a route either needs is "
        f"built once. Accuracy: cosine distance to a float32 eager reference < {THRESHOLD:g}, 2 reference "
        f"pairs. Timing of one measurement: {TABLES_RUN['timing']}.",
        "",
        "Two kinds of speedup: **sweep** — the route against the default measured in the same batch, each "
        "in a fresh process, minutes apart from other batches; **side by side** — default and winners "
        f"re-timed in one run, {SIDE_BY_SIDE_ROUNDS} interleaved rounds, each engine held in a process of "
        "its own (the confirmation-round machinery), geometric mean of per-round default/winner ratios.",
        "",
        "## Winners and speedups",
        "",
        "| workload | default ms | fast winner | sweep x | mixed winner | sweep x | side by side x | "
        "full winner | sweep x | side by side x | max loss (mixed winner) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def cells(mode: dict | None, side: bool = True) -> list[str]:
        if mode is None:  # full search not run (`full_not_run`: the call's budget)
            return ["not run (budget)", "—"] + ["—"] * side
        out = [f"`{mode['winner']}`", f"{mode['speedup_sweep']:.3f}"]
        if side:
            sbs = mode["speedup_side_by_side"]
            out.append("1 (default kept)" if mode["winner"] == "(default)" else "—" if sbs is None else f"{sbs:.3f}")
        return out

    side_geo = [r["modes"]["mixed"]["speedup_side_by_side"] or 1.0 for r in results]
    sweep_geo = [r["modes"]["mixed"]["speedup_sweep"] for r in results]
    for r in results:
        m = r["modes"]
        lines.append(
            f"| {r['workload']} | {r['default_ms']:.4f} | {' | '.join(cells(m['fast'], False))} | "
            f"{' | '.join(cells(m['mixed']))} | {' | '.join(cells(m['full']))} | {m['mixed']['loss']:.2g} |"
        )
    lines += [
        "",
        f"**Geometric-mean speedup of the mixed winner over the default: {geomean(side_geo):.3f}x side "
        f"by side, {geomean(sweep_geo):.3f}x in the sweep**, across {len(results)} workloads "
        f"({', '.join(r['workload'] for r in results)}); a workload where the default was kept counts as 1.",
        "",
        "## Cost and search efficiency",
        "",
        "| workload | fast: routes / cost s | mixed: routes with an entry of planned / cost s | full: routes with an entry of planned / "
        "cost s | mixed winner ÷ full winner (side by side) | mixed cost ÷ full cost | wall s: mixed, full, "
        "side by side, A/A |",
        "|---|---|---|---|---|---|---|",
    ]

    def late(rows: list[dict]) -> str:
        n = sum(x["outcome"] == "timeout" for x in rows)
        return f" ({n} timed out)" if n else ""

    for r in results:
        m, e = r["modes"], r["efficiency"]
        planned = r.get("planned", {})
        walls = r.get("phase_wall_s", {})
        lines.append(
            f"| {r['workload']} | {m['fast']['routes']} / {m['fast']['cost_s']} | {m['mixed']['routes']} of "
            f"{planned.get('mixed', '?')}{late(r['routes'])} / {m['mixed']['cost_s']} | "
            + (
                f"{m['full']['routes']} of {planned.get('full', '?')}{late(r.get('full_routes', []))} / "
                f"{m['full']['cost_s']} | "
                f"{e['mixed_winner_over_full_winner_side_by_side']:.3f} | "
                f"{(e['mixed_cost_over_full_cost'] or float('nan')):.2f} | "
                if m["full"]
                else "not run (budget) | — | — | "
            )
            + f"{', '.join(str(walls.get(k, '?')) for k in ('mixed', 'full', 'side_by_side', 'aa'))} |"
        )
    lines += [
        "",
        "Cost = build seconds + engine load seconds + timed seconds of the routes a mode needs (a "
        'route both modes need counts in both). "with an entry of planned" below the plan means the call\'s '
        'deadline stopped the search early; "timed out" routes have an entry, with no time (route timeout, '
        "or the call's deadline in runs before deadline-cut routes were kept out of the cache).",
        "",
        "## Noise: A/A test",
        "",
        "The default engine against two copies of itself (three processes holding the same engine bytes), "
        f"interleaved rounds split into trials of {CONFIRM_ROUNDS} rounds. A false winner is a trial where a "
        "copy is declared faster than the default. The strict rule takes one measurement of each, as a "
        "sweep does, and lets the fastest win. Process bias: geometric mean of copy/default over all "
        "rounds (1.000 = no lasting offset between processes).",
        "",
        "| workload | rounds | trials | false winners, confirmation rule | false winners, strict rule | "
        "process bias (copy-a, copy-b) | max spread of one engine | round CV |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = {"trials": 0, "rule": 0, "strict": 0}
    aa_rows = [(r["workload"], r["aa"]) for r in results] + [
        (Path(p).stem, json.loads(Path(p).read_text())["aa"]) for p in args.extra_aa
    ]
    for name, a in aa_rows:
        if "error" in a or "skipped" in a:
            why = f"error: {a['error']}" if "error" in a else f"skipped: {a['skipped']}"
            lines.append(f"| {name} | {why[:90]} | | | | | | |")
            continue
        total["trials"] += a["trials"]
        total["rule"] += a["rule_false_winners"]
        total["strict"] += a["strict_false_winners"]
        bias = a.get("process_bias") or {}
        lines.append(
            f"| {name} | {len(a['rounds']['default'])} | {a['trials']} | {a['rule_false_winners']} | "
            f"{a['strict_false_winners']} | {', '.join(f'{v:.3f}' for v in bias.values()) or '—'} | "
            f"{a['max_relative_spread']:.1%} | {a['round_cv']:.2%} |"
        )
    if total["trials"]:
        lines += [
            "",
            f"**False-winner rate: {total['rule'] / total['trials']:.1%} with the confirmation rule "
            f"({total['rule']}/{total['trials']}), {total['strict'] / total['trials']:.1%} with the strict "
            f"rule ({total['strict']}/{total['trials']}).**",
        ]
    if args.protocol_after:
        lines += ["", *protocol_section(results, args.protocol_after)]
    if args.overhead_paired:
        lines += [
            "",
            *overhead_section(
                args.overhead_paired,
                args.overhead_paired_date,
                args.overhead_paired_revision,
                args.overhead_paired_command,
                "## Engine per-call time vs `torch.compile`, after paired measurement",
            ),
        ]
    if args.overhead:
        lines += [
            "",
            *overhead_section(args.overhead, args.overhead_date, args.overhead_revision, args.overhead_command),
        ]
    lines += ["", "## Every route (mixed run, then the routes only full needed)", ""]
    for r in results:
        lines += [
            f"### {r['workload']} — {r['note']}",
            "",
            f"![{r['workload']}](benchmarks/{r['workload']}.png)",
            "",
            f"Decision: {r['mixed_decision']}. Default measured per batch: "
            f"{', '.join(f'{b:.4f}' for b in r['default_baselines_ms'])} ms.",
            "",
            "| route | stage | outcome | median ms | vs batch default | build s | load s | cache hits/misses | loss |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for x in r["routes"] + [dict(y, stage="full") for y in r.get("full_routes", [])]:
            ratio = f"{x['baseline_ms'] / x['median_ms']:.3f}" if x["median_ms"] and x["baseline_ms"] else "—"
            load = x.get("load") or {}
            lines.append(
                f"| `{x['route']}` | {x['stage']} | {x['outcome']} | "
                f"{'—' if x['median_ms'] is None else format(x['median_ms'], '.4f')} | {ratio} | "
                f"{x['build_s'] or '—'} | {load.get('load_seconds', '—')} | "
                f"{load.get('fxgraph_cache_hit', '—')}/{load.get('fxgraph_cache_miss', '—')} | "
                f"{'—' if x['loss'] is None else format(x['loss'], '.2g')} |"
            )
        lines.append("")
    target.write_text("\n".join(lines) + "\n")
    print(
        f"wrote {target}; mixed winner geomean {geomean(side_geo):.3f}x side by side, {geomean(sweep_geo):.3f}x sweep"
    )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--workloads", default="resnet50,encoder,mlp,convnet,attention")
    run.add_argument("--gpus", default="")
    run.add_argument("--out", required=True)
    run.add_argument("--export", help="copy <workload>.json and <workload>.png here as each finishes")
    run.set_defaults(func=cmd_run)
    noise = sub.add_parser("noise")
    noise.add_argument("--workload", default="attention")
    noise.add_argument("--out", required=True)
    noise.add_argument("--rounds", type=int, default=AA_ROUNDS, help="A/A rounds (trials of 5 rounds each)")
    noise.set_defaults(func=cmd_noise)
    docs = sub.add_parser("docs")
    docs.add_argument("results", nargs="+")
    docs.add_argument("--docs", default="docs")
    docs.add_argument("--revision", default="")
    docs.add_argument("--date", default="")
    docs.add_argument(
        "--extra-aa",
        nargs="*",
        default=[],
        help="more result or noise.json files whose A/A test joins the A/A table (row named by file)",
    )
    docs.add_argument("--command", action="append", help="a command as run (repeat; shown in the doc)")
    docs.add_argument("--overhead", help="a bench/engine_overhead.py overhead.json: adds its per-call table")
    docs.add_argument("--overhead-revision", default="")
    docs.add_argument("--overhead-date", default="")
    docs.add_argument("--overhead-command", action="append", help="a command as run for --overhead (repeat)")
    docs.add_argument("--overhead-paired", help="a later engine_overhead.py result, shown before --overhead")
    docs.add_argument("--overhead-paired-revision", default="")
    docs.add_argument("--overhead-paired-date", default="")
    docs.add_argument("--overhead-paired-command", action="append")
    docs.add_argument(
        "--protocol-after",
        action="append",
        default=[],
        help="a later run's result file of a workload among RESULTS, with the protocol of issue 19 (repeat): "
        "the before-and-after table of ask 8 (revision: the rev.txt beside it)",
    )
    docs.set_defaults(func=cmd_docs)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
