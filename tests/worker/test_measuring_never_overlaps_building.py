"""With several routes built at a time, a group is fully built before any of its routes is measured:
no engine loads or is timed while a build runs (the default's serving process is held through the
batch, idle while later groups build)."""

import json

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import SLOW_BUILD


def test_no_measurement_runs_while_a_route_of_its_group_is_still_building(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    worker.ctx.build_parallelism = 2
    default = Route.of({})
    # The slow build shares a group with the default, whose build ends seconds earlier: measuring the
    # default as soon as it is built would overlap it.
    slow = Route.of({"enable_mem_pattern": "0", SLOW_BUILD: "4"})
    quick = Route.of({"enable_cpu_mem_arena": "0"})
    written = worker.run_batch([default, slow, quick], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {r.id: Outcome.ok for r in (default, slow, quick)}

    records = [json.loads(line) for line in intervals.read_text().splitlines()]
    builds = [r for r in records if r["kind"] == "build"]
    measuring = [r for r in records if r["kind"] in ("load", "timed")]
    # each engine loaded once to check it (never timed) and `loads` times for timing
    assert len(builds) == 3 and sum(r["kind"] == "load" for r in measuring) == 3 * (1 + worker.ctx.timing.loads)
    assert max(b["end"] - b["start"] for b in builds) >= 4  # the slow build did last
    overlaps = [
        (m["kind"], b["route"]) for m in measuring for b in builds if m["start"] < b["end"] and b["start"] < m["end"]
    ]
    assert overlaps == []
