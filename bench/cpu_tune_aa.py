"""A/A of the whole `tune` pipeline on CPU: the example model tuned N times (fresh --out each) with
knobs that cannot change what runs, so every named winner is a false one. Prints each run's decision
and, over every confirmation, how far the candidate's time sat from the default's (log ratio of the
geometric means over all loads and rounds): its spread across runs is what the confirmation's
interval has to cover.

    PYTHONPATH=operator:bench:. python bench/cpu_tune_aa.py --runs 60 --json docs/benchmarks/raw/cpu-aa/s37.json

The default knobs: one intra-op thread as a base setting (no thread pool), and the spinning of the
intra-op and inter-op pools that therefore do not exist (sequential execution). `--knob` replaces them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NULL = ["--setting", "intra_op_num_threads=1"]
# tests/worker/conftest.py's FAST_TIMING less its --confirm-loads: the shortcut the worker tests time with
FAST = ["--warmup", "2", "--round-seconds", "0.01", "--min-rounds", "2", "--max-rounds", "3"]
NULL_KNOBS = ["session.intra_op.allow_spinning=0", "session.inter_op.allow_spinning=0"]


def log_ratios(out: Path) -> list[dict]:
    """Each confirmed candidate's log(time / the default's), geometric means over its loads and rounds."""
    confirm = out / "confirm.json"
    if not confirm.exists():
        return []
    rounds = json.loads(confirm.read_text())["rounds"]
    default = json.loads((out / "summary.json").read_text())["default_id"]

    def load_means(engine: str) -> list[float]:
        """Each load's mean log time (every load of a confirmation is timed in every round)."""
        return [
            statistics.fmean(math.log(v) for v in values)
            for key, values in rounds.items()
            if key.split("@")[0] == engine
        ]

    def compared(engine: str) -> dict:
        """The log ratio, and its standard error from the two engines' spread across loads alone."""
        a, b = load_means(engine), load_means(default)
        se = (
            math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
            if min(len(a), len(b)) > 1
            else None
        )
        return {"route": engine, "log_ratio": statistics.fmean(a) - statistics.fmean(b), "load_se": se}

    engines = sorted({key.split("@")[0] for key in rounds} - {default})
    return [compared(e) for e in engines]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--knob", action="append", help="NAME=V (default: the two spinning knobs, one thread)")
    p.add_argument("--confirm-loads", default="5", help="the product's default")
    p.add_argument("--fast", action="store_true", help="the worker tests' shortcut timing (10 ms rounds, 2-3 rounds)")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "examples"))
    from make_example import write_example

    knobs = args.knob or NULL_KNOBS
    extra = [*([] if args.knob else NULL), *(FAST if args.fast else []), "--search", "mixed"]
    extra += ["--confirm-loads", args.confirm_loads, "--metric", "cosine", "--threshold", "1e-4"]
    for knob in knobs:
        extra += ["--knob", knob]
    work = Path(tempfile.mkdtemp(prefix="cpu-tune-aa-"))
    write_example(work)
    runs, began = [], time.time()
    for i in range(args.runs):
        out = work / f"run-{i}"
        command = [sys.executable, "-m", "enginewright", "tune", str(work / "mlp.onnx"), "--backend", "onnxruntime"]
        for pair in ("0", "1"):
            command += [
                "--inputs",
                str(work / f"inputs-{pair}.npz"),
                "--references",
                str(work / f"references-{pair}.npz"),
            ]
        command += ["--out", str(out), *extra]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise SystemExit(f"tune failed:\n{result.stderr[-3000:]}")
        summary = json.loads((out / "summary.json").read_text())
        row = {
            "winner": summary["winner_id"] if summary["winner_id"] != summary["default_id"] else None,
            "speedup": summary.get("speedup"),
            "low": summary.get("speedup_low"),
            "high": summary.get("speedup_high"),
            "confirm_rounds": summary.get("confirm_rounds"),
            "candidates": log_ratios(out),
        }
        runs.append(row)
        shutil.rmtree(out)  # (a run keeps its engines and processes' files: ~150 MB)
        print(i, json.dumps(row), flush=True)
    shutil.rmtree(work)
    ratios = [c["log_ratio"] for r in runs for c in r["candidates"]]
    ses = [c["load_se"] for r in runs for c in r["candidates"] if c["load_se"] is not None]
    winners = [r for r in runs if r["winner"]]
    result = {
        "runs": len(runs),
        "false_winners": len(winners),
        "confirmations": sum(1 for r in runs if r["candidates"]),
        "candidates_confirmed": len(ratios),
        "log_ratio_mean": statistics.fmean(ratios) if ratios else None,
        "log_ratio_sd": statistics.stdev(ratios) if len(ratios) > 1 else None,
        "candidate_faster": sum(1 for x in ratios if x < 0),
        # what the loads' spread says the log ratio's standard error is, against its spread across runs
        "load_se_rms": math.sqrt(statistics.fmean(x * x for x in ses)) if ses else None,
        "knobs": knobs,
        "base": [] if args.knob else NULL,
        "confirm_loads": args.confirm_loads,
        "timing": "the worker tests' shortcut" if args.fast else "the product's defaults",
        "host": {
            "cpu": platform.processor() or platform.machine(),
            "cores": len(os.sched_getaffinity(0)),
        },
        "seconds": round(time.time() - began, 1),
        "command": " ".join(["python", "bench/cpu_tune_aa.py", *sys.argv[1:]]),
        "per_run": runs,
    }
    print(
        f"A/A of tune on CPU ({result['timing']}): {result['false_winners']} false winners in {result['runs']} runs "
        f"({result['confirmations']} confirmations, {result['candidates_confirmed']} candidates); "
        f"candidate/default across confirmations: mean log {result['log_ratio_mean']:+.4f}, "
        f"sd {result['log_ratio_sd']:.4f} (the loads' spread says {result['load_se_rms']:.4f}), "
        f"candidate faster in {result['candidate_faster']}"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
