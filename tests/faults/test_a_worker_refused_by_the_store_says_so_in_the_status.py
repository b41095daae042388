"""A worker the store refuses after the run's checks passed (here: its environment carries a wrong
secret key, as a Secret rotated under a running run would) fails its probe Job; the run's Stalled
condition carries the worker's own error line with S3's code, not "see its pod's log"."""

import json
import time

from tests.operator.conftest import condition, manifest, wait_condition


def test_the_probe_failure_carries_s3s_code(cluster, operators, fault_namespace):
    operator = operators.start(worker_env={"AWS_SECRET_ACCESS_KEY": "not-the-secret"})
    doc = manifest("refused-worker", knobs=[{"name": "enable_mem_pattern", "values": ["0"]}])
    cluster.kubectl("apply", "-n", fault_namespace, "-f", "-", input=json.dumps(doc))
    began = time.monotonic()
    status = wait_condition(cluster, fault_namespace, "refused-worker", "Stalled", 240)
    print(f"\nStalled {time.monotonic() - began:.1f}s after apply: {condition(status, 'Stalled')['message']}")
    stall = condition(status, "Stalled")
    assert stall["reason"] == "ProbeFailed", status
    assert "SignatureDoesNotMatch" in stall["message"] and "its pod said: " in stall["message"], stall["message"]
    assert "see its pod's log" not in stall["message"]
    log = operator.log_text()
    assert "Traceback" not in log and "failed with an exception" not in log, log[-3000:]
