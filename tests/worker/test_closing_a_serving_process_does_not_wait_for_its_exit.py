"""Closing a serving process ends it at once: its group killed and the process reaped, not waited
for while it exits in order (torch's exit took 0.6 s a process on an H100, on the run's critical
path). Here the child's exit is made slow by an `atexit` handler (a `sitecustomize` on its path) that
sleeps 60 s: before, `Server.close` waited 10 s for it and then killed it."""

import time

from enginewright.api.routes import Route
from enginewright.worker.measure import build
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker

SLOW_EXIT = "import atexit, os, time\nif os.environ.get('EW_TEST_SLOW_EXIT'):\n    atexit.register(time.sleep, 60)\n"


def test_close_kills_and_reaps_without_waiting_for_an_orderly_exit(example, tmp_path, monkeypatch):
    ctx = make_worker(example, tmp_path).ctx
    built = build(ctx, Route.of({}), "stage1", "b0")
    assert built.engine_path is not None
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_EXIT)
    monkeypatch.setenv("PYTHONPATH", f"{site}:{__import__('os').environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("EW_TEST_SLOW_EXIT", "1")
    server = Server(ctx, "a", built.engine_path, tmp_path / "serve", references=True)
    server.start(120)
    proc = server.proc
    assert proc is not None
    began = time.monotonic()
    server.close()
    took = time.monotonic() - began
    assert proc.returncode is not None  # reaped
    assert took < 5, f"close waited {took:.1f} s for the process's exit"
