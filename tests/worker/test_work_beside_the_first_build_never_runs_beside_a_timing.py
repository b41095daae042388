"""`tune` imports its report's plotting library while the first routes build (1.6 s at the end of
an MLP's run on an H100, session 30): the work given as `beside_first_build` starts with the first
group's builds and is waited for before the first load is timed, so it never runs beside a timing;
one that fails leaves the batch as it was."""

import json
import time

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker.batch import Worker
from tests.worker.conftest import recording_worker


def test_the_work_runs_while_the_first_group_builds_and_ends_before_any_timing(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    ran: dict[str, float] = {}

    def work() -> None:  # outlasts the default's quick build: the batch must wait for it
        ran["start"] = time.monotonic()
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            sum(range(10_000))
        ran["end"] = time.monotonic()

    worker = Worker(worker.ctx, beside_first_build=work)
    default, route = Route.of({}), Route.of({"enable_mem_pattern": "0"})
    written = worker.run_batch([default, route], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {default.id: Outcome.ok, route.id: Outcome.ok}
    records = [json.loads(line) for line in intervals.read_text().splitlines()]
    first_build = min(r["start"] for r in records if r["kind"] == "build")
    timed = [r for r in records if r["kind"] == "timed"]
    assert timed and ran["start"] <= first_build + 1.0  # it began with the builds, not after them
    assert ran["end"] <= min(r["start"] for r in timed)  # and ended before the first timing
    assert worker._beside_first_build is None  # once a run: a later batch does not run it again


def test_work_that_fails_leaves_the_batch_as_it_was(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)

    def work() -> None:
        raise ImportError("no plotting here")

    worker = Worker(worker.ctx, beside_first_build=work)
    default, route = Route.of({}), Route.of({"enable_mem_pattern": "0"})
    written = worker.run_batch([default, route], "stage1", "b0", default)
    assert [e.outcome for e in written] == [Outcome.ok, Outcome.ok]
