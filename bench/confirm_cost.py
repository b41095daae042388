"""What the confirmation's early stop saves (issue 19, ask 7), side by side in one run, on CPU:
the same kept engines confirmed again and again by the product's worker, in turns, once with the
early stop (`search.winner.settled`, as `tune` and the Jobs confirm) and once with every round
(`rounds` rounds, as before 2026-12-04), recording each confirmation's seconds, rounds and decision.

    python bench/confirm_cost.py --out out/confirm-cost [--size 64 --width 0.25 --neck 16] [--pairs 8]

Steps, each written to OUT/confirm_cost.json as soon as it is known:
  1. the model of `bench/measure_cost.py` (a DB text detector, 1x3xSIZExSIZE) and two reference pairs;
  2. `enginewright tune --no-confirm --save-all-engines` over the knobs of `--knob` (default: two
     knobs that change nothing on this model, the common case of a confirmation: candidates that are
     noise), into OUT/tune: the kept engines the confirmations time;
  3. `--pairs` pairs of confirmations of the default and every other accuracy-passing route, `--loads`
     loads of each and at most `--rounds` rounds, in one process each (the worker's `confirm`), the
     pair's order alternating (stop first, then all rounds; then the other way round);
  4. per pair: seconds with the stop / seconds with all rounds, and whether the two decided alike.
     The summary (medians, the pairs' ratios, agreements, winners named, and with candidates that
     change nothing, the intervals' calibration: `calibration`) is computed from those records.

The whole benchmark is pinned to `--cores` CPUs (default 2), as `measure_cost.py` is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "operator"), str(REPO / "bench")]

from measure_cost import METRIC, THRESHOLD, cpu_model, make_model, now, pin  # noqa: E402

# Knobs that change nothing on this model (no QDQ nodes; denormals do not occur): candidates that are
# noise, as most confirmation candidates are. (allow_spinning=0 is not: with the host busy it read
# 0.76-1.17x the default from one confirmation to the next.)
NOISE_KNOBS = ("session.disable_quant_qdq=1", "session.set_denormal_as_zero=1")


def calibration(pairs: list[dict]) -> dict:
    """The confirmations' intervals against the truth when every candidate is the default's twin (knobs
    that change nothing): each candidate's two-sided 95% interval across loads and rounds (as
    `search.winner.confirm` computes it) should hold 1 in about 95% of confirmations; a candidate's
    load position (loads go default first in every group, then the candidates in order) should not
    move its mean ratio. From the records that kept their rounds (`times`)."""
    from enginewright.measure.paired import by_engine
    from enginewright.search.winner import against_default

    held, below, above, by_position = 0, 0, 0, {}
    for pair in pairs:
        for record in (pair.get("stop"), pair.get("all")):
            if not record or not record.get("times"):
                continue
            compared = against_default(by_engine(record["times"]), record["default_id"])
            for position, c in enumerate(compared.values(), start=1):
                held += c.low <= 1.0 <= c.high
                below += c.high < 1.0
                above += c.low > 1.0
                by_position.setdefault(position, []).append(c.ratio)
    intervals = held + below + above
    return {
        "intervals": intervals,
        "holding_1": held,
        "wholly_below_1": below,
        "wholly_above_1": above,
        "mean_ratio_by_load_position": {str(p): statistics.fmean(r) for p, r in sorted(by_position.items())},
    }


def summarise(pairs: list[dict]) -> dict:
    """Medians and ratios of the confirmation pairs, from their records."""
    done = [p for p in pairs if "stop" in p and "all" in p]
    if not done:
        return {"pairs": 0}
    ratios = [p["stop"]["seconds"] / p["all"]["seconds"] for p in done]
    return {
        "pairs": len(done),
        "seconds_with_stop_median": statistics.median(p["stop"]["seconds"] for p in done),
        "seconds_all_rounds_median": statistics.median(p["all"]["seconds"] for p in done),
        "ratio_median": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "stopped_early": sum(p["stop"]["rounds"] < p["all"]["rounds"] for p in done),
        "rounds_with_stop": [p["stop"]["rounds"] for p in done],
        "decisions_alike": sum(p["stop"]["winner"] == p["all"]["winner"] for p in done),
        "named": sum(bool(p[arm]["winner"]) for p in done for arm in ("stop", "all")),
        "calibration": calibration(done),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "out" / "confirm-cost")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--neck", type=int, default=16)
    parser.add_argument("--knob", action="append", help="tune --knob (default: two noise knobs)")
    parser.add_argument("--pairs", type=int, default=8, help="pairs of confirmations (stop, all rounds)")
    parser.add_argument("--rounds", type=int, help="confirmation rounds, at most (default: the product's)")
    parser.add_argument("--loads", type=int, help="confirmation loads (default: the product's)")
    args = parser.parse_args(argv)

    from enginewright.api.models import Confirm, Search, Timing
    from enginewright.search.winner import confirm
    from enginewright.store import LocalStore
    from enginewright.worker.batch import Worker
    from enginewright.worker.context import Accuracy, WorkerContext

    args.out.mkdir(parents=True, exist_ok=True)
    results: dict = {"started": now(), "cpu": cpu_model(), "pinned": pin(args.cores) if args.cores else None}
    path = args.out / "confirm_cost.json"

    def save() -> None:
        path.write_text(json.dumps(results, indent=1))

    model = make_model(args.out / "model", args.size, args.width, args.neck, 2)
    results["model"] = model
    save()
    knobs = args.knob or list(NOISE_KNOBS)
    tune_out = args.out / "tune"
    cmd = [sys.executable, "-m", "enginewright", "tune", model["path"], "--backend", "onnxruntime"]
    cmd += ["--search", "fast", "--metric", METRIC, "--threshold", str(THRESHOLD), "--out", str(tune_out)]
    cmd += ["--no-confirm", "--save-all-engines"]
    for inputs, references in zip(model["inputs"], model["references"]):
        cmd += ["--inputs", inputs, "--references", references]
    for knob in knobs:
        cmd += ["--knob", knob]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), os.environ.get("PYTHONPATH", "")])}
    began = time.monotonic()
    tuned = subprocess.run(cmd, env=env, capture_output=True, text=True)
    results["tune"] = {"command": cmd, "exit_code": tuned.returncode, "seconds": round(time.monotonic() - began, 2)}
    save()
    if tuned.returncode:
        print(tuned.stdout[-3000:], tuned.stderr[-3000:])
        return 1

    ctx = WorkerContext(
        backend="onnxruntime",
        model=Path(model["path"]),
        store=LocalStore(tune_out / "store"),
        prefix="runs/local",
        target="local",
        workdir=args.out / "work",
        route_timeout=600,
        accuracy=Accuracy(
            [Path(p) for p in model["inputs"]], [Path(p) for p in model["references"]], METRIC, THRESHOLD
        ),
        engine_suffix=".ort.tar",
    )
    worker = Worker(ctx)
    entries = worker.existing()
    default = next(e for e in entries.values() if e.route == "")
    candidates = [e for e in entries.values() if e.route and e.passed and e.engine_uri]
    rounds = args.rounds or Confirm().rounds
    loads = args.loads or Confirm().loads
    margin = Search().noise_margin
    results |= {
        "default_ms": default.median_ms,  # the default's time a call in the tune run (its stage 1)
        "timing": Timing().model_dump(by_alias=True, mode="json"),
        "confirm": {"rounds": rounds, "loads": loads, "margin": margin},
        "candidates": [e.route for e in candidates],
        "pairs": [],
    }
    save()
    if not candidates:
        print("no candidate with a kept engine: nothing to confirm")
        return 1

    def one(stop: bool) -> dict:
        began = time.monotonic()
        times = worker.confirm(candidates, default, rounds, loads, early_stop=stop)
        seconds = time.monotonic() - began
        decision = confirm(times, default.route_id, margin)
        return {
            "seconds": round(seconds, 3),
            "rounds": len(next(iter(times.values()))),
            "winner": entries[decision.winner_id].route,
            "ratios": {entries[k].route: v for k, v in decision.ratios.items()},
            "times": times,  # per load, per round: to look into a decision afterwards
            "default_id": default.route_id,
        }

    for index in range(args.pairs):
        pair: dict = {"index": index}
        results["pairs"].append(pair)
        for stop in (True, False) if index % 2 == 0 else (False, True):
            pair["stop" if stop else "all"] = one(stop)
            results["summary"] = summarise(results["pairs"])
            save()
        print(json.dumps(pair), flush=True)
    results["finished"] = now()
    save()
    print(json.dumps(results["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
