"""Batches of one target that run at once each measure the default route as their own baseline, but
only the batch that lists the default writes its entry and keeps its engine: the entry's digest is
always the kept engine's (a compiler's rebuild need not give the same bytes, and the catalog publishes
the kept ones; an ONNX Runtime route's does, since its tar members carry no mtime)."""

import hashlib
from concurrent.futures import ThreadPoolExecutor

from enginewright.api.routes import Route
from tests.worker.conftest import make_worker


def test_concurrent_batches_leave_one_consistent_default(example, tmp_path):
    default = Route()
    first, second = Route.of({"enable_mem_pattern": "0"}), Route.of({"enable_cpu_mem_arena": "0"})
    owner = make_worker(example, tmp_path / "a")
    other = make_worker(example, tmp_path / "a")  # the same store and prefix, its own work dir
    other.ctx.workdir = tmp_path / "b-work"
    with ThreadPoolExecutor(2) as pool:
        wrote_owner = pool.submit(owner.run_batch, [default, first], "stage1", "stage1-b000", default)
        wrote_other = pool.submit(other.run_batch, [second], "stage1", "stage1-b001", default)
        owner_entries, other_entries = wrote_owner.result(), wrote_other.result()
    assert default.id in {e.route_id for e in owner_entries}
    assert {e.route_id for e in other_entries} == {second.id}  # measured its baseline, wrote only its route
    entries = owner.existing()
    engine = owner.ctx.store.get(owner.ctx.engine_key(default.id))
    assert entries[default.id].engine_sha256 == hashlib.sha256(engine).hexdigest()
    assert entries[second.id].baseline_ms > 0
