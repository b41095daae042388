"""The same model tuned twice (fresh --out each time) names the same winner or keeps the default both
times, and nothing `tune` prints contradicts its headline: the two times printed above it make it,
and every table row's speedup is its two times. The knobs are ones that do not speed the example
model up beyond the noise margin on one thread (memory planning, spinning of threads that do not
exist), so this is an A/A test of the whole pipeline on real ONNX Runtime engines."""

import json
import re

from enginewright.api.models import Search
from tests.conftest import assert_stopped_where_settled
from tests.worker.conftest import run_tune

KNOBS = [
    "--search",
    "mixed",
    "--knob",
    "enable_mem_pattern=0",
    "--knob",
    "session.intra_op.allow_spinning=0",
    "--confirm-loads",
    "5",
]  # the product's default, not the other tests' shortcut


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
