"""A timing that begins while the serving process's other threads are still busy (the wait for them
to go quiet gave up after its limit: a loaded host, or a thread that never rests) is taken anyway, so
a busy host cannot stall a run, but it is counted: the route's entry says how many of its timed
blocks and requests began so (`host.busyStarts`), and the result's headline says it for the default
and the winner. Before, the wait's answer was dropped and such times read like any other."""

from enginewright.api.cache import Outcome
from enginewright.api.routes import Route
from tests.worker.conftest import recording_worker
from tests.worker.interval_backend import RESTLESS


def test_a_route_timed_beside_a_thread_that_never_rests_counts_its_busy_starts(example, tmp_path, monkeypatch):
    worker, _ = recording_worker(example, tmp_path, monkeypatch, min_rounds=2, max_rounds=2)
    # one thread per engine: no pool of ONNX Runtime's that spins after a run, which a loaded host
    # could keep runnable past the wait's limit; the restless thread is then the only busy one
    worker.ctx.settings = {"intra_op_num_threads": "1", "inter_op_num_threads": "1"}
    default, calm, restless = Route.of({}), Route.of({"enable_mem_pattern": "0"}), Route.of({RESTLESS: "1"})
    written = {e.route_id: e for e in worker.run_batch([default, calm, restless], "stage1", "b0", default)}
    assert {e.outcome for e in written.values()} == {Outcome.ok}
    busy = {route_id: entry.host.busy_starts for route_id, entry in written.items()}
    # the default and the calm route were timed before the restless engine was loaded, and it is
    # closed (its thread stopped) before the next route would be
    assert busy[default.id] == 0 and busy[calm.id] == 0, busy
    # every interleaved block of its 2 rounds (its 2 loads and the default's: 8) and its
    # measurements' request began beside the restless thread
    assert busy[restless.id] >= 8, busy
    assert written[restless.id].wire()["host"]["busyStarts"] == busy[restless.id]
