"""A batch starts one build process, not an interpreter per route: every route is built in a process
of its own (a crash, hang or out-of-memory is the route's, and its memory goes when it exits), forked
from that one build process, which outlives a build that crashed or hung."""

import json
import os
import signal

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker.measure import build
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import CRASH_BUILD, SLOW_BUILD
from tests.worker.test_route_failures_are_contained import processes_mentioning


def test_every_route_of_a_batch_is_forked_from_one_build_process(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    default, crashing = Route.of({}), Route.of({"enable_mem_pattern": "0", CRASH_BUILD: "1"})
    others = [Route.of({"enable_cpu_mem_arena": "0"}), Route.of({"execution_mode": "parallel"})]
    written = worker.run_batch([default, others[0], crashing, others[1]], "stage1", "b0", default)
    outcomes = {e.route_id: e.outcome for e in written}
    assert outcomes == {
        default.id: Outcome.ok,
        others[0].id: Outcome.ok,
        crashing.id: Outcome.crash,
        others[1].id: Outcome.ok,
    }
    assert "killed by SIGSEGV" in next(e.error for e in written if e.route_id == crashing.id)

    builds = [r for r in map(json.loads, intervals.read_text().splitlines()) if r["kind"] == "build"]
    assert len(builds) == 3  # (the crashed one recorded nothing)
    assert len({b["pid"] for b in builds}) == 3  # each build in a process of its own...
    parents = {b["parent"] for b in builds}
    assert len(parents) == 1 and parents != {os.getpid()}  # ...forked from one build process, the crash's too
    assert not any(os.path.exists(f"/proc/{b['pid']}") for b in builds)  # each gone, its memory with it
    assert processes_mentioning(str(tmp_path / "work")) == []  # the build process ended with the batch


def test_a_build_past_its_timeout_is_killed_and_the_build_process_goes_on(example, tmp_path, monkeypatch):
    from enginewright.worker.process import Builders

    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    ctx = worker.ctx
    with Builders(tmp_path / "work" / "builds", 1) as builders:
        ctx.route_timeout = 3
        hung = build(ctx, Route.of({"enable_mem_pattern": "0", SLOW_BUILD: "60"}), "stage1", "b0", builders)
        assert hung.entry.outcome is Outcome.timeout and "build exceeded 3s" in hung.entry.error
        ctx.route_timeout = 120
        quick = build(ctx, Route.of({"enable_cpu_mem_arena": "0"}), "stage1", "b0", builders)
        assert quick.entry.outcome is Outcome.ok and quick.engine_path is not None
        assert builders.started == 1
    builds = [r for r in map(json.loads, intervals.read_text().splitlines()) if r["kind"] == "build"]
    assert [b["route"] for b in builds] == [{"enable_cpu_mem_arena": "0"}]  # the hung one never finished
    assert processes_mentioning(str(tmp_path / "work")) == []


DRIVER = """
import signal, sys
from pathlib import Path
from enginewright.api.routes import Route
from enginewright.worker.measure import build
from tests.worker.conftest import make_worker

signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # as the worker's Job entrypoint does
worker = make_worker(Path(sys.argv[1]), Path(sys.argv[2]))
worker.ctx.backend = "tests.worker.interval_backend:IntervalRecordingBackend"
build(worker.ctx, Route.of({"enable_mem_pattern": "0", "slow_build_seconds": "60"}), "stage1", "b0")
"""


def test_a_worker_ended_by_sigterm_mid_build_leaves_no_build_behind(example, tmp_path, monkeypatch):
    import subprocess
    import sys

    from tests.cluster.harness import wait_for

    recording_worker(example, tmp_path, monkeypatch)  # (the environment its children need)
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(example), str(tmp_path)])
    try:
        wait_for(lambda: list((tmp_path / "work" / "routes").glob("*/build.log")), 60, "the build to start")
        assert len(processes_mentioning(str(tmp_path / "work"))) == 2  # the build process and its build
        driver.send_signal(signal.SIGTERM)
        assert driver.wait(timeout=30) == 143
        wait_for(lambda: processes_mentioning(str(tmp_path / "work")) == [], 10, "no build process or build left")
    finally:
        driver.kill()
        driver.wait()
        for pid in processes_mentioning(str(tmp_path / "work")):  # what a failed run of this test left
            os.kill(pid, signal.SIGKILL)
