"""Issue 19, goal 3: does the mixed winner's speedup interval hold the plain-loop ratio of the same
two routes, measured in the same run?

    python bench/winner_vs_plain.py --out OUT [--workload block] [--knobs compile,triton.cudagraphs]
        [--turns 41] [--calls 200] [--export DIR] [--device cuda|cpu]

1. exports the workload (bench/engine_overhead.py's `block`, a transformer encoder layer 8x256x1024,
   by default; fp16 on a GPU) and tunes it with the product's own flow (`enginewright.cli.tune`,
   as `enginewright tune` does): mixed search over `--knobs`, the product's default timing and
   confirmation; the headline speedup and its 95% interval across loads come from its summary;
2. in this same process, right after, the plain loop a user would write for the same two routes:
   the workload's own module (fp16, eval) under `torch.compile` with the default's options and with
   the winner's (the module itself for the eager route `compile=false`), `--calls` calls back to back
   timed by CUDA events (the host clock on CPU), the two taking turns `--turns` times, the order
   swapped every turn. PyTorch's fused fast path of `nn.TransformerEncoderLayer` is switched off for
   the loop (`torch.backends.mha.set_fastpath_enabled(False)`): the exported program the engine is
   built from holds the layer's unfused ops, and under inference mode `torch.compile` of the module
   would otherwise run one fused native op, another program (bench/engine_overhead.py says so too);
3. the ratio (the median of the per-turn default/winner ratios, with the spread of turns) against the
   headline's interval: `plain_ratio_in_interval`, and against the range of the run's two moments (the
   winner's sweep and its confirmation, `headline.moments`): `plain_ratio_in_moments_range`.

OUT/winner_vs_plain.json (and --export) holds every figure, written after the tune and at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]


def say(began: float, message: str) -> None:
    print(f"[{time.monotonic() - began:6.1f}s] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="block")
    parser.add_argument("--knobs", default="compile,triton.cudagraphs")
    parser.add_argument("--turns", type=int, default=41)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--export", type=Path)
    args = parser.parse_args()
    began = time.monotonic()
    import os

    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "operator"), str(REPO / "bench"), os.environ.get("PYTHONPATH", "")]
    )
    import torch

    from engine_overhead import workloads as overhead_workloads
    from enginewright.backends.inductor import InductorBackend
    from enginewright.cli.tune import TuneOptions, tune
    from workloads import WORKLOADS, prepare

    known = {**{w.name: w for w in WORKLOADS}, **overhead_workloads()}
    workload = known[args.workload]
    cuda = args.device == "cuda"
    files = prepare(workload, args.out / "data", args.device, "float16" if cuda else "float32")
    say(began, f"{workload.name}: exported ({workload.note})")
    available = {k.name for k in InductorBackend(device=args.device).knobs()}
    knobs = [(k, ["true", "false"]) for k in args.knobs.split(",") if k in available]
    result = tune(
        TuneOptions(
            backend="inductor",
            model=files["program"],
            out=args.out / "tune",
            inputs=files["inputs"],
            references=files["references"],
            metric="cosine",
            threshold=1e-3,
            mode="mixed",
            knobs=knobs,
            settings={"input_dtype": "float16"} if cuda else {},
            backend_options={"device": args.device},
        ),
        lambda message: say(began, message),
    )
    summary = result.summary
    headline = summary["headline"]
    figures: dict = {
        "workload": workload.name,
        "note": workload.note,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "torch": torch.__version__,
        "knobs": knobs,
        "tune_wall_s": round(time.monotonic() - began, 1),
        "default_id": summary["default_id"],
        "winner_id": summary["winner_id"],
        "winner_route": summary["winner_route"],
        "decision": summary["decision"],
        "headline": headline,
        "speedup": summary["speedup"],
        "times_ms": summary["times"],
    }
    figures["entries"] = [  # every route's own figures: stage 1's paired interval beside the confirmation's
        {
            "route": e.route or "(default)",
            "stage": e.stage,
            "median_ms": e.median_ms,
            "paired": e.paired.wire() if e.paired else None,
            "host": e.host.wire() if e.host else None,
        }
        for e in result.entries
    ]
    write(args, figures)
    say(began, f"tuned: winner {summary['winner_route']} headline {headline}")
    if summary["winner_id"] == summary["default_id"]:
        say(began, "the default won: there is no winner's ratio to compare")
        figures["plain_ratio_in_interval"] = None
        write(args, figures)
        return 0
    winner = next(e for e in result.entries if e.route_id == summary["winner_id"])
    figures.update(plain_loop(torch, workload, files, dict(winner.knobs), args, headline))
    write(args, figures)
    say(began, json.dumps({k: v for k, v in figures.items() if not k.startswith("plain_turns")}))
    return 0


def plain_loop(torch, workload, files, winner_knobs: dict, args, headline: dict) -> dict:
    """The default and the winner as a user runs them: the workload's module, compiled with each
    route's options (or as it is, for `compile=false`), timed in turns."""
    import numpy as np
    import torch._inductor.config as config

    from enginewright.backends.inductor import compiles, route_options

    cuda = args.device == "cuda"
    dtype = torch.float16 if cuda else torch.float32
    torch.backends.mha.set_fastpath_enabled(False)  # the exported program's unfused layer, not the fused op
    torch.manual_seed(0)
    x = torch.from_numpy(next(iter(np.load(files["inputs"][0]).values()))).to(args.device).to(dtype)
    runs, mark = {}, {}
    for name, knobs in (("default", {}), ("winner", winner_knobs)):
        module = workload.make().eval().to(args.device).to(dtype)  # a module of its own: dynamo caches by code
        options = route_options(config, knobs)
        runs[name] = (
            module if not compiles(knobs) else torch.compile(module, backend="inductor", options=options, dynamic=False)
        )
        # a CUDA-graph route's previous outputs are overwritten: mark each step, as the engine does
        mark[name] = compiles(knobs) and bool(options.get("triton.cudagraphs"))

    def call(name):
        if mark[name]:
            torch.compiler.cudagraph_mark_step_begin()
        return runs[name](x)

    def timed(name) -> float:
        if not cuda:
            started = time.perf_counter()
            for _ in range(args.calls):
                call(name)
            return (time.perf_counter() - started) * 1000 / args.calls
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        call(name)  # queued ahead, as in a serving loop
        start.record()
        for _ in range(args.calls):
            call(name)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / args.calls

    from host_state import probe_py

    turns: dict[str, list[float]] = {"default": [], "winner": []}
    probes: list[float] = []  # the host's speed at each turn (bench/host_state.py's pure-Python probe)
    with torch.inference_mode():
        for name in runs:
            for _ in range(50):
                call(name)
        for turn in range(args.turns):
            probes.append(probe_py())
            for name in ("default", "winner") if turn % 2 == 0 else ("winner", "default"):
                turns[name].append(timed(name))
    ratios = sorted(d / w for d, w in zip(turns["default"], turns["winner"]))
    ratio = statistics.median(ratios)
    low, high = headline.get("low"), headline.get("high")
    quarter = len(ratios) // 4
    return {
        "plain_turns_default_ms": turns["default"],
        "plain_turns_winner_ms": turns["winner"],
        "plain_turns_probe_py_ms": probes,
        "plain_default_ms": statistics.median(turns["default"]),
        "plain_winner_ms": statistics.median(turns["winner"]),
        "plain_ratio": ratio,
        "plain_ratio_quartiles": [ratios[quarter], ratios[-1 - quarter]],
        "plain_ratio_range": [ratios[0], ratios[-1]],
        "plain_ratio_in_interval": bool(low is not None and low <= ratio <= high),
        # the range the run's two moments cover (its sweep, its confirmation: `Decided.moments`)
        "plain_ratio_in_moments_range": (
            bool(moments["range"][0] <= ratio <= moments["range"][1]) if (moments := headline.get("moments")) else None
        ),
    }


def write(args, figures: dict) -> None:
    data = json.dumps(figures, indent=1, default=str)
    for folder in filter(None, (args.out, args.export)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "winner_vs_plain.json").write_text(data)


if __name__ == "__main__":
    sys.exit(main())
