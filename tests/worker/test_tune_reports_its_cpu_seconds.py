"""`enginewright tune` says what a run cost: its CPU seconds (the run and every build and serving
process it started) beside its wall seconds, in summary.json, report.md and its last lines."""

import json
import re
import resource

from tests.worker.conftest import run_tune


def test_summary_report_and_printout_carry_the_runs_cpu_seconds(example, tmp_path):
    out = tmp_path / "fast"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_tune(example, out, "--search", "fast", "--knob", "enable_mem_pattern=0")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    cpu = summary["cpu_seconds"]
    # The whole tune process tree as the kernel counted it (tune has reaped its children by the time
    # it exits): the summary's share of it excludes only the interpreter's start and the last lines.
    tree = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert 0 < cpu <= tree + 0.05
    # Each route is built in a child interpreter and timed in a serving one (an interpreter's start
    # and imports alone cost ~0.4 CPU-seconds here): the children are counted, not only tune's own
    # waiting process.
    interpreters = len(list((out / "store/runs/local/entries").glob("*.json"))) + 1
    assert cpu >= 0.3 * interpreters, (cpu, interpreters)
    assert f"- **cpu seconds**: {cpu}" in (out / "report.md").read_text()
    line = re.search(r"^spent \(fast\): ([\d.]+) s wall, ([\d.]+) CPU-seconds", result.stdout, re.M)
    assert line, result.stdout
    assert float(line.group(1)) == round(summary["wall_seconds"], 1)
    assert float(line.group(2)) == round(cpu, 1)
