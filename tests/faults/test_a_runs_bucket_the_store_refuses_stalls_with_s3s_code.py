"""The operator writes each Job's batch request into its runs bucket before it creates the Job: a runs
bucket that does not exist stalls the run with S3's code and the bucket's name (an administrator's
fix), a Warning Event, no Job and no traceback — not an exception retried forever."""

import json

from tests.conftest import get_json
from tests.operator.conftest import condition, event_posted, manifest, wait_condition


def test_a_missing_runs_bucket_stalls_store_bucket_missing(cluster, operators, fault_namespace):
    operator = operators.start(ENGINEWRIGHT_RUNS_BUCKET="enginewright-no-such-runs")
    doc = manifest("no-runs-bucket", knobs=[{"name": "enable_mem_pattern", "values": ["0"]}])
    doc["spec"]["publish"] = {"enabled": False}
    cluster.kubectl("apply", "-n", fault_namespace, "-f", "-", input=json.dumps(doc))
    status = wait_condition(cluster, fault_namespace, "no-runs-bucket", "Stalled", 120)
    stall = condition(status, "Stalled")
    assert stall["reason"] == "StoreBucketMissing", status
    for word in ("NoSuchBucket", "'enginewright-no-such-runs'", "requests/probe.json"):
        assert word in stall["message"], stall["message"]
    event_posted(cluster, fault_namespace, "no-runs-bucket", lambda e: e["reason"] == "StoreBucketMissing")
    assert get_json(cluster, "jobs", "-n", fault_namespace)["items"] == []
    log = operator.log_text()
    assert "Traceback" not in log and "failed with an exception" not in log, log[-3000:]
