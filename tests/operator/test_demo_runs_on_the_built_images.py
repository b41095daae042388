"""The operator's worker Jobs run from the built worker image, not from this machine's Python: a
cluster whose node agent runs pods from images (tests/cluster/image_cluster.py), the operator with
its default worker command (`python -m enginewright.worker`, which only the image has) takes the
demo's run to Ready; every worker pod ran the image's digest as its non-root user. A Job naming an
image that was not built stays Pending in ErrImagePull, as on a real kubelet."""

from __future__ import annotations

import json

import pytest

from tests.cluster.harness import wait_for
from tests.cluster.image_cluster import RUNS_BUCKET, put_example, started_image_cluster
from tests.cluster.images import image_name
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import apply, manifest, wait_condition

NAMESPACE = "images"


@pytest.fixture(scope="module")
def image_cluster(tmp_path_factory):
    with started_image_cluster(NAMESPACE) as cluster:
        cluster.s3 = put_example(cluster, tmp_path_factory.mktemp("example"))
        yield cluster


def pods(cluster, selector: str) -> list[dict]:
    return json.loads(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "json").stdout)["items"]


def test_the_demo_run_reaches_ready_with_workers_from_the_worker_image(image_cluster, tmp_path):
    log = tmp_path / "operator.log"
    # The operator's default worker command: it exists only inside the worker image.
    operator = start_operator(
        image_cluster,
        log,
        RUNS_BUCKET,
        ENGINEWRIGHT_WORKER_COMMAND="python -m enginewright.worker",
        ENGINEWRIGHT_NAMESPACES=NAMESPACE,
    )
    try:
        doc = manifest(
            "mlp-images",
            targets=("cpu", "NVIDIA-L40S"),
            knobs=[{"name": "graph_optimization_level", "values": ["basic", "all"]}],
        )
        apply(image_cluster, NAMESPACE, doc)
        status = wait_condition(image_cluster, NAMESPACE, "mlp-images", "Ready", 420)
    finally:
        operator.stop()
    assert status["phase"] == "Succeeded"
    for target in status["targets"]:
        key = target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/")
        assert image_cluster.s3.stat_object(RUNS_BUCKET, key).size > 0
    worker = image_cluster.image_store.image(image_name("worker-onnxruntime"))
    ran = pods(image_cluster, "tuning.enginewright.io/run=mlp-images")
    assert ran
    for pod in ran:
        (container,) = pod["status"]["containerStatuses"]
        assert container["image"] == image_name("worker-onnxruntime")
        assert container["imageID"] == worker.digest
        assert container["state"]["terminated"]["exitCode"] == 0
    assert "Traceback" not in operator.log_text()


def test_a_pod_whose_image_was_not_built_waits_in_err_image_pull(image_cluster):
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "no-such-image", "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"nvidia.com/gpu.product": "cpu"},
            "containers": [
                {
                    "name": "main",
                    "image": "enginewright/worker-tensorrt:0.1.0",
                    "command": ["python", "-m", "enginewright.worker"],
                }
            ],
        },
    }
    image_cluster.kubectl("apply", "-f", "-", input=json.dumps(body))

    def waiting():
        pod = json.loads(image_cluster.kubectl("get", "pod", "no-such-image", "-n", NAMESPACE, "-o", "json").stdout)
        statuses = pod.get("status", {}).get("containerStatuses") or []
        state = statuses[0]["state"].get("waiting", {}) if statuses else {}
        return (pod["status"]["phase"], state) if state.get("reason") == "ErrImagePull" else None

    phase, state = wait_for(waiting, 60, "the pod to wait in ErrImagePull", 0.3)
    assert phase == "Pending"
    assert "enginewright/worker-tensorrt:0.1.0" in state["message"] and "make images" in state["message"]
    image_cluster.kubectl("delete", "pod", "no-such-image", "-n", NAMESPACE, "--wait=false")
