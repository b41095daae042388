"""The confirmation's fresh serving process is launched ahead (issue 19, ask 7: on the H100's host a
serving process's start took 7-15 s, after the batches): by `tune`'s worker (`Worker(ahead=True)`) as
each batch starts, so that it imports while the batch builds; by any other worker (a confirmation
Job) before the engines are fetched from the store. It loads nothing before the confirmation, it has
done its imports before the batch times anything, one that died meanwhile is replaced, and one left
unused is ended with the worker."""

import json
import os
import signal
import time
from pathlib import Path

from enginewright.api.routes import Route
from enginewright.worker import batch as batch_module
from enginewright.worker.server import Server
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import SLOW_BUILD

DEFAULT = Route.of({SLOW_BUILD: "2"})  # a compiler that takes a while: time enough to import beside it
ROUTE = Route.of({"enable_mem_pattern": "0"})


def batch_then(worker):
    worker.ctx.save_all_engines = True  # (the route's engine kept whatever its speed: it is confirmed)
    written = {e.route_id: e for e in worker.run_batch([DEFAULT, ROUTE], "stage1", "b0", DEFAULT)}
    assert set(written) == {DEFAULT.id, ROUTE.id}
    return written


def records(intervals: Path) -> list[dict]:
    return [json.loads(line) for line in intervals.read_text().splitlines()]


def test_the_process_launched_as_the_batch_starts_is_the_confirmations(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    worker.ahead = True
    written = batch_then(worker)
    batch_ended = time.monotonic()
    rounds = worker.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    assert {key: len(times) for key, times in rounds.items()} == {DEFAULT.id: 2, ROUTE.id: 2}

    seen = records(intervals)
    confirming = {r["pid"] for r in seen if r["kind"] == "load" and r["start"] > batch_ended}
    assert len(confirming) == 1  # every engine of the confirmation in one process
    pid = confirming.pop()
    imported = [r for r in seen if r["kind"] == "import" and r["pid"] == pid]
    assert len(imported) == 1 and imported[0]["end"] < batch_ended, "the confirmation's process started after the batch"
    batch_timed = [r for r in seen if r["kind"] == "timed" and r["end"] < batch_ended]
    assert batch_timed and imported[0]["end"] < min(r["start"] for r in batch_timed), (
        "the process launched ahead was still importing while the batch timed"
    )
    # fresh: nothing was loaded into it before the confirmation
    assert all(r["start"] > batch_ended for r in seen if r["kind"] in ("load", "timed") and r["pid"] == pid)
    assert not (worker.ctx.workdir / "serve" / "ahead").exists()
    assert not Path(f"/proc/{pid}").exists()


def test_a_worker_ends_the_process_it_launched_ahead_when_no_confirmation_came(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    with worker:
        worker.ahead = True
        batch_then(worker)
        held = worker._ahead
        assert held is not None and held.proc is not None and held.proc.poll() is None
        pid = held.proc.pid
    assert not Path(f"/proc/{pid}").exists(), "the process launched ahead outlived its worker"
    assert not (worker.ctx.workdir / "serve" / "ahead").exists()


def test_one_that_died_before_the_confirmation_is_replaced(example, tmp_path, monkeypatch):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    worker.ahead = True
    written = batch_then(worker)
    held = worker._ahead
    assert held is not None and held.proc is not None
    os.killpg(held.proc.pid, signal.SIGKILL)
    held.proc.wait()
    batch_ended = time.monotonic()
    # (loaded into the dead process, the confirmation would fail: "confirmation: the process ... killed")
    rounds = worker.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    assert all(len(times) == 2 for times in rounds.values())
    confirming = {r["pid"] for r in records(intervals) if r["kind"] == "load" and r["start"] > batch_ended}
    assert len(confirming) == 1


def test_a_confirmation_job_launches_its_process_before_fetching_the_engines(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    written = batch_then(worker)  # (ahead off: a Job runs one batch or one confirmation)
    events: list[str] = []
    launch, get = Server.launch, worker.ctx.store.get

    def launching(self):
        events.append("launch")
        return launch(self)

    def fetching(key, *args, **kwargs):
        if "/engines/" in key:
            events.append("fetch")
        return get(key, *args, **kwargs)

    monkeypatch.setattr(Server, "launch", launching)
    monkeypatch.setattr(worker.ctx.store, "get", fetching)
    assert batch_module.Server is Server
    worker.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    assert events[:1] == ["launch"] and events.count("launch") == 1 and events.count("fetch") == 2


def kind_of(record: dict) -> str:
    """Which process an `import` record came from: a build process or a serving process."""
    return "builds" if any(a.endswith("builds-request.json") for a in record["argv"]) else "serve"


def test_the_first_batch_builds_and_loads_in_processes_started_before_it(example, tmp_path, monkeypatch):
    """`tune`'s worker starts the first batch's build process and its default's serving process
    before the batch is planned (`start_ahead`): the batch starts none of its own."""
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    worker.start_ahead()
    builders, server = worker._first_builders, worker._first_default
    assert builders is not None and server is not None and server.proc is not None
    builder, serving_pid = builders.all[0].proc, server.proc.pid
    assert builder is not None and builder.poll() is None  # running before any build was asked for
    deadline = time.monotonic() + 60
    imported: list[dict] = []
    while not imported and time.monotonic() < deadline:  # the serving process imports the backend
        imported = [r for r in records(intervals) if r["kind"] == "import"] if intervals.exists() else []
        time.sleep(0.05)
    assert [(r["pid"], kind_of(r)) for r in imported] == [(serving_pid, "serve")]
    batch_began = time.monotonic()
    written = worker.run_batch([DEFAULT, ROUTE], "stage1", "b0", DEFAULT)
    assert [e.outcome.value for e in written] == ["ok", "ok"]

    seen = records(intervals)
    assert [r["parent"] for r in seen if r["kind"] == "build"] == [builder.pid] * 2, (
        "the batch's builds were not forked from the build process started ahead"
    )
    serving = {r["pid"] for r in seen if r["kind"] == "import" and kind_of(r) == "serve"}
    assert serving == {serving_pid}, "the batch started a serving process of its own"
    loads = [r for r in seen if r["kind"] == "load"]
    assert loads[0]["pid"] == serving_pid and loads[0]["start"] > batch_began
    worker.close()
    assert not (worker.ctx.workdir / "serve" / "ahead-default").exists()


def started_ahead(worker) -> list:
    """`worker.start_ahead()`, then the processes it launched for the first batch (its build
    process and its default's serving process)."""
    worker.start_ahead()
    builders, server = worker._first_builders, worker._first_default
    assert builders is not None and server is not None and server.proc is not None
    started = [b.proc for b in builders.all if b.proc is not None] + [server.proc]
    assert len(started) == 2
    return started


def test_close_ends_what_start_ahead_launched_when_no_batch_ran(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    pids = [proc.pid for proc in started_ahead(worker)]
    worker.close()
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
    assert not (worker.ctx.workdir / "builds" / "ahead").exists()
    assert not (worker.ctx.workdir / "serve" / "ahead-default").exists()


def test_a_first_batch_whose_processes_died_before_it_starts_its_own(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    for proc in started_ahead(worker):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    written = worker.run_batch([DEFAULT, ROUTE], "stage1", "b0", DEFAULT)
    # (loaded into the dead serving process, the default would be a crash and the batch would stop)
    assert [e.outcome.value for e in written] == ["ok", "ok"]
    worker.close()


def test_a_confirmation_with_no_batch_before_it_first_ends_what_start_ahead_launched(example, tmp_path, monkeypatch):
    """A resumed run whose batches were all done goes straight to its confirmation: the first
    batch's processes, started ahead and never taken, must not import or prepare beside its rounds."""
    worker, _ = recording_worker(example, tmp_path, monkeypatch)
    written = batch_then(worker)  # (the run before: its entries and kept engines)
    resumed = batch_module.Worker(worker.ctx, ahead=True)
    pids = [proc.pid for proc in started_ahead(resumed)]
    alive_at_rounds: list[int] = []
    interleave = batch_module.interleave

    def rounds_begin(*args, **kwargs):
        alive_at_rounds.extend(pid for pid in pids if Path(f"/proc/{pid}").exists())
        return interleave(*args, **kwargs)

    monkeypatch.setattr(batch_module, "interleave", rounds_begin)
    resumed.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    resumed.close()
    assert alive_at_rounds == [], "the first batch's processes ran beside the confirmation's rounds"


def test_tunes_worker_starts_the_confirmations_process_with_the_first_batchs(example, tmp_path, monkeypatch):
    """With `ahead` (tune), `start_ahead` launches the confirmation's process too: launched only as
    the batch started, its imports outlasted the first build on an H100's host, and the batch's first
    timing waited 6 s for them (session 28). The confirmation then loads into it."""
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    worker.ahead = True
    worker.start_ahead()
    deadline = time.monotonic() + 30
    imported: list[dict] = []
    while len(imported) < 2 and time.monotonic() < deadline:
        imported = [r for r in records(intervals) if r["kind"] == "import"] if intervals.exists() else []
        time.sleep(0.05)
    assert [kind_of(r) for r in imported] == ["serve", "serve"], "the confirmation's process was not started ahead"
    written = batch_then(worker)
    batch_ended = time.monotonic()
    worker.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    seen = records(intervals)
    confirming = {r["pid"] for r in seen if r["kind"] == "load" and r["start"] > batch_ended}
    assert len(confirming) == 1 and confirming <= {r["pid"] for r in imported}
    assert len([r for r in seen if r["kind"] == "import" and kind_of(r) == "serve"]) == 2  # no other started
    worker.close()
