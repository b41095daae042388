"""The S3 server stopped for 20 seconds while entries are being aggregated, and again while the
winner is being published: the operator says why it waits (status and an Event), retries, never
leaves provenance without its engine or an index entry without both, and completes."""

import json
import time

from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.faults.conftest import cached_entries
from tests.operator.conftest import RUNS_BUCKET, apply, manifest, run_status, wait_condition

KNOBS = [{"name": "enable_mem_pattern", "values": ["0"]}, {"name": "enable_cpu_mem_arena", "values": ["0"]}]
OUTAGE = 20.0


def outage(cluster, namespace: str, name: str) -> str:
    """Stop the S3 server for OUTAGE seconds; return the run's message seen while it was away."""
    cluster.stop_process("versitygw")
    seen = ""
    try:
        ends = time.monotonic() + OUTAGE
        while time.monotonic() < ends:
            message = run_status(cluster, namespace, name).get("message") or ""
            if "waiting for the object store" in message:
                seen = message
            time.sleep(0.5)
    finally:
        cluster.start_process("versitygw")
    return seen


def test_store_outages(cluster, operators, fault_namespace, s3, tmp_path):
    operators.start("publish-start=pause:4")
    marker = operators.folder / "failpoints" / "publish-start"
    doc = manifest(
        "outage", knobs=KNOBS, timing={"warmupIterations": 2, "roundSeconds": 0.05, "minRounds": 4, "maxRounds": 4}
    )
    apply(cluster, fault_namespace, doc)
    prefix = f"runs/{fault_namespace}/outage-"
    wait_for(
        lambda: any("/entries/" in o.object_name for o in s3.list_objects(RUNS_BUCKET, prefix=prefix, recursive=True)),
        180,
        "a first entry in the store",
        interval=0.3,
        detail=lambda: run_status(cluster, fault_namespace, "outage"),
    )
    during_aggregation = outage(cluster, fault_namespace, "outage")

    wait_for(
        marker.exists,
        240,
        "the publish failpoint",
        interval=0.2,
        detail=lambda: run_status(cluster, fault_namespace, "outage"),
    )
    during_publish = outage(cluster, fault_namespace, "outage")

    status = wait_condition(cluster, fault_namespace, "outage", "Ready", 240)
    assert "waiting for the object store" in during_aggregation
    assert "waiting for the object store" in during_publish
    reasons = [
        e["reason"]
        for e in get_json(cluster, "events", "-n", fault_namespace)["items"]
        if e["involvedObject"]["name"] == "outage"
    ]
    assert "StoreUnavailable" in reasons
    (target,) = status["targets"]
    entries = cached_entries(cluster, fault_namespace, status)
    assert len(entries) == len({e.route_id for e in entries}) == target["planned"] == 3
    folder = target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/").rsplit("/", 1)[0]
    names = sorted(o.object_name.rsplit("/", 1)[-1] for o in s3.list_objects(RUNS_BUCKET, prefix=folder + "/"))
    assert names == ["engine.ort.tar", "provenance.json", "report.md", "routes.json"]
    index = json.loads(s3.get_object(RUNS_BUCKET, "catalog/outage/index.json").read())
    assert [e["sha256"] for e in index["entries"]] == [target["engineSha256"]]
    # the catalog site was written once the store was back (the pass that publishes retries it)
    assert target["engineSha256"] in s3.get_object(RUNS_BUCKET, "catalog/outage/index.html").read().decode()
    assert "Traceback" not in operators.log_text()
