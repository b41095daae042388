"""Measure tuning on a real GPU with the Inductor backend: search modes, speedups, cost and noise.

    python bench/gpu_tuning.py run --workloads resnet50,encoder --out OUT [--gpus 0,1] [--export $OUT]
    python bench/gpu_tuning.py docs RESULTS.json... --docs docs   # writes docs/benchmarks.md

`run` tunes each workload with the product's own flow (`enginewright.worker.tune`):
  1. mixed search over KNOBS (its stage 1 is exactly the fast search; the fast winner is read from
     stage 1 with the same noise-margin rule), with the confirmation round;
  2. full search over the three knobs of FULL_KNOBS (every combination), sharing the cache;
  3. side by side, in one interleaved measurement: default, fast winner, mixed winner, full winner;
  4. an A/A test: the default engine against two copies of itself for AA_ROUNDS rounds, split into
     trials of CONFIRM_ROUNDS rounds; how often the confirmation rule, and a strict "any faster
     measurement wins" rule, would name a false winner.
Workloads listed together run in parallel, one GPU each (--gpus), or one after another.
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

KNOBS = ["triton.cudagraphs", "max_autotune", "coordinate_descent_tuning", "freezing"]
FULL_KNOBS = ["triton.cudagraphs", "coordinate_descent_tuning", "freezing"]
TIMING = {"warmup_iterations": 10, "iterations": 50, "repeats": 5, "min_seconds": 0.2}
BUDGET_S = float(os.environ.get("BENCH_BUDGET_S", "520"))  # per call: the device allows 10 minutes
STARTED = time.time()
CONFIRM_ROUNDS = 5
SIDE_BY_SIDE_ROUNDS = 9
AA_ROUNDS = 60
THRESHOLD = 1e-3  # cosine distance to the float32 eager reference (fp16 routes land near 1e-6)


def geomean(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


def cost_seconds(entries) -> float:
    """Build + measuring time of a set of routes (what a mode spends)."""
    return sum((e.build_seconds or 0) + (e.load_info or {}).get("load_seconds", 0) +
               ((e.timing.mean_ms * e.timing.n) / 1000 if e.timing else 0) for e in entries)


def run_workload(name: str, out: Path, say) -> dict:
    import torch
    from enginewright.search.winner import choose_winner, noise_margin
    from enginewright.worker.batch import Worker
    from enginewright.worker.tune import TuneOptions, tune
    from workloads import WORKLOADS, prepare

    workload = next(w for w in WORKLOADS if w.name == name)
    folder = out / name
    began = time.monotonic()
    files = prepare(workload, folder / "data", "cuda")
    say(f"{name}: exported in {time.monotonic() - began:.1f}s")
    cache = folder / "cache"
    common = dict(backend="inductor", model=files["program"], inputs=files["inputs"], references=files["references"],
                  metric="cosine", threshold=THRESHOLD, settings={"input_dtype": "float16"}, timing=TIMING,
                  route_timeout=300, deadline=STARTED + BUDGET_S - 100, confirm_rounds=CONFIRM_ROUNDS, top_k=3, noise_margin=0.03,
                  build_parallelism=int(os.environ.get("BUILD_PARALLELISM", "4")), cache=cache,
                  backend_options={"device": "cuda"}, routes_per_batch=16, max_routes=24)
    from enginewright.backends.inductor import InductorBackend
    available = {k.name for k in InductorBackend(device="cuda").knobs()}
    knobs = [(k, ["true", "false"]) for k in KNOBS if k in available]
    full_knobs = [(k, ["true", "false"]) for k in FULL_KNOBS if k in available]

    t0 = time.monotonic()
    mixed = tune(TuneOptions(**common, out=folder / "mixed", mode="mixed", knobs=knobs), say)
    mixed_wall = time.monotonic() - t0
    t0 = time.monotonic()
    full = tune(TuneOptions(**{**common, "top_k": 0}, out=folder / "full", mode="full", knobs=full_knobs), say)
    full_wall = time.monotonic() - t0

    by_id = {e.route_id: e for e in mixed.entries + full.entries}
    default = mixed.summary["default_id"]
    stage1 = [e for e in mixed.entries if e.stage == "stage1"]
    fast_decision = choose_winner(stage1, default, noise_margin(stage1, 0.03))
    full_entries = full.entries  # tune() returns the entries of the routes it planned
    winners = {"fast": fast_decision.winner_id, "mixed": mixed.decision.winner_id, "full": full.decision.winner_id}

    # Side by side: every distinct winner and the default, interleaved, on one GPU, one process.
    ctx_worker = Worker(_context(common, folder / "side", cache, say))
    distinct = [by_id[i] for i in dict.fromkeys(winners.values()) if i != default and by_id[i].engine_uri]
    side = {}
    if distinct:
        rounds = ctx_worker.confirm(distinct, by_id[default], SIDE_BY_SIDE_ROUNDS)
        for rid, times in rounds.items():
            side[rid] = geomean([d / t for d, t in zip(rounds[default], times)])
    side[default] = 1.0

    # A/A: the default engine against two copies of itself.
    aa = _aa_test(ctx_worker, by_id[default], say)

    mixed_cost = cost_seconds(mixed.entries)
    fast_cost = cost_seconds(stage1)
    full_cost = cost_seconds(full_entries)
    result = {
        "workload": name, "note": workload.note, "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__, "default_ms": by_id[default].median_ms,
        "modes": {
            mode: {"winner": by_id[rid].route or "(default)", "winner_ms": by_id[rid].median_ms,
                   "speedup_side_by_side": side.get(rid), "loss": max((by_id[rid].loss or {"": 0}).values()),
                   "routes": n, "cost_s": round(cost, 1), "wall_s": wall}
            for mode, rid, n, cost, wall in (
                ("fast", winners["fast"], len(stage1), fast_cost, None),
                ("mixed", winners["mixed"], len(mixed.entries), mixed_cost, round(mixed_wall, 1)),
                ("full", winners["full"], len(full_entries), full_cost, round(full_wall, 1)))},
        "mixed_decision": mixed.summary["decision"],
        "efficiency": {
            "mixed_winner_over_full_winner_time": by_id[winners["mixed"]].median_ms / by_id[winners["full"]].median_ms,
            "mixed_winner_over_full_winner_side_by_side": (side.get(winners["full"], 1.0) / side.get(winners["mixed"], 1.0)),
            "mixed_cost_over_full_cost": mixed_cost / full_cost if full_cost else None},
        "aa": aa,
        "routes": [{"route": e.route or "(default)", "stage": e.stage, "outcome": e.outcome.value,
                    "median_ms": e.median_ms, "baseline_ms": e.baseline_ms, "build_s": e.build_seconds,
                    "loss": max(e.loss.values()) if e.loss else None, "load": e.load_info}
                   for e in sorted(mixed.entries, key=lambda e: (e.stage, e.median_ms or 1e9))],
        "default_baselines_ms": sorted({e.baseline_ms for e in mixed.entries + full.entries if e.baseline_ms}),
        "wall_s": round(time.monotonic() - began, 1),
    }
    (folder / "result.json").write_text(json.dumps(result, indent=2))
    export = os.environ.get("BENCH_EXPORT")
    if export:  # only the small files, flat: the device's reply carries a limited number of files
        import shutil
        Path(export).mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / "result.json", Path(export) / f"{name}.json")
        shutil.copy(folder / "mixed" / "report.png", Path(export) / f"{name}.png")
    say(f"{name}: done in {result['wall_s']}s — default {result['default_ms']:.4f} ms, "
        f"mixed {result['modes']['mixed']['winner']} x{result['modes']['mixed']['speedup_side_by_side'] or 1:.3f}")
    return result


def _context(common: dict, workdir: Path, cache: Path, say):
    from enginewright.store import LocalStore
    from enginewright.worker.batch import Accuracy, WorkerContext
    return WorkerContext(backend="inductor", model=common["model"], store=LocalStore(cache), prefix="runs/local",
                         target="local", workdir=workdir, engine_suffix=".inductor.tar", settings=common["settings"],
                         accuracy=Accuracy(common["inputs"], common["references"], "cosine", THRESHOLD),
                         timing=common["timing"], route_timeout=common["route_timeout"],
                         backend_options=common["backend_options"], progress=say)


def _aa_test(worker, default_entry, say) -> dict:
    """Default vs two copies of itself, AA_ROUNDS interleaved rounds (one process per engine)."""
    from enginewright.search.winner import confirm
    ctx = worker.ctx
    folder = ctx.workdir / "aa"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "default.inductor.tar"
    path.write_bytes(ctx.store.get(ctx.engine_key(default_entry.route_id)))
    say(f"A/A test: {AA_ROUNDS} rounds")
    try:
        rounds = worker.interleave({"default": path, "copy-a": path, "copy-b": path}, AA_ROUNDS, folder)
    except RuntimeError as exc:
        return {"error": str(exc)}
    trials = AA_ROUNDS // CONFIRM_ROUNDS
    rule_false = strict_false = 0
    for t in range(trials):
        window = {k: v[t * CONFIRM_ROUNDS:(t + 1) * CONFIRM_ROUNDS] for k, v in rounds.items()}
        rule_false += not confirm(window, "default", 0.03).default_won
        first = {k: v[0] for k, v in window.items()}  # one measurement each, as a sweep sees them
        strict_false += min(first, key=first.get) != "default"
    spread = [max(v) / min(v) - 1 for v in rounds.values()]
    return {"trials": trials, "rule_false_winners": rule_false, "strict_false_winners": strict_false,
            "max_relative_spread": round(max(spread), 4),
            "round_cv": round(statistics.pstdev(rounds["default"]) / statistics.fmean(rounds["default"]), 4),
            "rounds": rounds}  # raw, to tell machine-wide drift (shared within a round) from per-process bias


def cmd_noise(args) -> int:
    """Small check of the confirmation measurement: default vs `triton.cudagraphs=true`, side by
    side, and the A/A test, for one workload (each engine in a process of its own)."""
    from enginewright.worker.batch import Worker
    from enginewright.worker.tune import TuneOptions, tune
    from workloads import WORKLOADS, prepare
    out = Path(args.out)
    say = lambda m: print(f"[{args.workload}] {m}", flush=True)
    workload = next(w for w in WORKLOADS if w.name == args.workload)
    files = prepare(workload, out / "data", "cuda")
    common = dict(backend="inductor", model=files["program"], inputs=files["inputs"], references=files["references"],
                  metric="cosine", threshold=THRESHOLD, settings={"input_dtype": "float16"}, timing=TIMING,
                  route_timeout=300, build_parallelism=2, cache=out / "cache", backend_options={"device": "cuda"})
    result = tune(TuneOptions(**common, out=out / "fast", mode="fast", knobs=[("triton.cudagraphs", ["true"])],
                              top_k=0, save_all_engines=True), say)
    by_id = {e.route_id: e for e in result.entries}
    default = result.summary["default_id"]
    other = next(e for e in result.entries if e.route_id != default)
    worker = Worker(_context(common, out / "side", out / "cache", say))
    rounds = worker.confirm([other], by_id[default], SIDE_BY_SIDE_ROUNDS)
    side = geomean([d / t for d, t in zip(rounds[default], rounds[other.route_id])])
    report = {"workload": args.workload, "sweep_speedup": other.baseline_ms / other.median_ms,
              "side_by_side_speedup": side, "rounds": rounds, "aa": _aa_test(worker, by_id[default], say)}
    (out / "noise.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}, indent=2))
    return 0


def cmd_run(args) -> int:
    if args.export:
        os.environ["BENCH_EXPORT"] = args.export
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.workloads.split(",")
    gpus = args.gpus.split(",") if args.gpus else []
    if len(names) > 1 and len(gpus) > 1:
        # One process per GPU, workloads dealt round-robin; each process runs its share in turn.
        shares = {g: names[i::len(gpus)] for i, g in enumerate(gpus)}
        procs = []
        for gpu, share in shares.items():
            if not share:
                continue
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu, "PYTHONUNBUFFERED": "1"}
            log = open(out / f"gpu{gpu}.log", "w")
            procs.append((gpu, subprocess.Popen([sys.executable, __file__, "run", "--workloads", ",".join(share),
                                                 "--out", str(out)], env=env, stdout=log, stderr=subprocess.STDOUT)))
        codes = [p.wait() for _, p in procs]
        for gpu, _ in procs:
            print((out / f"gpu{gpu}.log").read_text()[-3000:])
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


def cmd_docs(args) -> int:
    """Merge result.json files into docs/benchmarks.md (+ copy the per-workload plots)."""
    import shutil
    results = [json.loads(Path(p).read_text()) for p in args.results]
    docs = Path(args.docs)
    (docs / "benchmarks").mkdir(parents=True, exist_ok=True)
    for path, r in zip(args.results, results):
        plot = next((p for p in (Path(path).parent / "mixed" / "report.png", Path(path).with_suffix(".png"))
                     if p.exists()), Path(path).parent / "missing.png")
        if plot.exists():
            shutil.copy(plot, docs / "benchmarks" / f"{r['workload']}.png")
    lines = [
        "# GPU tuning benchmark (Inductor on NVIDIA H200)", "",
        f"Measured {args.date or datetime.now(timezone.utc).date()} at git revision `{args.revision}`, "
        f"torch {results[0]['torch']}, {results[0]['gpu']}.", "",
        "Command (on the H200 machine; workloads split over calls to fit the 10-minute limit):", "",
        "```", "python bench/gpu_tuning.py run --workloads resnet50,encoder,attention --gpus 0,1 --out $OUT/bench",
        "python bench/gpu_tuning.py run --workloads mlp,convnet --gpus 0,1 --out $OUT/bench",
        "python bench/gpu_tuning.py docs $OUT/bench/*/result.json --docs docs --revision REV", "```", "",
        f"Knobs: fast/mixed over {', '.join(KNOBS)}; full over {', '.join(FULL_KNOBS)} (8 routes). "
        f"Accuracy: cosine distance to a float32 eager reference < {THRESHOLD:g}, 2 reference pairs. "
        f"Timing: {TIMING}. Speedups are geometric means of per-round default/candidate ratios over "
        f"{SIDE_BY_SIDE_ROUNDS} interleaved rounds measured side by side in one process.", "",
        "## Winners and speedups", "",
        "| workload | default ms | fast winner | x | mixed winner | x | full winner | x | max loss (mixed) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        m = r["modes"]
        cell = lambda mode: (f"`{m[mode]['winner']}`", f"{m[mode]['speedup_side_by_side'] or 1.0:.3f}")
        lines.append(f"| {r['workload']} | {r['default_ms']:.4f} | {' | '.join(cell('fast'))} | "
                     f"{' | '.join(cell('mixed'))} | {' | '.join(cell('full'))} | {m['mixed']['loss']:.2g} |")
    geo = geomean([r["modes"]["mixed"]["speedup_side_by_side"] or 1.0 for r in results])
    lines += ["", f"**Geometric-mean speedup of the mixed winner over default: {geo:.3f}x** "
              f"across {len(results)} workloads.", "",
              "## Cost and search efficiency", "",
              "| workload | fast routes / cost s | mixed routes / cost s | full routes / cost s | "
              "mixed winner ÷ full winner (time) | mixed cost ÷ full cost |", "|---|---|---|---|---|---|"]
    for r in results:
        m, e = r["modes"], r["efficiency"]
        lines.append(f"| {r['workload']} | {m['fast']['routes']} / {m['fast']['cost_s']} | {m['mixed']['routes']} / "
                     f"{m['mixed']['cost_s']} | {m['full']['routes']} / {m['full']['cost_s']} | "
                     f"{e['mixed_winner_over_full_winner_side_by_side']:.3f} | "
                     f"{(e['mixed_cost_over_full_cost'] or float('nan')):.2f} |")
    lines += ["", "Cost = build seconds + engine load seconds + timed seconds of the routes the mode needs "
              "(mixed and full share a cache, so a route is counted in every mode that needs it).", "",
              "## Noise: A/A test", "",
              f"The default engine against two copies of itself, {AA_ROUNDS} interleaved rounds per workload, split "
              f"into trials of {CONFIRM_ROUNDS} rounds. A false winner is a copy declared faster than the default.", "",
              "| workload | trials | false winners, confirmation rule | false winners, strict rule | "
              "max spread of one engine across rounds | round CV |", "|---|---|---|---|---|---|"]
    total = {"trials": 0, "rule": 0, "strict": 0}
    for r in results:
        a = r["aa"]
        if "error" in a:
            lines.append(f"| {r['workload']} | error: {a['error'][:80]} | | | | |")
            continue
        total["trials"] += a["trials"]
        total["rule"] += a["rule_false_winners"]
        total["strict"] += a["strict_false_winners"]
        lines.append(f"| {r['workload']} | {a['trials']} | {a['rule_false_winners']} | {a['strict_false_winners']} | "
                     f"{a['max_relative_spread']:.1%} | {a['round_cv']:.2%} |")
    if total["trials"]:
        lines += ["", f"**False-winner rate: {total['rule'] / total['trials']:.1%} with the confirmation rule, "
                  f"{total['strict'] / total['trials']:.1%} with the strict rule** ({total['trials']} trials)."]
    lines += ["", "## Every route (mixed run)", ""]
    for r in results:
        lines += [f"### {r['workload']} — {r['note']}", "", f"![{r['workload']}](benchmarks/{r['workload']}.png)", "",
                  f"Decision: {r['mixed_decision']}. Default measured per batch: "
                  f"{', '.join(f'{b:.4f}' for b in r['default_baselines_ms'])} ms.", "",
                  "| route | stage | outcome | median ms | vs batch default | build s | load s | cache hits/misses | loss |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for x in r["routes"]:
            ratio = f"{x['baseline_ms'] / x['median_ms']:.3f}" if x["median_ms"] and x["baseline_ms"] else "—"
            load = x.get("load") or {}
            lines.append(f"| `{x['route']}` | {x['stage']} | {x['outcome']} | "
                         f"{x['median_ms'] if x['median_ms'] is None else format(x['median_ms'], '.4f')} | {ratio} | "
                         f"{x['build_s']} | {load.get('load_seconds', '—')} | "
                         f"{load.get('fxgraph_cache_hit', '—')}/{load.get('fxgraph_cache_miss', '—')} | "
                         f"{'—' if x['loss'] is None else format(x['loss'], '.2g')} |")
        lines.append("")
    (docs / "benchmarks.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {docs / 'benchmarks.md'}; mixed geomean {geo:.3f}x")
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
    noise.set_defaults(func=cmd_noise)
    docs = sub.add_parser("docs")
    docs.add_argument("results", nargs="+")
    docs.add_argument("--docs", default="docs")
    docs.add_argument("--revision", default="")
    docs.add_argument("--date", default="")
    docs.set_defaults(func=cmd_docs)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
