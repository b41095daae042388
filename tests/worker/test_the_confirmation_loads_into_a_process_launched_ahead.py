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
    dead = held.proc.pid
    os.killpg(dead, signal.SIGKILL)
    held.proc.wait()
    rounds = worker.confirm([written[ROUTE.id]], written[DEFAULT.id], rounds=2, loads=1, early_stop=False)
    assert all(len(times) == 2 for times in rounds.values())
    confirming = {r["pid"] for r in records(intervals) if r["kind"] == "timed" and r["pid"] != dead}
    assert dead not in confirming and confirming


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
