"""GPU pools that scale from zero have no node of the GPU type until a pod asks for one: a run never
waits for a node before creating its Job. A pod the scheduler cannot place is on the run within a
minute (reason Unschedulable, the scheduler's message, a Warning Event); a node that appears while
the run waits takes the pod and the run goes on; a target that never gets a node gives up after
the operator's configured wait (Stalled Unschedulable, its Jobs stopped). Once the run is finished
its Jobs get ttlSecondsAfterFinished and Kubernetes removes them.

These tests run an operator of their own (namespaces `z-*`) with a short unschedulable wait and a
short Job TTL, and a second node agent standing in for the autoscaler's new node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest

from enginewright.api.names import LABEL_STAGE
from tests.cluster.harness import REPO, _die_with_parent, wait_for
from tests.cluster.operator_process import create_store_secret, start_operator
from tests.operator.conftest import (
    RUNS_BUCKET,
    TEST_INTERVAL,
    Operator,
    apply,
    condition,
    event_posted,
    jobs,
    manifest,
    run_status,
    wait_condition,
)

UNSCHEDULABLE_SECONDS = 40
KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


@pytest.fixture(scope="module")
def scaling_operator(cluster, crd_installed, example_in_store, tmp_path_factory):
    started = start_operator(
        cluster,
        tmp_path_factory.mktemp("scaling") / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_NAMESPACES="z-*",
        ENGINEWRIGHT_RECONCILE_INTERVAL=TEST_INTERVAL,
        ENGINEWRIGHT_UNSCHEDULABLE_SECONDS=str(UNSCHEDULABLE_SECONDS),
        ENGINEWRIGHT_JOB_TTL_SECONDS="2",
    )
    running = Operator(started.process, started.log, started.metrics_port, started.health_port)
    yield running
    running.stop()
    running.assert_clean()


@pytest.fixture
def z_namespace(cluster, crd_installed):
    name = f"z-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    create_store_secret(cluster, name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture
def new_node(cluster, tmp_path):
    """Starts, when called, a node agent with one more node (what an autoscaler adds); removed after."""
    added = []

    def add(name: str, labels: dict, gpus: int) -> None:
        nodes = tmp_path / "nodes.json"
        nodes.write_text(json.dumps([{"name": name, "labels": labels, "gpus": gpus}]))
        env = {**cluster.env, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "operator")])}
        with open(tmp_path / "node-agent.log", "ab") as log:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.cluster.node_agent",
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                    "--nodes",
                    str(nodes),
                    "--workdir",
                    str(tmp_path / "pods"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                preexec_fn=_die_with_parent,
            )
        added.append((name, process))

    yield add
    for name, process in added:
        process.terminate()
        process.wait(timeout=30)
        cluster.kubectl("delete", "node", name, "--wait=false", check=False)


def unschedulable(cluster, namespace: str, name: str, timeout: float) -> tuple[dict, float]:
    """The run's status once its Reconciling condition says Unschedulable, and the seconds that took."""
    began = time.monotonic()
    while True:
        status = run_status(cluster, namespace, name)
        if condition(status, "Reconciling").get("reason") == "Unschedulable":
            return status, time.monotonic() - began
        assert condition(status, "Stalled").get("status") != "True", status
        assert time.monotonic() - began < timeout, f"no Unschedulable condition in {timeout}s: {status}"
        time.sleep(0.5)


def test_a_node_added_while_the_run_waits_takes_its_pod(cluster, scaling_operator, z_namespace, new_node):
    doc = manifest("from-zero", knobs=KNOB, targets=("NVIDIA-A100",))
    doc["spec"]["search"]["dryRun"] = True
    doc["spec"]["targets"][0]["resources"] = {"requests": {"cpu": 2}}  # an integer quantity is accepted
    apply(cluster, z_namespace, doc)
    status, seconds = unschedulable(cluster, z_namespace, "from-zero", 60)
    print(f"\nUnschedulable on the run {seconds:.1f}s after apply")
    ready = condition(status, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Unschedulable", ready
    assert "didn't match Pod's node affinity/selector" in ready["message"], ready  # the scheduler's words
    assert status["targets"][0]["reason"] == "Unschedulable" and status["phase"] == "Pending", status
    event_posted(cluster, z_namespace, "from-zero", lambda e: e["type"] == "Warning" and e["reason"] == "Unschedulable")
    wide = cluster.kubectl("get", "trun", "from-zero", "-n", z_namespace, "-o", "wide").stdout.split()
    assert wide[:4] == ["NAME", "PHASE", "READY", "REASON"] and wide[wide.index("from-zero") + 1 :][:3] == [
        "Pending",
        "False",
        "Unschedulable",
    ], wide  # the printer columns say why it is Pending
    [probe] = jobs(cluster, z_namespace)  # created without any node of the GPU type
    assert probe["metadata"]["labels"][LABEL_STAGE] == "probe"
    container = probe["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "2Gi", "nvidia.com/gpu": "1"}

    new_node("gpu-a100-0", {"nvidia.com/gpu.product": "NVIDIA-A100"}, gpus=1)
    status = wait_condition(cluster, z_namespace, "from-zero", "Ready", 120)
    assert status["phase"] == "Succeeded" and condition(status, "Ready")["reason"] == "DryRun", status
    assert "Unschedulable" not in json.dumps(status["conditions"])
    # Finished: nothing reads the probe Job any more, so it gets a TTL and Kubernetes removes it.
    wait_for(lambda: not jobs(cluster, z_namespace), 60, "the finished run's Jobs removed by their TTL", 0.5)
    scaling_operator.assert_clean()


def test_a_node_with_too_few_gpus_gives_up_after_the_wait(cluster, scaling_operator, z_namespace):
    doc = manifest("too-big", knobs=KNOB, targets=("NVIDIA-L40S",))  # the L40S node has 4 GPUs
    doc["spec"]["targets"][0]["gpusPerJob"] = 8
    apply(cluster, z_namespace, doc)
    status, seconds = unschedulable(cluster, z_namespace, "too-big", 60)
    print(f"\nUnschedulable on the run {seconds:.1f}s after apply")
    assert "Insufficient nvidia.com/gpu" in condition(status, "Reconciling")["message"], status
    began = time.monotonic()
    status = wait_condition(cluster, z_namespace, "too-big", "Stalled", UNSCHEDULABLE_SECONDS + 60)
    print(f"Stalled {time.monotonic() - began:.1f}s later (wait {UNSCHEDULABLE_SECONDS}s)")
    stall = condition(status, "Stalled")
    assert stall["reason"] == "Unschedulable" and "Insufficient nvidia.com/gpu" in stall["message"], stall
    assert f"gave up after {UNSCHEDULABLE_SECONDS}s" in stall["message"], stall
    assert status["phase"] == "Failed" and status["targets"][0]["stage"] == "failed", status
    # Its pending Job is stopped: an autoscaler is not left to bring up a node for a run that gave up.
    wait_for(
        lambda: not [j for j in jobs(cluster, z_namespace) if not j["metadata"].get("deletionTimestamp")],
        30,
        "the unschedulable Job stopped",
        0.5,
    )
    scaling_operator.assert_clean()
