"""Reply lines a child writes in one go are all read, at once: the worker reads its children's pipes
raw (`ReplyLines`), because select() sees only what is still in the pipe, and a buffered `readline`
that took two lines at once would hold the second where select() cannot see it until the deadline.
The serving protocol answers each request with one line, so a real serving process never writes two
at once; a stand-in serving process here does, and the Server must not wait for its second line."""

import subprocess
import sys
import time

import pytest

from enginewright.worker import server as server_module
from enginewright.worker.process import ReplyLines
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker

# Two lines in one write, then it holds its end of the pipe open until its stdin closes.
TWO_LINES_AT_ONCE = r"""
import os, sys
os.write(1, b'{"ready": true, "calls": 3}\n{"dropped": "b"}\n')
sys.stdin.read()
"""

# Two lines and the start of a third in one write; the rest of the third once its stdin closes.
CUT_SHORT_THEN_FINISHED = r"""
import os, sys
os.write(1, b'one\ntwo\nthr')
sys.stdin.read()
os.write(1, b'ee\n')
"""


def test_a_servers_second_line_of_one_write_is_read_without_waiting(example, tmp_path, monkeypatch):
    monkeypatch.setattr(server_module, "child_command", lambda request: [sys.executable, "-c", TWO_LINES_AT_ONCE])
    server = Server(make_worker(example, tmp_path).ctx, "a", tmp_path / "engine", tmp_path / "serve", references=False)
    try:
        assert server.start(60)["calls"] == 3
        started = time.monotonic()
        server.drop(["b"], 5)  # its reply is the second line, read with the first
        assert time.monotonic() - started < 2
    finally:
        server.close()


def test_lines_of_one_write_come_out_one_by_one_then_the_deadline_then_the_end():
    child = subprocess.Popen(
        [sys.executable, "-c", CUT_SHORT_THEN_FINISHED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        replies = ReplyLines(child.stdout.fileno())
        deadline = time.monotonic() + 30
        assert replies.next(deadline) == b"one"
        assert replies.next(time.monotonic()) == b"two"  # already read: no wait, not even a poll
        with pytest.raises(TimeoutError):  # a line cut short is not a line
            replies.next(time.monotonic() + 0.2)
        child.stdin.close()  # the child writes the rest of the line and exits
        assert replies.next(deadline) == b"three"
        assert replies.next(deadline) is None
    finally:
        child.kill()
        child.wait()
