"""Why does the product time the block's host-bound default route 1.8x slower than a plain loop of the
same engine? (docs/benchmarks/raw/s11/call3: confirmation 0.487 ms, plain loop 0.274 ms, same run.)

    python bench/default_gap.py --out OUT [--workload block] [--turns 9] [--export DIR]

One variable at a time, the default engine and the CUDA-graph route's engine of `--workload`, both
built by the product's build child:
- `in-process, 1 load each`: each engine loaded once into this process; per turn, taking turns:
  `plain` (200 calls of `run_prepared` back to back, one CUDA event pair around them), `throughput`
  and `gpuTime` rounds (`rounds.Held.round`, the product's round), and one `interleaved` round of the
  two (`rounds.interleaved_round`, the product's confirmation round) in gpuTime;
- `in-process, 5 loads each`: the same after four more loads of each (the confirmation's layout);
- `server`: the product's serving process (`worker.server.Server`) holding one load of each, its
  `time` (gpuTime rounds) and `interleave` replies.
OUT/default_gap.json holds every figure, written after every phase.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="block")
    parser.add_argument("--turns", type=int, default=9)
    parser.add_argument("--export", type=Path)
    args = parser.parse_args()
    import torch

    from engine_overhead import workloads as overhead_workloads
    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure.rounds import Held, interleaved_round
    from enginewright.measure.timing import calls_per_round, warm_up
    from enginewright.worker.child import load_npz
    from enginewright.worker.server import Server
    from workloads import WORKLOADS, setup as bench_setup

    known = {**{w.name: w for w in WORKLOADS}, **overhead_workloads()}
    bench = bench_setup(args.out, known[args.workload], "cuda", "gpuTime", REPO)
    paths = {"default": bench.build_default(), "cudagraphs": bench.build({"triton.cudagraphs": "true"}, "cg")}
    inputs = load_npz(str(bench.files["inputs"][0]))
    round_seconds = bench.timing.round_seconds
    figures: dict = {"workload": args.workload, "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    count = {"n": 0}

    def load(name: str) -> Held:
        count["n"] += 1
        runner = InductorBackend(device="cuda").load(paths[name].read_bytes(), args.out / "loads" / f"L{count['n']}")
        runner.run(inputs)
        warm_up(runner, inputs, "gpuTime", bench.timing.warmup_iterations)
        return Held(runner, calls_per_round(runner, inputs, "gpuTime", round_seconds), name)

    def plain(held: Held, calls: int = 200) -> float:
        prepared = held.runner.prepare(inputs)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        held.runner.run_prepared(prepared)
        start.record()
        for _ in range(calls):
            held.runner.run_prepared(prepared)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / calls

    def phase(name: str, held: dict[str, Held], extra: list[Held]) -> None:
        rows: dict[str, list[float]] = {}
        for _ in range(args.turns):
            for engine, h in held.items():
                rows.setdefault(f"{engine}/plain", []).append(plain(h))
                rows.setdefault(f"{engine}/throughput", []).append(h.round("throughput", inputs, round_seconds))
                rows.setdefault(f"{engine}/gpuTime", []).append(h.round("gpuTime", inputs, round_seconds))
            everyone = [*held.values(), *extra]
            times = interleaved_round(everyone, "gpuTime", inputs, round_seconds)
            for engine, ms in zip(held, times):
                rows.setdefault(f"{engine}/interleaved", []).append(ms)
        figures[name] = {"medians": {k: statistics.median(v) for k, v in rows.items()}, "turns": rows}
        bench.say(f"{name}: " + ", ".join(f"{k} {v:.4f}" for k, v in figures[name]["medians"].items()))
        write(args, figures)

    held = {name: load(name) for name in paths}
    phase("in-process, 1 load each", held, [])
    extra = [load(name) for name in paths for _ in range(4)]
    phase("in-process, 5 loads each", held, extra)
    for h in [*held.values(), *extra]:
        h.runner.close()

    server = Server(bench.context(), "default", paths["default"], args.out / "server", references=False)
    try:
        server.start(600)
        server.add("cudagraphs", paths["cudagraphs"], args.out / "server-cg", 600, check=False)
        rows: dict[str, list[float]] = {}
        for _ in range(args.turns):
            for key in ("default", "cudagraphs"):
                rows.setdefault(f"{key}/time", []).append(server.time(600, key))
            for key, ms in zip(("default", "cudagraphs"), server.interleave(["default", "cudagraphs"], 600)):
                rows.setdefault(f"{key}/interleaved", []).append(ms)
        figures["server"] = {"medians": {k: statistics.median(v) for k, v in rows.items()}, "turns": rows}
        bench.say("server: " + ", ".join(f"{k} {v:.4f}" for k, v in figures["server"]["medians"].items()))
    finally:
        server.close()
    write(args, figures)
    return 0


def write(args, figures: dict) -> None:
    data = json.dumps(figures, indent=1)
    for folder in filter(None, (args.out, args.export)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "default_gap.json").write_text(data)


if __name__ == "__main__":
    sys.exit(main())
