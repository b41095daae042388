"""The serving process launched when a batch starts (for the default's engine, which is still
building) is closed however the batch ends before that engine loads: the default's build failed, or
the run's deadline passed while it built. No process is left behind; and one that died while it
waited makes the default's load fail at once, instead of a hang."""

import json
import os
import signal
import time
from pathlib import Path

import pytest

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker.batch import DefaultRoute
from enginewright.worker.measure import Built, load, new_entry
from enginewright.worker.server import Server, primer
from tests.worker.conftest import make_worker, recording_worker
from tests.worker.interval_backend import SLOW_BUILD


@pytest.mark.parametrize("ends", ["the default's build times out", "the deadline passes"])
def test_the_process_launched_ahead_is_closed_when_the_batch_ends_early(example, tmp_path, monkeypatch, ends):
    worker, intervals = recording_worker(example, tmp_path, monkeypatch)
    default = Route.of({SLOW_BUILD: "60"})  # ended long before it builds, by either cut
    if ends == "the deadline passes":
        worker.ctx.deadline = time.time() + 6
    else:
        worker.ctx.route_timeout = 6
    written = worker.run_batch([default], "stage1", "b0", default)
    if ends == "the deadline passes":
        assert written == []  # cut short by the deadline: not recorded
    else:
        assert [e.outcome for e in written] == [Outcome.timeout]

    records = [json.loads(line) for line in intervals.read_text().splitlines()]
    serving = [r["pid"] for r in records if r["kind"] == "import" and Path(r["argv"][-1]).name == "request.json"]
    assert len(serving) == 1, "no serving process was launched while the default built"
    assert not Path(f"/proc/{serving[0]}").exists(), "the serving process launched ahead was left running"
    assert not (worker.ctx.workdir / "serve" / "b0").exists()


def test_a_process_that_died_before_its_engine_fails_the_load_at_once(example, tmp_path):
    ctx = make_worker(example, tmp_path).ctx
    launched = Server(ctx, primer("default"), None, tmp_path / "serve", references=True)
    launched.launch()
    assert launched.proc is not None
    os.kill(launched.proc.pid, signal.SIGKILL)  # as the out-of-memory killer would, while it imports
    engine = tmp_path / "engine.engine"
    engine.write_bytes(b"never read")
    built = Built(Route(), new_entry(ctx, Route(), "stage1", "b0"), engine)
    started = time.monotonic()
    entry, server = load(ctx, built, "default", launched)
    assert server is None and launched.proc is None
    assert entry.outcome is Outcome.crash and "killed by SIGKILL" in (entry.error or "")
    assert time.monotonic() - started < 30  # failed at once, never waited for the load's budget


def test_a_batch_that_ends_while_its_first_group_builds_closes_the_process_launched_ahead(example, tmp_path):
    # a SIGTERM or an error during the first group: the batch's `with` ends before the default is
    # measured, and only DefaultRoute's exit can close the process launched for it
    ctx = make_worker(example, tmp_path).ctx
    stale = ctx.workdir / "serve" / "b0" / "load" / "left-by-a-killed-run"
    stale.parent.mkdir(parents=True)
    stale.write_text("")
    with pytest.raises(RuntimeError, match="SIGTERM"):
        with DefaultRoute(ctx, Route(), True, "b0") as default:
            default.launch()
            assert not stale.exists(), "the launched process's folder kept an earlier run's files"
            pid = default._launched.proc.pid  # type: ignore[union-attr]
            raise RuntimeError("SIGTERM while the first group builds")
    assert not Path(f"/proc/{pid}").exists(), "the serving process launched ahead was left running"
    assert not (ctx.workdir / "serve" / "b0").exists()
