"""A build process that died between builds (the OOM killer, a stray kill) is not blamed on the next
route: that route is built in a fresh build process, and ends ok."""

import os
import signal

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker.measure import build
from enginewright.worker.process import Builders
from tests.cluster.harness import wait_for
from tests.worker.conftest import make_worker
from tests.worker.test_route_failures_are_contained import processes_mentioning


def test_the_route_after_the_build_process_died_builds_ok(example, tmp_path):
    ctx = make_worker(example, tmp_path).ctx
    with Builders(tmp_path / "work" / "builds", 1) as builders:
        assert build(ctx, Route.of({"enable_mem_pattern": "0"}), "stage1", "b0", builders).entry.outcome is Outcome.ok
        idle = builders.all[0].proc
        os.kill(idle.pid, signal.SIGKILL)
        wait_for(lambda: idle.poll() is not None, 10, "the build process to die")
        after = build(ctx, Route.of({"enable_cpu_mem_arena": "0"}), "stage1", "b0", builders)
        assert after.entry.outcome is Outcome.ok, after.entry.error
        assert builders.started == 2
    assert processes_mentioning(str(tmp_path / "work")) == []
