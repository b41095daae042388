"""Routes built several at a time (`tune --build-parallelism`): a build that crashed, or failed
naming memory, beside other builds (out of the host's or the GPU's memory) is built once more on its
own before its route is recorded as failed. One that fails so alone too is recorded failed; one that
failed otherwise (a compiler refusing an option) is not built again."""

import json

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import BUILDING, CRASH_BUILD, FAILS_BESIDE, SLOW_BUILD


def test_a_route_that_fails_only_beside_others_is_built_alone_and_measured(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    (tmp_path / "building").mkdir()
    monkeypatch.setenv(BUILDING, str(tmp_path / "building"))
    worker.ctx.build_parallelism = 3
    said: list[str] = []
    worker.ctx.progress = said.append
    default = Route.of({})
    slow = Route.of({"enable_cpu_mem_arena": "0", SLOW_BUILD: "3"})  # still building when the other looks
    crowded = Route.of({"enable_mem_pattern": "0", FAILS_BESIDE: "3"})  # fails while the group's 3 build
    written = worker.run_batch([default, slow, crowded], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {r.id: Outcome.ok for r in (default, slow, crowded)}
    assert any("beside 2 other builds: built again on its own" in line for line in said)
    builds = [json.loads(line) for line in intervals.read_text().splitlines()]
    builds = [b for b in builds if b["kind"] == "build"]
    alone = [b for b in builds if b["route"].get("enable_mem_pattern") == "0"]
    assert len(alone) == 1  # (the failed attempt recorded nothing)
    others = [b for b in builds if b is not alone[0]]
    assert all(o["end"] <= alone[0]["start"] for o in others)  # built after the others had ended


def test_a_route_that_crashes_alone_too_is_recorded_failed(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    worker.ctx.build_parallelism = 2
    said: list[str] = []
    worker.ctx.progress = said.append
    default, crashing = Route.of({}), Route.of({"enable_mem_pattern": "0", CRASH_BUILD: "1"})
    written = worker.run_batch([default, crashing], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {default.id: Outcome.ok, crashing.id: Outcome.crash}
    assert sum("built again on its own" in line for line in said) == 1  # tried once more alone, then recorded


def test_a_build_refused_for_another_reason_is_not_built_again(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    worker.ctx.build_parallelism = 2
    said: list[str] = []
    worker.ctx.progress = said.append
    default, refused = Route.of({}), Route.of({"graph_optimization_level": "no-such-level"})
    written = worker.run_batch([default, refused], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {default.id: Outcome.ok, refused.id: Outcome.build_failed}
    assert not any("built again on its own" in line for line in said)
