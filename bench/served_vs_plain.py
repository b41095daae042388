"""Issue 19, goal 3: is the product's serving harness slower than a plain loop for a host-bound
route, at the same moments? The block's default (host-bound on the H200) ran 1.07-1.78x slower in
the product's confirmation than in bench/winner_vs_plain.py's plain loop a minute later, in 4 runs
of 4, while its CUDA-graph winner ran 1.01-1.14x: always the same direction, so not the host's
drift alone.

    python bench/served_vs_plain.py --out OUT [--workload block] [--copies 5] [--turns 15] [--device cuda|cpu]

In one run, taking turns (the order rotated every turn), for the default and the CUDA-graph route
(`torch.compile` of the workload's module with each route's options, unfused encoder layer as the
engine's program; bench/engine_overhead.py's `TorchCompileBaseline`, which serves like the engine:
ratio 1.00 on the block):
- `plain`: the two compiled modules in this process, calls back to back, CUDA events, the calls of
  the serving process's round (timed as `TorchCompileBaseline.timed_calls` times: no call queued
  ahead of the first event, where winner_vs_plain's plain loop queues one: 1 of 1,000-2,000 calls);
- `served-2`: a serving process of the product holding the two, one interleaved round
  (`rounds.interleaved_round`, as every paired comparison);
- `served-N`: a serving process holding `--copies` loads of each (as the confirmation holds its
  loads), one interleaved round of all of them in the worker's order (`round_order`);
- `plain-hot`: the plain loop again straight after its own turn, with no idle before it (as
  winner_vs_plain's turns follow each other), where every other layout's turn follows the wait for
  another process;
- `alone-<n>`: the `served-<n>` process's engines each timed in a round of its own (`time`), not
  interleaved;
and around every turn bench/host_state.py's pure-Python probe. OUT/served_vs_plain.json (and
--export) holds every turn, written after each turn; the summary gives each layout's median per
route and its per-turn ratio to `plain`.
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

ROUTES = {"default": {}, "cudagraphs": {"triton.cudagraphs": "true"}}
BASELINE = "engine_overhead:TorchCompileBaseline"


def summarise(turns: dict[str, list[float]]) -> dict:
    """Each layout/route's median and its per-turn ratio to the plain loop's same route (median and
    range), and the default/CUDA-graph ratio per layout."""
    summary: dict = {"median_ms": {k: statistics.median(v) for k, v in turns.items() if v}}
    for key, values in turns.items():
        layout, route = key.split("/")
        plain = turns.get(f"plain/{route}")
        if layout != "plain" and plain and values:
            ratios = sorted(v / p for v, p in zip(values, plain))
            summary.setdefault("over_plain", {})[key] = {
                "median": statistics.median(ratios),
                "range": [ratios[0], ratios[-1]],
                "slower_turns": sum(r > 1 for r in ratios),
                "turns": len(ratios),
            }
    for layout in dict.fromkeys(k.split("/")[0] for k in turns):
        d, g = turns.get(f"{layout}/default"), turns.get(f"{layout}/cudagraphs")
        if d and g:
            summary.setdefault("speedup", {})[layout] = statistics.median(a / b for a, b in zip(d, g))
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="block")
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--export", type=Path)
    args = parser.parse_args()
    import numpy as np
    import torch
    import torch._inductor.config as config

    from engine_overhead import TIMING, server, workloads
    from enginewright.api.models import Timing
    from enginewright.backends.inductor import route_options
    from enginewright.measure.paired import round_order
    from host_state import probe_py
    from workloads import setup

    cuda = args.device == "cuda"
    routes = ROUTES if cuda else {"default": {}}
    workload = workloads()[args.workload]
    args.out.mkdir(parents=True, exist_ok=True)
    bench = setup(args.out / workload.name, workload, args.device, "throughput", REPO)
    bench.timing, bench.began = Timing(**TIMING), time.monotonic()
    specs = {}
    for route, knobs in routes.items():
        specs[route] = args.out / f"{route}.json"
        specs[route].write_text(json.dumps({"workload": workload.name, "route": knobs, "fused": False}))

    def hold(copies: int, name: str):
        keys = [f"{route}#{i}" for i in range(copies) for route in routes]
        held = server(bench, BASELINE, keys[0], specs[keys[0].split("#")[0]], args.out / name / keys[0])
        held.start(600)
        for key in keys[1:]:
            held.add(
                key,
                specs[key.split("#")[0]],
                args.out / name / key,
                600,
                check=False,
                backend=BASELINE,
                backend_options={"device": args.device},
            )
        bench.say(f"{name}: {len(keys)} engines loaded")
        return held, keys

    two, two_keys = hold(1, f"served-{len(routes)}")
    many, many_keys = hold(args.copies, f"served-{args.copies * len(routes)}")

    torch.backends.mha.set_fastpath_enabled(False)  # the engine's program: the layer's unfused ops
    torch.manual_seed(0)
    dtype = torch.float16 if cuda else torch.float32
    x = torch.from_numpy(next(iter(np.load(bench.files["inputs"][0]).values()))).to(args.device).to(dtype)
    plain = {}
    for route, knobs in routes.items():
        module = workload.make().eval().to(args.device).to(dtype)
        plain[route] = torch.compile(module, backend="inductor", options=route_options(config, knobs), dynamic=False)
    marks = {route: bool(knobs.get("triton.cudagraphs")) for route, knobs in routes.items()}

    def timed(route: str, calls: int) -> float:
        def call():
            if marks[route]:
                torch.compiler.cudagraph_mark_step_begin()
            return plain[route](x)

        if not cuda:
            started = time.perf_counter()
            for _ in range(calls):
                call()
            return (time.perf_counter() - started) * 1000 / calls
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(calls):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    with torch.inference_mode():
        for route in routes:
            for _ in range(50):
                timed(route, 1)
    two_name, many_name = f"served-{len(two_keys)}", f"served-{len(many_keys)}"
    turns: dict[str, list[float]] = {
        f"{layout}/{route}": []
        for layout in ("plain", "plain-hot", two_name, f"alone-{len(two_keys)}", many_name)
        for route in routes
    }
    probes: list[float] = []

    def plain_turn(index):
        order = list(routes) if index % 2 == 0 else list(routes)[::-1]
        with torch.inference_mode():
            for layout in ("plain", "plain-hot"):
                for route in order:
                    turns[f"{layout}/{route}"].append(timed(route, two.calls_of[f"{route}#0"]))

    def alone_turn(index):
        for key in two_keys if index % 2 == 0 else two_keys[::-1]:
            turns[f"alone-{len(two_keys)}/{key.split('#')[0]}"].append(two.time(600, key))

    def served_turn(held, keys, name, index):
        order = round_order(keys, index)
        by_route: dict[str, list[float]] = {}
        for key, ms in zip(order, held.interleave(order, 600)):
            by_route.setdefault(key.split("#")[0], []).append(ms)
        for route, values in by_route.items():
            turns[f"{name}/{route}"].append(statistics.median(values))

    steps = [
        plain_turn,
        alone_turn,
        lambda i: served_turn(two, two_keys, two_name, i),
        lambda i: served_turn(many, many_keys, many_name, i),
    ]
    try:
        for index in range(args.turns):
            probes.append(probe_py())
            for step in steps[index % len(steps) :] + steps[: index % len(steps)]:
                step(index)
            figures = {
                "workload": workload.name,
                "device": args.device,
                "torch": torch.__version__,
                "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                "copies": args.copies,
                "turns": turns,
                "probe_py_ms": probes,
                "summary": summarise(turns),
            }
            for folder in filter(None, (args.out, args.export)):
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "served_vs_plain.json").write_text(json.dumps(figures, indent=1))
            bench.say(f"turn {index + 1}: " + ", ".join(f"{k} {v[-1]:.4f}" for k, v in turns.items()))
    finally:
        two.close()
        many.close()
    print(json.dumps(summarise(turns), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
