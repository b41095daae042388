"""A build the build process forked but the worker had not yet taken the `pid` of when the route's
deadline passed (or the Builder was closed) is killed with its group too, not left running."""

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker import process
from enginewright.worker.measure import build
from tests.cluster.harness import wait_for
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import SLOW_BUILD
from tests.worker.test_route_failures_are_contained import processes_mentioning


def test_a_build_whose_pid_was_not_read_by_the_deadline_is_killed(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    real_expect = process.Builder._expect
    route = Route.of({"enable_mem_pattern": "0", SLOW_BUILD: "60"})
    build_log = tmp_path / "work" / "routes" / route.id / "build.log"

    def deadline_passes_before_the_pid(self, key, deadline):
        if key == "pid":  # the build is running, its pid not yet read: the deadline passes now
            wait_for(build_log.exists, 60, "the build to start")
            raise process.BuildEnded("the deadline passed", timed_out=True)
        return real_expect(self, key, deadline)

    monkeypatch.setattr(process.Builder, "_expect", deadline_passes_before_the_pid)
    with process.Builders(tmp_path / "work" / "builds", 1) as builders:
        built = build(worker.ctx, route, "stage1", "b0", builders)
        assert built.entry.outcome is Outcome.timeout
        wait_for(lambda: processes_mentioning(str(tmp_path / "work")) == [], 10, "no build process or build left")
