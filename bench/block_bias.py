"""Why does one engine read slower in an interleaved round than in a round of its own?

    python bench/block_bias.py --out OUT [--workload attention] [--device cuda] [--rounds 12] [--export DIR]

Found on the H200 (bench/loads_bias.py, docs/benchmarks/raw/s9/call1): the attention block's
CUDA-graph route read 0.157-0.158 ms in rounds of its own in every process, and 0.174-0.198 ms in
`rounds.interleaved_round`, even with no other engine in the process (one held load, ten blocks of
itself). The confirmation decides and records on interleaved rounds, so the recorded time of a
winner overstates what it costs served. This takes one load of each route (the workload's default
and, on CUDA, `triton.cudagraphs=true`) in one process and times it, the conditions taking turns
within every repetition (A B C D E F, then B C D E F A, ...), each condition a round of the same
number of calls:

- `round`: `Held.round` (what a round of its own is);
- `interleaved`: `rounds.interleaved_round([held])` as the product runs it;
- `no_wait`: the same with `wait_quiet` made a no-op (does waiting for quiet threads idle the GPU?),
  and how many blocks waited;
- `no_proc`: the same with neither the CPU-time reads nor the wait (is reading /proc the cost?);
- `blocks`: the round's calls as 10 `timed_calls` blocks straight after each other, nothing between
  (is it the per-block synchronisation?);
- `blocks_first_untimed`: the same 10 blocks, each after one untimed call (is it the first call
  after the queue drained?).

Also each route's host CPU time per call (`Runner.host_cpu_ms`) beside its time. OUT/block_bias.json
gets every figure as it is measured; the last line printed is a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

ROUTES = {"default": {}, "cudagraphs": {"triton.cudagraphs": "true"}}
CONDITIONS = ("round", "interleaved", "no_wait", "no_proc", "blocks", "blocks_first_untimed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--round-seconds", type=float, default=0.05)
    parser.add_argument("--export", type=Path, help="also write block_bias.json here as results come")
    args = parser.parse_args()
    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure import rounds as rounds_module
    from enginewright.measure.rounds import Held, interleaved_round
    from enginewright.measure.timing import calls_per_round, warm_up
    from enginewright.worker.child import load_npz
    from workloads import setup

    bench = setup(args.out, args.workload, args.device, "gpuTime", REPO)
    inputs = load_npz(bench.files["inputs"][0])
    result = {
        "workload": args.workload,
        "device": args.device,
        "rounds": args.rounds,
        "round_seconds": args.round_seconds,
        "routes": {},
    }

    def write() -> None:
        for folder in filter(None, (args.out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "block_bias.json").write_text(json.dumps(result, indent=1))

    waits = {"n": 0}
    real_wait = rounds_module.wait_quiet
    real_cpu = rounds_module.sample

    def counting_wait(*a, **k):
        waits["n"] += 1
        return real_wait(*a, **k)

    def run(held: Held, condition: str) -> float:
        rs = args.round_seconds
        rounds_module.wait_quiet, rounds_module.sample = counting_wait, real_cpu
        try:
            if condition == "round":
                return held.round("gpuTime", inputs, rs)
            if condition == "no_wait":
                rounds_module.wait_quiet = lambda *a, **k: True
            if condition == "no_proc":
                rounds_module.wait_quiet = lambda *a, **k: True
                rounds_module.sample = lambda *a, **k: None
            if condition in ("interleaved", "no_wait", "no_proc"):
                return interleaved_round([held], "gpuTime", inputs, rs)[0]
            rounds_module.warm_in_turns([held], "gpuTime", inputs, rs)
            per_block = max(1, held.calls // 10)
            total, counted = 0.0, 0
            for _ in range(10):
                if condition == "blocks_first_untimed":
                    held.timed_calls("gpuTime", inputs, 1)  # fills the drained queue, untimed
                total += held.timed_calls("gpuTime", inputs, per_block)
                counted += per_block
            return total / counted
        finally:
            rounds_module.wait_quiet, rounds_module.sample = real_wait, real_cpu

    for name, knobs in ROUTES.items():
        if args.device != "cuda" and knobs:
            continue
        engine = bench.build(knobs, name)
        runner = InductorBackend(device=args.device).load(engine.read_bytes(), args.out / f"load-{name}")
        runner.run(inputs)
        warm_up(runner, inputs, "gpuTime", 10)
        held = Held(runner, calls_per_round(runner, inputs, "gpuTime", args.round_seconds), name)
        times = {c: [] for c in CONDITIONS}
        waited = {c: 0 for c in CONDITIONS}
        entry = result["routes"][name] = {
            "calls": held.calls,
            "host_cpu_ms": runner.host_cpu_ms(inputs),
            "times": times,
            "waited_blocks": waited,
        }
        for index in range(args.rounds):
            shift = index % len(CONDITIONS)
            for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
                before = waits["n"]
                times[condition].append(run(held, condition))
                waited[condition] += waits["n"] - before
            entry["median"] = {c: statistics.median(v) for c, v in times.items()}
            entry["to_round"] = {c: entry["median"][c] / entry["median"]["round"] for c in CONDITIONS}
            write()
        bench.say(
            f"{name}: "
            + json.dumps({c: round(v, 4) for c, v in entry["median"].items()})
            + f" waited {waited} host_cpu_ms {entry['host_cpu_ms']:.4f} calls {held.calls}"
        )
        runner.close()
    print(table(result))
    return 0


def table(result: dict) -> str:
    rows = [
        "| route | host CPU ms/call | " + " | ".join(CONDITIONS) + " |",
        "| --- | --- | " + " | ".join("---" for _ in CONDITIONS) + " |",
    ]
    for name, entry in result["routes"].items():
        rows.append(
            f"| {name} | {entry['host_cpu_ms']:.4f} | "
            + " | ".join(f"{entry['median'][c]:.4f} ({entry['to_round'][c]:.2f})" for c in CONDITIONS)
            + " |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
