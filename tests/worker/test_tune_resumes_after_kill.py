"""Killing `enginewright tune` mid-run and rerunning it resumes without re-measuring finished routes."""

import os
import signal
import subprocess

from enginewright.api.cache import CacheEntry
from tests.cluster.harness import wait_for
from tests.worker.conftest import run_tune, tune_args

KNOBS = [
    "--search",
    "full",
    "--knob",
    "graph_optimization_level=basic,extended,all",
    "--knob",
    "enable_mem_pattern=0,1",
    "--knob",
    "session.disable_prepacking=0,1",
    "--no-confirm",
]


def finished(out):
    folder = out / "store/runs/local/entries"
    return {p.name: CacheEntry.from_json(p.read_text()) for p in folder.glob("*.json")} if folder.exists() else {}


def test_kill_then_resume(example, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        tune_args(example, out, *KNOBS), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    wait_for(lambda: len(finished(out)) >= 3, 300, "three routes to finish", 0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the tune process and the route in flight
    proc.wait()
    before = finished(out)
    assert 3 <= len(before) < 12, "killed too late to test resume"

    result = run_tune(example, out, *KNOBS)
    assert result.returncode == 0, result.stderr
    after = finished(out)
    assert len(after) == 12
    for name, entry in before.items():  # never re-measured: same entry, same timestamps
        assert after[name] == entry
    assert "already in the cache" in result.stdout


def test_resume_refuses_a_changed_run(example, tmp_path):
    out = tmp_path / "run"
    assert run_tune(example, out, "--knob", "enable_mem_pattern=0", "--no-confirm").returncode == 0
    changed = run_tune(example, out, "--knob", "enable_mem_pattern=0", "--no-confirm", "--threshold", "0.5")
    assert changed.returncode == 3
    assert "different threshold" in changed.stderr
