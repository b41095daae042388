"""Size: a spec larger than an environment variable holds (~128 KiB) still runs — the batch request
travels through the store, not the Job's environment — and a run whose annotations leave kopf no room
for its own (256 KiB in all) is still deleted at once: kopf keeps a digest, and nothing for an object
being deleted, so the finalizer's removal cannot be refused."""

import json
import time

from enginewright.api.names import LABEL_STAGE
from tests.operator.conftest import condition, jobs, manifest, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]
ANNOTATIONS_LIMIT = 256 * 1024  # the API server's limit on an object's annotations, all together


def create(cluster, namespace, doc):
    """`kubectl create`: `kubectl apply` would copy the object into an annotation of its own."""
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(doc))


def test_a_spec_larger_than_an_environment_variable_reaches_ready(cluster, operator, run_namespace):
    doc = manifest("big-spec", knobs=KNOB)
    # ONNX Runtime takes any session config entry: 128 settings (the CRD's bound) of 1000 characters.
    doc["spec"]["compiler"]["settings"] = {
        "intra_op_num_threads": "1",
        **{f"enginewright.test.pad{i:03d}": "x" * 1000 for i in range(127)},
    }
    doc["spec"]["publish"] = {"enabled": False}
    assert len(json.dumps(doc["spec"])) > 128 * 1024
    create(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "big-spec", "Ready", 420)
    assert status["phase"] == "Succeeded", status
    for job in jobs(cluster, run_namespace):
        env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "ENGINEWRIGHT_BATCH" not in env and env["ENGINEWRIGHT_BATCH_URI"].startswith("s3://"), env
        assert len(json.dumps(job)) < 16 * 1024, job["metadata"]["labels"][LABEL_STAGE]
    operator.assert_clean()


def test_a_run_whose_annotations_leave_kopf_no_room_is_deleted_at_once(cluster, operator, run_namespace):
    doc = manifest("full-annotations", knobs=KNOB)
    doc["spec"]["search"]["dryRun"] = True
    doc["metadata"]["annotations"] = {"example.com/notes": "n" * (ANNOTATIONS_LIMIT - 8 * 1024)}
    create(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "full-annotations", "Ready", 180)
    assert condition(status, "Ready")["reason"] == "DryRun"
    got = json.loads(cluster.kubectl("get", "trun", "full-annotations", "-n", run_namespace, "-o", "json").stdout)
    kopf_keys = {k: v for k, v in got["metadata"]["annotations"].items() if k.startswith("kopf.zalando.org/")}
    assert kopf_keys and all(len(v) < 200 for v in kopf_keys.values()), kopf_keys
    began = time.monotonic()
    cluster.kubectl("delete", "trun", "full-annotations", "-n", run_namespace, "--timeout=60s")
    took = time.monotonic() - began
    assert cluster.kubectl("get", "trun", "full-annotations", "-n", run_namespace, check=False).returncode != 0
    print(f"\ndeleted in {took:.1f}s")
    operator.assert_clean()
