"""A serving process's `ready` reply says where its load's time went (`child.load`: the load and first
call, the accuracy check, the warm-up, finding the calls per round), so that `bench/tune_profile.py` can
split a serving process's start on a GPU node (15 s on an H100 in session 27) into its parts; and the
load's own parts (`load.backend`, `load.first call`, and a backend's, `Runner.load_parts`): a later load
took 0.49 s on an H100 (session 31), 34 loads of a 61 s run."""

import time

from enginewright.api.routes import Route
from enginewright.worker.measure import build
from enginewright.worker.server import Server
from tests.worker.conftest import make_worker


def test_each_load_reply_times_its_phases_within_the_wait_for_it(example, tmp_path):
    ctx = make_worker(example, tmp_path).ctx
    built = build(ctx, Route.of({}), "stage1", "b0")
    assert built.engine_path is not None
    server = Server(ctx, "a", built.engine_path, tmp_path / "serve", references=True)
    try:
        began = time.monotonic()
        first = server.start(120)
        waited = time.monotonic() - began
        began = time.monotonic()
        second = server.add("b", built.engine_path, tmp_path / "serve" / "b", 120, check=False)
        waited_second = time.monotonic() - began
    finally:
        server.close()
    for reply, wall in ((first, waited), (second, waited_second)):
        phases = {k: v for k, v in reply["seconds"].items() if not k.startswith("load.")}
        parts = {k: v for k, v in reply["seconds"].items() if k.startswith("load.")}
        assert set(phases) == {"load", "check", "warm_up", "calls_per_round"}
        assert all(seconds >= 0 for seconds in reply["seconds"].values())
        # inside the wait for the reply, never beside it (each phase rounded to 1 ms: 2 ms of slack)
        assert sum(phases.values()) <= wall + 0.002
        # the load's own parts: the backend's `load` and the first call, which add up to it (each rounded)
        assert {"load.backend", "load.first call"} <= set(parts) and parts["load.first call"] > 0
        assert abs(parts["load.backend"] + parts["load.first call"] - phases["load"]) <= 0.002
    # (it runs the engine for a round's length; the second load, of the same file, takes its calls)
    assert first["seconds"]["calls_per_round"] > 0
    assert first["seconds"]["load"] == first["load_info"]["load_seconds"]
