"""The operator's worker Jobs run from the built worker image, not from this machine's Python: a
cluster whose node agent runs pods from images (tests/cluster/image_cluster.py), the operator with
its default worker command (`python -m enginewright.worker`, which only the image has) takes the
demo's run to Ready; every worker pod ran the image's digest as its non-root user. A Job naming an
image that was not built stays Pending in ErrImagePull, as on a real kubelet, and a run whose worker
image cannot be pulled says so on its status at once and gives up after the start wait, its Jobs
stopped, instead of waiting hours for the Job's deadline."""

from __future__ import annotations

import json
import time

import pytest

from enginewright.api.names import LABEL_RUN
from tests.cluster.harness import wait_for
from tests.cluster.image_cluster import RUNS_BUCKET, put_example, started_image_cluster
from tests.cluster.images import image_name
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import (
    apply,
    condition,
    event_posted,
    events,
    jobs,
    manifest,
    run_status,
    wait_condition,
)

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


START_SECONDS = 10


def test_a_run_whose_worker_image_cannot_be_pulled_says_so_and_gives_up(image_cluster, tmp_path):
    typo = "registry.example/enginewright/worker-onnxruntime:typo"
    operator = start_operator(
        image_cluster,
        tmp_path / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_WORKER_COMMAND="python -m enginewright.worker",
        ENGINEWRIGHT_NAMESPACES=NAMESPACE,
        ENGINEWRIGHT_ALLOWED_IMAGES="registry.example/*",  # allowed, yet no node can pull it
        ENGINEWRIGHT_START_TIMEOUT_SECONDS=str(START_SECONDS),
    )
    try:
        doc = manifest("typo-image")
        doc["spec"]["compiler"]["image"] = typo
        apply(image_cluster, NAMESPACE, doc)
        began = time.monotonic()

        def said() -> dict | None:  # while the run still reconciles: it waits, it has not given up
            status = run_status(image_cluster, NAMESPACE, "typo-image")
            reconciling = condition(status, "Reconciling")
            return (
                status
                if reconciling.get("reason") == "ContainerCannotStart" and reconciling["status"] == "True"
                else None
            )

        status = wait_for(said, 60, "ContainerCannotStart on the run while it reconciles", 0.5)
        seen = time.monotonic()
        print(f"\nContainerCannotStart on the run {seen - began:.1f}s after apply")
        ready = condition(status, "Ready")
        assert ready["status"] == "False" and ready["reason"] == "ContainerCannotStart", ready
        assert "ErrImagePull" in ready["message"] and typo in ready["message"], ready  # the kubelet's words
        (target,) = status["targets"]
        assert target["reason"] == "ContainerCannotStart" and target["blockedSince"], target
        assert f"the kubelet retries: gives up after {START_SECONDS}s" in target["message"], target
        event_posted(
            image_cluster,
            NAMESPACE,
            "typo-image",
            lambda e: e["type"] == "Warning" and e["reason"] == "ContainerCannotStart",
        )
        status = wait_condition(image_cluster, NAMESPACE, "typo-image", "Stalled", START_SECONDS + 60)
        stalled = time.monotonic()
        print(f"Stalled {stalled - began:.1f}s after apply, {stalled - seen:.1f}s after (wait {START_SECONDS}s)")
        # the wait counts from the operator's first sighting (kept in blockedSince): not before it
        assert stalled - seen >= START_SECONDS - 1, (stalled - seen, status)
        waits = [
            e
            for e in events(image_cluster, NAMESPACE, "typo-image")
            if e["reason"] == "ContainerCannotStart" and "the kubelet retries" in e["message"]
        ]
        assert len(waits) == 1 and waits[0].get("count", 1) == 1, waits  # said once, not at every pass
        stall = condition(status, "Stalled")
        assert stall["reason"] == "ContainerCannotStart" and f"gave up after {START_SECONDS}s" in stall["message"]
        assert "pull secret" in stall["message"] and typo in stall["message"], stall
        assert status["phase"] == "Failed" and status["targets"][0]["stage"] == "failed", status
        # Its Job is stopped: nothing is left retrying a pull for the Job's whole deadline.
        wait_for(
            lambda: (
                not [
                    j
                    for j in jobs(image_cluster, NAMESPACE)
                    if j["metadata"]["labels"].get(LABEL_RUN) == "typo-image"
                    and not j["metadata"].get("deletionTimestamp")
                ]
            ),
            30,
            "the Job whose image cannot be pulled stopped",
            0.5,
        )
    finally:
        operator.stop()
    assert "Traceback" not in operator.log_text()
