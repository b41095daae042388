"""The same model tuned twice (fresh --out each time) names the same winner or keeps the default both
times, and nothing `tune` prints contradicts its headline: the two times printed above it make it,
and every table row's speedup is its two times. The knobs cannot change what runs (one intra-op
thread, as every worker test sets: no intra-op pool, and sequential execution: no inter-op pool, so
neither pool's spinning exists), so this is an A/A test of the whole pipeline on real ONNX Runtime
engines, timed as the product times (not the other worker tests' 10 ms rounds: with them, and
`enable_mem_pattern=0` beside a spinning knob, one run named a route in CI, 2026-12-07; on 2 cores
the shortcut named false winners in 1 of 50 tunes, and 5 of 95 in two loops before, the product's
timing in 0 of 30: `bench/cpu_tune_aa.py`, README "A/A of the whole tune on CPU")."""

import json
import re

from enginewright.api.models import Search, Timing, default_of
from tests.conftest import assert_stopped_where_settled
from tests.worker.conftest import run_tune

# the product's timing (after the worker tests' shortcut in `run_tune`, so these count)
PRODUCT_TIMING = [
    f"--{flag}={default_of(Timing, name)}"
    for flag, name in (
        ("warmup", "warmup_iterations"),
        ("round-seconds", "round_seconds"),
        ("min-rounds", "min_rounds"),
        ("max-rounds", "max_rounds"),
    )
]
KNOBS = [
    "--search",
    "mixed",
    "--knob",
    "session.intra_op.allow_spinning=0",
    "--knob",
    "session.inter_op.allow_spinning=0",
    "--confirm-loads",
    "5",
    *PRODUCT_TIMING,
]  # the product's defaults, not the other tests' shortcut


def check_printed_figures(stdout: str) -> None:
    lines = stdout.splitlines()
    headline = next(line for line in lines if "(headline)" in line)
    speedup = float(re.search(r"\(headline\) ([\d.]+)x", headline).group(1))
    above = lines[lines.index(headline) - 1]
    times = [float(x) for x in re.findall(r"([\d.]+) ms", above)]
    if "kept: no route beat it" in above:
        assert speedup == 1.0
    else:
        assert len(times) == 2 and abs(times[0] / times[1] - speedup) < 0.002, (above, headline)
    header = next(line for line in lines if line.split()[:4] == ["route", "stage", "outcome", "route"])
    for line in lines[lines.index(header) + 1 :]:
        if not line.strip():
            break
        cells = re.findall(r"(\d+\.\d+)", line)
        # route ms, default ms, speedup: the first three decimals of a non-default row
        if len(cells) >= 3 and "default" not in line.split()[0]:
            route_ms, default_ms, value = (float(c) for c in cells[:3])
            assert abs(default_ms / route_ms - value) < 0.002, line


def test_two_runs_of_one_model_agree_and_print_no_contradiction(example, tmp_path):
    winners = []
    for name in ("first", "second"):
        out = tmp_path / name
        result = run_tune(example, out, *KNOBS)
        assert result.returncode == 0, result.stderr
        check_printed_figures(result.stdout)
        summary = json.loads((out / "summary.json").read_text())
        winners.append(summary["winner_id"])
        if (out / "confirm.json").exists():  # at most 5 rounds: fewer only where the early stop says so
            rounds = json.loads((out / "confirm.json").read_text())["rounds"]
            timed = assert_stopped_where_settled(rounds, summary["default_id"], Search().noise_margin, 5)
            assert summary["confirm_rounds"] == timed
        if summary["winner_id"] != summary["default_id"]:
            assert summary["speedup_low"] <= summary["speedup"] <= summary["speedup_high"]
    assert winners[0] == winners[1], winners
