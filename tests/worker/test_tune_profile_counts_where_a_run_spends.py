"""`bench/tune_profile.py` runs one real `enginewright tune` and counts where its wall time went:
the serving processes' requests by kind, their starts, the quiet waits, the data check and the
report's figure, written to its JSON whether or not tune succeeds."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.worker.conftest import tune_args

REPO = Path(__file__).resolve().parents[2]
FIRST_LOAD = "server.load_first (process launched ahead: the rest of its start + first load)"


def profile(args: list[str], tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "tune_profile.py"),
            "--json",
            str(tmp_path / "profile.json"),
            "--",
            *args,
        ],
        env={**os.environ, "PYTHONPATH": str(REPO / "operator")},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done, json.loads((tmp_path / "profile.json").read_text())


def arguments(example: Path, tmp_path: Path) -> list[str]:
    """tune's arguments (after `enginewright tune`) for the example: one knob, no confirmation."""
    return tune_args(example, tmp_path / "out", "--knob", "enable_mem_pattern=0", "--no-confirm")[4:]


def test_a_run_is_counted_by_request_and_its_seconds_fit_its_wall_time(example, tmp_path):
    done, found = profile(arguments(example, tmp_path), tmp_path)
    assert done.returncode == 0 and found["exit_code"] == 0, done.stderr
    spent = found["spent"]
    # one serving process for the batch, launched as it started: the default's rounds, then the route's beside it
    assert "server.start (process + first load)" not in spent
    assert spent[FIRST_LOAD]["calls"] == 1
    assert spent["request load"]["calls"] >= 3  # the route's primer and timed loads, the default's second load
    assert spent["request interleave"]["calls"] >= 2  # the route's rounds (--min-rounds)
    assert spent["request measurements"]["calls"] == 2  # the default and the route
    assert spent["wait_quiet (before timing requests)"]["calls"] >= spent["request interleave"]["calls"]
    assert spent["tune: reference data check"]["calls"] == spent["report: figure (report.png)"]["calls"] == 1
    requests = sum(spent[k]["seconds"] for k in spent if k.startswith("request "))  # (none nests in another)
    assert 0 < requests < found["wall_seconds"]
    assert spent[FIRST_LOAD]["seconds"] > 0
    builds = spent["worker: a build (asked to built; the first waits for the build process)"]
    assert builds["calls"] == 2  # the default and the route
    built = spent["worker: the first build done (first at)"]["first_began_at"]
    assert builds["first_began_at"] < built <= spent[FIRST_LOAD]["first_began_at"]  # (the default's, then its load)
    # the batch's serving process, launched ahead, said how long its imports took: done by its first load
    imports = spent["imports of the process launched ahead in serve/ahead-default (first at: done by)"]
    assert imports["calls"] == 1 and 0 < imports["seconds"] <= imports["first_began_at"]
    assert imports["first_began_at"] <= spent[FIRST_LOAD]["first_began_at"] + spent[FIRST_LOAD]["seconds"]
    assert "request interleave" in done.stderr  # printed too


def test_a_failed_run_still_writes_what_it_counted(example, tmp_path):
    wrong = tmp_path / "wrong-inputs.npz"
    np.savez(wrong, image=np.zeros((8, 3, 32, 32), dtype=np.float64))  # the model takes float32
    args = [str(wrong) if a.endswith("inputs-1.npz") else a for a in arguments(example, tmp_path)]
    done, found = profile(args, tmp_path)
    assert done.returncode == found["exit_code"] == 3, done.stderr  # tune's exit code for data that does not fit
    assert found["spent"]["tune: reference data check"]["calls"] == 1
    assert "request interleave" not in found["spent"]


COUNT_WAITS = """
import subprocess, sys
import tune_profile
from enginewright.worker import server
tune_profile.wrap()  # (in a process of its own: it wraps functions for the process's life)
spinner = subprocess.Popen([sys.executable, "-c", "print(1, flush=True)\\nwhile True: pass"], stdout=subprocess.PIPE)
idle = subprocess.Popen([sys.executable, "-c", "import sys; print(1, flush=True); sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
spinner.stdout.readline(), idle.stdout.readline()
print(server.wait_quiet(spinner.pid, limit=0.2), server.wait_quiet(idle.pid, limit=5))
print(tune_profile.calls["wait_quiet: gave up at its limit"], tune_profile.calls["wait_quiet (before timing requests)"])
spinner.kill(), idle.kill()
"""


def test_a_quiet_wait_that_reaches_its_limit_is_counted_as_given_up():
    """The profile counts the quiet waits that gave up (the request was then timed beside a busy
    thread): a spinning process never goes quiet, an idle one does at once."""
    done = subprocess.run(
        [sys.executable, "-c", COUNT_WAITS],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO / "bench")])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True", "1", "2"], done.stdout
