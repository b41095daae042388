"""spec.compiler.image runs code beside the namespace's store key: only the operator's worker images
and the images its settings allow (tenancy.allowedImages) are run. Another image stalls the run with
ImageNotAllowed and a Warning Event, and no Job is created."""

from tests.cluster.harness import wait_for
from tests.operator.conftest import apply, condition, event_posted, jobs, manifest, run_status, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def test_an_image_the_operator_does_not_allow_creates_no_job(cluster, operator, run_namespace):
    doc = manifest("miner", knobs=KNOB)
    doc["spec"]["compiler"]["image"] = "docker.io/attacker/miner:latest"
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, "miner", "Stalled", 120)
    stall = condition(status, "Stalled")
    assert stall["reason"] == "ImageNotAllowed" and "docker.io/attacker/miner:latest" in stall["message"], stall
    assert "spec.compiler.image" in stall["message"]
    event_posted(cluster, run_namespace, "miner", lambda e: e["type"] == "Warning" and e["reason"] == "ImageNotAllowed")
    assert jobs(cluster, run_namespace) == []
    operator.assert_clean()


def test_an_allowed_image_is_the_one_the_job_runs(cluster, operator, run_namespace):
    doc = manifest("custom", knobs=KNOB)
    doc["spec"]["compiler"]["image"] = "registry.example.com/allowed/worker-onnxruntime:dev"
    apply(cluster, run_namespace, doc)
    made = wait_for(lambda: jobs(cluster, run_namespace), 120, "the probe Job")
    images = {c["image"] for j in made for c in j["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/allowed/worker-onnxruntime:dev"}
    assert condition(run_status(cluster, run_namespace, "custom"), "Stalled").get("status") != "True"
    operator.assert_clean()
