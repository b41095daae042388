"""A worker that writes a truncated cache entry, and one that exits without writing any: the entry
is refused with a reason in the status and an Event, the route is recorded as unmeasured, and
nothing is silently counted."""

from tests.conftest import get_json
from tests.faults.conftest import cached_entries
from tests.operator.conftest import apply, condition, manifest, wait_condition

KNOBS = [{"name": "enable_mem_pattern", "values": ["0"]}, {"name": "enable_cpu_mem_arena", "values": ["0"]}]


def test_a_truncated_entry_is_refused_and_its_route_unmeasured(cluster, operators, fault_namespace):
    operators.start(worker_env={"ENGINEWRIGHT_FAILPOINTS": "entry-write=corrupt@2"})
    doc = manifest("truncated", knobs=KNOBS)
    doc["spec"]["search"].update(backoffLimit=0)
    apply(cluster, fault_namespace, doc)
    status = wait_condition(cluster, fault_namespace, "truncated", "Ready", 240)
    (target,) = status["targets"]
    assert target["planned"] == 3 and target["unmeasured"] == 1
    assert len(target["refused"]) == 1 and ".json: " in target["refused"][0]
    assert "1 of 3 planned routes have no measurement" in target["cutShort"]
    entries = cached_entries(cluster, fault_namespace, status)
    assert len(entries) == 2 and target["done"] + target["failed"] + target["rejected"] == 2
    events = [
        e
        for e in get_json(cluster, "events", "-n", fault_namespace)["items"]
        if e["involvedObject"]["name"] == "truncated" and e["reason"] == "EntryRefused"
    ]
    assert events and events[0]["type"] == "Warning"
    assert "Traceback" not in operators.log_text()


def test_a_worker_that_writes_nothing_fails_the_target_clearly(cluster, operators, fault_namespace):
    operators.start(worker_env={"ENGINEWRIGHT_FAILPOINTS": "worker-start=exit"})
    apply(cluster, fault_namespace, manifest("silent", knobs=KNOBS))
    status = wait_condition(cluster, fault_namespace, "silent", "Stalled", 240)
    stalled = condition(status, "Stalled")
    assert stalled["reason"] == "DefaultRouteNotMeasured", stalled
    assert "ended without writing the default route's entry" in stalled["message"]
    assert status["targets"][0]["done"] == 0 and status["phase"] == "Failed"
    assert "Traceback" not in operators.log_text()
