"""What tuning costs where routes are compiled (issue 19, ask 7): `enginewright tune --search mixed`
with the Inductor backend against a naive sweep of the same knobs, side by side in one run.

    python bench/inductor_cost.py --out OUT [--workload mlp] [--rows 256] [--device cpu|cuda]
        [--knobs compile,freezing,coordinate_descent_tuning] [--pairs 1] [--export DIR]
        [--variant NAME=OPERATOR_DIR ...] [--variant-args NAME=ARGS ...]

`bench/measure_cost.py` compares the two on ONNX Runtime, where a route's "build" is a session made
in milliseconds and the measuring protocol is the whole cost. Here a route is compiled, as the
product's GPU targets are, and the question is what the protocol adds to that:

1. the workload (`bench/engine_overhead.py`'s MLP and block, `bench/workloads.py`'s models; `--rows`
   sets the MLP's rows, hence its call time) is exported with two reference pairs, as
   `bench/winner_vs_plain.py` does; not counted;
2. the naive sweep, in a child process of its own: every configuration of the knobs (`compile=false`
   alone, and every combination of the others under `torch.compile`), each compiled cold (a fresh
   Inductor and Triton cache directory per configuration, as the product builds each route), then
   WARMUP untimed calls and RUNS timed calls one by one (CUDA-synchronised on a GPU), their median;
   the fastest configuration is the sweep's answer. The cheapest honest sweep: one process, the
   module compiled directly, no second load, no accuracy check, no interval;
3. `python -m enginewright tune ... --search mixed` over the same knobs, every timing and
   confirmation option at its default, into a fresh directory and cache;
4. each side's wall seconds and CPU-seconds (the child and everything it waited for); on a GPU the
   wall seconds are GPU-seconds, the GPU held throughout; tune's build and measure seconds from its
   summary; the ratios tune / naive; whether the two name the same configuration.

`--pairs N` runs N pairs, the order swapped every pair (naive, tune, tune, naive, ...), so drift of
the host hits both alike. `--variant NAME=DIR` (twice or more) runs tune once per variant in every
pair, each with its own copy of the operator's code (DIR: a folder holding the `enginewright`
package, as `git archive REV operator | tar -x -C X` leaves in X/operator), the sides' order
balanced over the pairs (`side_order`): the variants' ratios to the naive sweep and to the first variant, side by side.
`--variant-args NAME=ARGS` adds tune options to that variant's command (ARGS split as a shell would,
e.g. `w4=--build-parallelism 4`); a variant may then name this checkout (`--variant w4=operator`).
OUT/inductor_cost.json (and --export) is written after every step.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

WARMUP, RUNS = 10, 100  # the naive sweep's calls per configuration
METRIC, THRESHOLD = "cosine", 1e-3


# ----------------------------------------------------------------------------- pure helpers
def configurations(knobs: list[str]) -> list[dict[str, str]]:
    """Every configuration a sweep of boolean knobs holds, `compile=false` (eager, where no other
    option applies) once: the default first."""
    others = [k for k in knobs if k != "compile"]
    configs = [
        {k: "true" for k, on in zip(others, flags) if on}
        for flags in itertools.product((False, True), repeat=len(others))
    ]
    if "compile" in knobs:
        configs.insert(1, {"compile": "false"})
    return configs


def route_text(config: dict[str, str]) -> str:
    """A configuration as tune names its route: its non-default knobs, sorted, `-name=value`."""
    return " ".join(f"-{name}={value}" for name, value in sorted(config.items()))


def ratios(naive: dict, tune: dict) -> dict:
    """tune / naive, wall and CPU-seconds."""
    return {
        "wall": round(tune["wall_s"] / naive["wall_s"], 3),
        "cpu": round(tune["cpu_s"] / naive["cpu_s"], 3),
    }


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ----------------------------------------------------------------------------- the naive sweep (child)
def naive_child(spec: dict) -> None:
    """Runs in its own process: one JSON line per configuration, then the process ends."""
    import numpy as np
    import torch
    import torch._inductor.config as config

    from enginewright.backends.inductor import compiles, route_options

    workload = known_workloads()[spec["workload"]]
    device = spec["device"]
    cuda = device == "cuda"
    dtype = torch.float16 if cuda else torch.float32
    torch.backends.mha.set_fastpath_enabled(False)  # the exported program's unfused layer (winner_vs_plain)
    x = torch.from_numpy(next(iter(np.load(spec["inputs"]).values()))).to(device).to(dtype)
    for knobs in spec["configs"]:
        folder = Path(spec["caches"]) / (route_text(knobs).replace(" ", "_").replace("=", "-") or "default")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder / "inductor")
        os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
        torch._dynamo.reset()
        torch.manual_seed(0)
        module = with_rows(workload, spec["rows"]).make().eval().to(device).to(dtype)
        options = route_options(config, knobs)
        began = time.perf_counter()
        run = module if not compiles(knobs) else torch.compile(module, backend="inductor", options=options)
        graphs = compiles(knobs) and bool(options.get("triton.cudagraphs"))
        times = []
        with torch.inference_mode():
            for i in range(WARMUP + RUNS):
                if graphs:
                    torch.compiler.cudagraph_mark_step_begin()
                started = time.perf_counter()
                run(x)
                if cuda:
                    torch.cuda.synchronize()
                if i == 0:
                    first = time.perf_counter() - began  # the compile, and one call
                elif i >= WARMUP:
                    times.append((time.perf_counter() - started) * 1000)
        line = {"route": route_text(knobs), "first_call_s": round(first, 3), "median_ms": statistics.median(times)}
        print(json.dumps(line), flush=True)


def run_naive(files: dict, args, configs: list[dict], folder: Path) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec = {
        "workload": args.workload,
        "rows": args.rows,
        "device": args.device,
        "inputs": str(files["inputs"][0]),
        "configs": configs,
        "caches": str(folder / "caches"),
    }
    began, cpu = time.monotonic(), children_cpu_seconds()
    proc = subprocess.run(
        [sys.executable, __file__, "_naive", json.dumps(spec)], capture_output=True, text=True, env=child_env()
    )
    wall, cpu_s = time.monotonic() - began, children_cpu_seconds() - cpu
    (folder / "naive.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"the naive sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    best = min(lines, key=lambda line: line["median_ms"])
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu_s, 2),
        "configurations": lines,
        "fastest": best["route"],
        "fastest_speedup": round(lines[0]["median_ms"] / best["median_ms"], 3),
    }


# ----------------------------------------------------------------------------- tune
def tune_command(files: dict, args, out: Path) -> list[str]:
    cmd = [sys.executable, "-m", "enginewright", "tune", str(files["program"]), "--backend", "inductor"]
    cmd += ["--search", "mixed", "--metric", METRIC, "--threshold", str(THRESHOLD), "--out", str(out)]
    cmd += ["--device", args.device]
    for inputs, references in zip(files["inputs"], files["references"]):
        cmd += ["--inputs", str(inputs), "--references", str(references)]
    for knob in args.knobs.split(","):
        cmd += ["--knob", f"{knob}=true,false"]
    if args.device == "cuda":
        cmd += ["--setting", "input_dtype=float16"]
    return cmd


def run_tune(files: dict, args, folder: Path, operator: Path | None = None, extra: list[str] = ()) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmd = tune_command(files, args, folder / "out") + list(extra)
    began, cpu = time.monotonic(), children_cpu_seconds()
    with open(folder / "tune.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(operator), cwd=folder)
    wall, cpu_s = time.monotonic() - began, children_cpu_seconds() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"tune failed ({proc.returncode}): {(folder / 'tune.log').read_text()[-2000:]}")
    summary = json.loads((folder / "out" / "summary.json").read_text())
    headline = summary.get("headline") or {}
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu_s, 2),
        "command": cmd,
        "build_s": summary.get("build_seconds"),
        "measure_s": summary.get("measure_seconds"),
        "routes": summary.get("routes_measured", summary.get("routes")),
        "winner": summary.get("winner_route") or "",
        "decision": summary.get("decision"),
        "headline": {k: headline.get(k) for k in ("speedup", "low", "high")},
    }


# ----------------------------------------------------------------------------- the run
def known_workloads() -> dict:
    from engine_overhead import workloads as overhead_workloads
    from workloads import WORKLOADS

    return {**{w.name: w for w in WORKLOADS}, **overhead_workloads()}


def with_rows(workload, rows: int | None):
    """The workload with `rows` as its input's first dimension (the MLP's batch: its call time)."""
    return workload if not rows else replace(workload, input_shape=(rows, *workload.input_shape[1:]))


def child_env(operator: Path | None = None) -> dict:
    """The environment of the sides' processes: `operator` (default: this checkout's) first on the path."""
    env = dict(os.environ)
    paths = [str(operator or REPO / "operator"), str(REPO / "bench"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def parse_variants(texts: list[str]) -> dict[str, Path | None]:
    """`--variant NAME=DIR` values as {side: operator folder}; none given: one side, `tune`, on this
    checkout's code."""
    if not texts:
        return {"tune": None}
    variants: dict[str, Path | None] = {}
    for text in texts:
        name, sep, folder = text.partition("=")
        if not sep or not name or not folder:
            raise SystemExit(f"--variant takes NAME=OPERATOR_DIR, got {text!r}")
        if not (Path(folder) / "enginewright").is_dir():
            raise SystemExit(f"--variant {name}: {folder} holds no enginewright package")
        variants[f"tune:{name}"] = Path(folder).resolve()
    if len(variants) != len(texts):
        raise SystemExit("--variant names must differ")
    return variants


def parse_variant_args(texts: list[str], variants: dict) -> dict[str, list[str]]:
    """`--variant-args NAME=ARGS` values as {side: extra tune arguments}; NAME must be a variant's."""
    extra: dict[str, list[str]] = {}
    for text in texts:
        name, sep, rest = text.partition("=")
        if not sep or f"tune:{name}" not in variants:
            raise SystemExit(f"--variant-args takes NAME=ARGS for a --variant NAME, got {text!r}")
        extra[f"tune:{name}"] = shlex.split(rest)
    return extra


def side_order(sides: list[str], pair: int) -> list[str]:
    """The order of the sides in pair `pair`: two sides swap every pair; three or more rotate by one
    every second pair, the odd pair the even one reversed, so that each side follows each other as
    often as it precedes it (with three sides, six pairs run every order once)."""
    if len(sides) == 2:
        return sides if pair % 2 == 0 else sides[::-1]
    shift = (pair // 2) % len(sides)
    order = sides[shift:] + sides[:shift]
    return order if pair % 2 == 0 else order[::-1]


def save(args, figures: dict) -> None:
    text = json.dumps(figures, indent=1)
    (args.out / "inductor_cost.json").write_text(text)
    if args.export:
        args.export.mkdir(parents=True, exist_ok=True)
        (args.export / "inductor_cost.json").write_text(text)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "_naive":
        naive_child(json.loads(sys.argv[2]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="mlp")
    parser.add_argument("--rows", type=int, default=None, help="the input's first dimension (default: the workload's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--knobs", default="compile,freezing,coordinate_descent_tuning")
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--export", type=Path)
    parser.add_argument("--variant", action="append", default=[], help="NAME=OPERATOR_DIR: a tune side of its own")
    parser.add_argument(
        "--variant-args", action="append", default=[], help="NAME=ARGS: that variant's extra tune options"
    )
    args = parser.parse_args()
    variants = parse_variants(args.variant)
    extra = parse_variant_args(args.variant_args, variants)
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update(child_env())
    import torch

    from workloads import prepare

    began = time.monotonic()
    workload = with_rows(known_workloads()[args.workload], args.rows)
    cuda = args.device == "cuda"
    files = prepare(workload, args.out / "data", args.device, "float16" if cuda else "float32")
    configs = configurations(args.knobs.split(","))
    figures: dict = {
        "workload": workload.name,
        "input_shape": list(workload.input_shape),
        "note": workload.note,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "cpus": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "knobs": args.knobs.split(","),
        "naive_configurations": len(configs),
        "naive_calls": {"warmup": WARMUP, "timed": RUNS},
        "variants": {name: str(folder) if folder else "this checkout" for name, folder in variants.items()},
        "variant_args": extra,
        "pairs": [],
    }
    save(args, figures)
    tunes = list(variants)
    for pair in range(args.pairs):
        sides: dict = {}
        for side in side_order(["naive", *tunes], pair):
            folder = args.out / f"pair{pair}" / side.replace(":", "-")
            if side == "naive":
                sides[side] = run_naive(files, args, configs, folder)
            else:
                sides[side] = run_tune(files, args, folder, variants[side], extra.get(side, []))
            print(f"[{time.monotonic() - began:7.1f}s] pair {pair} {side}: {json.dumps(sides[side])[:600]}", flush=True)
            figures["pairs"] = [*figures["pairs"][:pair], {**sides}]
            save(args, figures)
        for side in tunes:
            suffix = side.removeprefix("tune")
            sides[f"tune_over_naive{suffix}"] = ratios(sides["naive"], sides[side])
            sides[f"same_answer{suffix}"] = sides["naive"]["fastest"] == sides[side]["winner"]
        for side in tunes[1:]:
            sides[f"{side.removeprefix('tune:')}_over_{tunes[0].removeprefix('tune:')}"] = ratios(
                sides[tunes[0]], sides[side]
            )
        figures["pairs"][pair] = sides
        save(args, figures)
        print(f"pair {pair}: " + ", ".join(f"{k} {v}" for k, v in sides.items() if "_over_" in k), flush=True)
    for side in tunes:
        key = "tune_over_naive" + side.removeprefix("tune")
        figures[key] = {which: [p[key][which] for p in figures["pairs"]] for which in ("wall", "cpu")}
    for side in tunes[1:]:
        key = f"{side.removeprefix('tune:')}_over_{tunes[0].removeprefix('tune:')}"
        figures[key] = {which: [p[key][which] for p in figures["pairs"]] for which in ("wall", "cpu")}
    save(args, figures)
    print(json.dumps({"workload": workload.name, **{k: v for k, v in figures.items() if "_over_" in k}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
