"""A build that ends before the worker reads its `pid` reply (the worker thread descheduled, or
held by the GIL) still comes back ok and at once, from the same build process: both of its reply
lines may then be in the pipe together, and neither may be lost to a reader's buffer."""

import fcntl
import termios
import time

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from enginewright.worker import process
from enginewright.worker.measure import build
from tests.cluster.harness import wait_for
from tests.worker.conftest import make_worker

# `{"pid": P}\n` is 11-17 bytes and `{"code": C}\n` at least 12: 23 bytes in the pipe are both lines.
BOTH_REPLIES = 23


def pipe_holds(fd: int) -> int:
    return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")


def test_a_build_that_ended_before_its_pid_was_read_comes_back_ok(example, tmp_path, monkeypatch):
    real_expect = process.Builder._expect

    def late_for_the_pid(self, key, deadline):
        if key == "pid":  # the reader is late until the build has ended and both replies wait
            fd = self.proc.stdout.fileno()
            wait_for(lambda: pipe_holds(fd) >= BOTH_REPLIES, 60, "the build to end and both replies to wait")
        return real_expect(self, key, deadline)

    monkeypatch.setattr(process.Builder, "_expect", late_for_the_pid)
    ctx = make_worker(example, tmp_path).ctx
    ctx.route_timeout = 15
    with process.Builders(tmp_path / "work" / "builds", 1) as builders:
        for route in [Route.of({"enable_mem_pattern": "0"}), Route.of({"intra_op_num_threads": "1"})]:
            started = time.monotonic()
            built = build(ctx, route, "stage1", "b0", builders)
            assert built.entry.outcome is Outcome.ok, built.entry.error
            assert time.monotonic() - started < 10  # not held until the route's timeout
        assert builders.started == 1
