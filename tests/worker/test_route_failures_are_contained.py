"""A route that hangs past its timeout, or whose engine cannot be loaded, is recorded with its
outcome and message; its child process is gone afterwards."""

import os

from enginewright.api.cache import CacheEntry, Outcome
from enginewright.api.routes import Route
from enginewright.worker.measure import Built, build, load
from tests.worker.conftest import make_worker


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text` (zombies excluded)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().decode(errors="replace")
                state = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if text in cmdline and state != "Z":
                found.append(int(entry))
    return found


def test_a_build_over_its_timeout_is_recorded_as_timeout(example, tmp_path):
    ctx = make_worker(example, tmp_path, timeout=0.2).ctx
    built = build(ctx, Route.of({"enable_mem_pattern": "0"}), "stage1", "b0")
    assert built.engine_path is None
    assert built.entry.outcome is Outcome.timeout
    assert "build exceeded" in built.entry.error
    assert processes_mentioning(str(tmp_path / "work")) == []  # the child's whole group was killed


def test_an_engine_that_cannot_load_is_recorded_as_crash_with_the_reason(example, tmp_path):
    engine = tmp_path / "broken.ort.tar"
    engine.write_bytes(b"\x00" * 512)
    route = Route.of({"enable_mem_pattern": "0"})
    entry = CacheEntry(target="cpu", route_id=route.id, route=route.canonical, outcome=Outcome.ok)
    measured, server = load(make_worker(example, tmp_path, timeout=60).ctx, Built(route, entry, engine), "route")
    assert server is None and measured.outcome is Outcome.crash
    assert "not an onnxruntime engine" in measured.error
    assert measured.timing is None


def test_a_route_cut_short_by_the_runs_deadline_is_not_cached_and_a_later_run_measures_it(example, tmp_path):
    import time

    worker = make_worker(example, tmp_path, timeout=120)
    default, other = Route.of({}), Route.of({"enable_mem_pattern": "0"})
    worker.ctx.deadline = time.time() + 0.2  # a child process cannot even import onnxruntime in that time
    assert worker.run_batch([default, other], "stage1", "b0", default) == []
    assert worker.existing() == {}  # no "timeout" entry that would stop a resumed run from measuring it
    worker.ctx.deadline = None
    written = worker.run_batch([default, other], "stage1", "b0", default)
    assert {e.route_id: e.outcome for e in written} == {default.id: Outcome.ok, other.id: Outcome.ok}
