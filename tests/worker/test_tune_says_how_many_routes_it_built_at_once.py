"""`tune` says how many routes it built at once (`--build-parallelism`, or the host's width with
`auto`): in summary.json, report.md and its spent line, whose build seconds are each build's own,
summed, so that with several at a time they pass the wall time the builds took. Builds side by side
may time their own kernels beside each other (Inductor's autotuning, TensorRT's tactics): a reader
of the results can see whether they did."""

import json
import re

from enginewright.report import spent
from enginewright.worker.capacity import auto_build_parallelism
from tests.worker.conftest import run_tune


def test_the_width_used_is_in_the_summary_the_report_and_the_spent_line(example, tmp_path):
    out = tmp_path / "two"
    result = run_tune(example, out, "--search", "fast", "--knob", "enable_mem_pattern=0", "--build-parallelism", "2")
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["builds_at_once"] == 2
    assert "- **builds at once**: 2" in (out / "report.md").read_text()
    assert re.search(r"^spent \(fast\): .*build [\d.]+ s \(summed over 2 built at a time\)", result.stdout, re.M)

    auto = tmp_path / "auto"
    result = run_tune(
        example, auto, "--search", "fast", "--knob", "enable_mem_pattern=0", "--build-parallelism", "auto"
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((auto / "summary.json").read_text())
    assert summary["builds_at_once"] == auto_build_parallelism() and summary["options"]["build_parallelism"] is None


def test_one_at_a_time_adds_nothing_to_the_spent_line():
    line = spent({"wall_seconds": 10.0, "build_seconds": 4.0, "measure_seconds": 3.0, "builds_at_once": 1})
    assert line == "spent (tune): 10.0 s wall, routes: build 4.0 s, measure 3.0 s"
