"""The default route's serving process is launched when the batch starts, so that its interpreter
start and the backend's imports run while the batch's first group builds (on the H100's host that
start took 15 s a batch, after the builds: issue 19); it loads the default's engine once that is
built. Nothing is loaded or timed while a build runs, and the batch's entries are as before."""

import json

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import SLOW_BUILD


def test_the_default_serving_process_imports_while_the_default_builds(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    default = Route.of({SLOW_BUILD: "3"})  # a compiler that takes a while: time enough to import beside it
    route = Route.of({"enable_mem_pattern": "0"})
    written = worker.run_batch([default, route], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {default.id: Outcome.ok, route.id: Outcome.ok}
    assert written[0].timing is not None and written[1].paired is not None  # timed as before

    records = [json.loads(line) for line in intervals.read_text().splitlines()]
    builds = [r for r in records if r["kind"] == "build"]
    default_build = next(b for b in builds if b["route"] == {})  # (the build's own knobs are left out)
    measuring = [r for r in records if r["kind"] in ("load", "timed")]
    serving = measuring[0]["pid"]  # the process the default's first load went into
    assert measuring[0]["kind"] == "load" and measuring[0]["route"] == {}
    imported = [r for r in records if r["kind"] == "import" and r["pid"] == serving]
    assert len(imported) == 1
    assert imported[0]["end"] < default_build["end"], "the serving process started only after the build"
    # the process launched ahead held the default for the whole batch: the route was timed beside it
    assert {r["pid"] for r in measuring} == {serving}
    overlaps = [
        (m["kind"], b["route"]) for m in measuring for b in builds if m["start"] < b["end"] and b["start"] < m["end"]
    ]
    assert overlaps == []
