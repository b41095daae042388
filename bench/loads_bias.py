"""Does an engine's per-call time depend on how many engines its process holds, and on interleaving?

    python bench/loads_bias.py --out OUT [--workload attention] [--device cuda] [--holds 1,2,6,16]
        [--rounds 15] [--export DIR]

Found on the H200 (docs/gpu-end-to-end.md, 2026-12-02): a host-bound default route read 0.181 ms timed
on its own, 0.217 ms interleaved with 2 loads of another engine, 0.409 ms in the confirmation process
(5 loads of each of three engines interleaved); the CUDA-graph winner 0.157 / 0.174 / 0.202 ms, and
0.157 ms served alone after fetch. So the confirmation's headline overstated the win a consumer gets.
This separates the two things that differ between those figures. For each route (the workload's
default, and on CUDA `triton.cudagraphs=true`) and each N in --holds, in a FRESH process
(`python bench/loads_bias.py child ...`): the route's engine is loaded once as the primer (untimed, as
the worker does), then N loads are held: the probe load of the route plus N-1 others (alternately the
other route's and this route's, as a confirmation process holds them). Then, in that process:

- `alone`: the probe load timed for --rounds rounds (`rounds.Held.round`, the product's rounds and
  objective), the others loaded but idle;
- `interleaved`: every held load timed in interleaved rounds (`rounds.interleaved_round`, as the
  confirmation does), the probe's times reported;
- `alone_after`: the probe alone again (did something change for the process's life?).

OUT/loads_bias.json gets every figure as it is measured (ms per call, medians over rounds, and each
against N=1's `alone`), and `python -c` is not needed to read it: the last line printed is a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

ROUTES = {"default": {}, "cudagraphs": {"triton.cudagraphs": "true"}}


def main() -> int:
    if sys.argv[1:2] == ["child"]:
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", default="attention")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--holds", default="1,2,6,16", help="engines held in the process, the probe's load included")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--export", type=Path, help="also write loads_bias.json here as results come")
    args = parser.parse_args()
    from workloads import setup

    bench = setup(args.out, args.workload, args.device, "gpuTime", REPO)
    routes = [r for r in ROUTES if args.device == "cuda" or not ROUTES[r]]
    engines = {name: bench.build(ROUTES[name], name) for name in routes}
    holds = [int(n) for n in args.holds.split(",")]
    result = {"workload": args.workload, "device": args.device, "rounds": args.rounds, "runs": []}

    def write() -> None:
        for folder in filter(None, (args.out, args.export)):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "loads_bias.json").write_text(json.dumps(result, indent=1))

    for n in holds:
        for probe in routes:
            other = next((r for r in routes if r != probe), probe)
            cmd = [
                sys.executable,
                __file__,
                "child",
                str(engines[probe]),
                str(engines[other]),
                str(n),
                str(args.rounds),
                str(bench.files["inputs"][0]),
                args.device,
                str(args.out / "loads"),
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                result["runs"].append({"probe": probe, "holds": n, "error": done.stderr[-2000:]})
            else:
                result["runs"].append({"probe": probe, "holds": n, **json.loads(done.stdout.strip().splitlines()[-1])})
            write()
            bench.say(json.dumps({k: v for k, v in result["runs"][-1].items() if not k.endswith("_rounds")})[:400])
    for probe in routes:
        base = next(
            (r["alone"] for r in result["runs"] if r["probe"] == probe and r["holds"] == 1 and "alone" in r), None
        )
        for run in result["runs"]:
            if run["probe"] == probe and base and "alone" in run:
                run["to_one_alone"] = {k: run[k] / base for k in ("alone", "interleaved", "alone_after")}
    write()
    print(table(result))
    return 0


def child(argv: list[str]) -> int:
    """One process: the primer, N held loads, the probe timed alone, interleaved with all, alone again."""
    from enginewright.backends.inductor import InductorBackend
    from enginewright.measure.paired import round_order
    from enginewright.measure.rounds import Held, interleaved_round
    from enginewright.measure.timing import calls_per_round, warm_up
    from enginewright.worker.child import load_npz

    probe_engine, other_engine, n, rounds, inputs_path, device, work = argv
    n, rounds = int(n), int(rounds)
    inputs = load_npz(inputs_path)
    blobs = {"probe": Path(probe_engine).read_bytes(), "other": Path(other_engine).read_bytes()}
    count = {"n": 0}

    def load(which: str):
        count["n"] += 1
        runner = InductorBackend(device=device).load(blobs[which], Path(work) / f"{time.monotonic_ns()}-{count['n']}")
        runner.run(inputs)
        warm_up(runner, inputs, "gpuTime", 10)
        return runner

    primer = load("probe")
    held = {"probe": load("probe")}
    for i in range(n - 1):
        held[f"{'other' if i % 2 == 0 else 'probe'}-{i}"] = load("other" if i % 2 == 0 else "probe")
    cells = {k: Held(r, calls_per_round(r, inputs, "gpuTime", 0.05), k) for k, r in held.items()}
    alone = [cells["probe"].round("gpuTime", inputs, 0.05) for _ in range(rounds)]
    keys = list(cells)
    interleaved = []
    for index in range(rounds):
        order = round_order(keys, index)
        times = dict(zip(order, interleaved_round([cells[k] for k in order], "gpuTime", inputs, 0.05)))
        interleaved.append(times["probe"])
    after = [cells["probe"].round("gpuTime", inputs, 0.05) for _ in range(rounds)]
    print(
        json.dumps(
            {
                "alone": statistics.median(alone),
                "interleaved": statistics.median(interleaved),
                "alone_after": statistics.median(after),
                "alone_rounds": alone,
                "interleaved_rounds": interleaved,
                "alone_after_rounds": after,
            }
        )
    )
    for runner in [*held.values(), primer]:
        runner.close()
    return 0


def table(result: dict) -> str:
    rows = [
        "| probe route | engines held | alone ms | interleaved ms | alone again ms | × one held, alone |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for run in result["runs"]:
        if "error" in run:
            rows.append(f"| {run['probe']} | {run['holds']} | error | | | |")
            continue
        ratio = run.get("to_one_alone", {})
        rows.append(
            f"| {run['probe']} | {run['holds']} | {run['alone']:.4f} | {run['interleaved']:.4f} | "
            f"{run['alone_after']:.4f} | {' / '.join(f'{ratio[k]:.2f}' for k in ('alone', 'interleaved', 'alone_after')) if ratio else ''} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
