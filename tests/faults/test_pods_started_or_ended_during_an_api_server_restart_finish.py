"""The test cluster's node agent (the kubelet of these tests) rides out a kube-apiserver restart, as a
kubelet does: a pod it is starting when the API server goes away still runs, and a pod that ends
while the API server is away is still reported Succeeded. Before, the first request that found the
API server away ended the pod's runner thread for good, and the pod (and its Job) stayed Pending or
Running forever: test_api_server_restart_mid_run failed that way (300 s at stage1, 0/3 routes).
Likewise a pod deleted just before the outage, whose process ends ~4 s into it, is still reported
Failed and its deletion completed (before, the agent gave up on a deleted pod's Failed report at the
first refusal: a Job whose pod failure policy waits for Failed never replaced the pod)."""

import json
import time

from tests.cluster.harness import wait_for
from tests.conftest import get_json

SECRET = "agent-secret"


KEEP = "enginewright.test/keep"  # a finalizer of the test's: the deleted pod stays readable, as a Job's does


def pod(name: str, containers: list[dict], init: list[dict] | None = None, finalizers=()) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": list(finalizers)},
        "spec": {
            "nodeName": "cpu-0",  # bound by the test: only the node agent is under test
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "initContainers": init or [],
            "containers": containers,
        },
    }


def test_pods_started_or_ended_while_the_api_server_is_away_finish(cluster, namespace, tmp_path):
    cluster.kubectl("create", "secret", "generic", SECRET, "-n", namespace, "--from-literal=key=expected")
    # Starts its main container (and reads its secretKeyRef) ~4 s into the outage.
    starting = pod(
        "starting",
        init=[{"name": "wait", "image": "none", "command": ["sleep", "4"]}],
        containers=[
            {
                "name": "main",
                "image": "none",
                "command": ["sh", "-c", 'test "$KEY" = expected'],
                "env": [{"name": "KEY", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "key"}}}],
            }
        ],
    )
    # Ends ~4 s into the outage: its Succeeded can only be reported after it.
    ending = pod("ending", containers=[{"name": "main", "image": "none", "command": ["sleep", "4"]}])
    # Deleted before the outage; told to stop (SIGTERM), it says so in a file and ends ~4 s later,
    # into the outage: its Failed can only be reported after it.
    stopped = tmp_path / "stopped"
    deleted = pod(
        "deleted",
        finalizers=[KEEP],
        containers=[
            {
                "name": "main",
                "image": "none",
                "command": ["sh", "-c", f'trap "touch {stopped}; sleep 4; exit 143" TERM; while :; do sleep 0.2; done'],
            }
        ],
    )
    for manifest in (starting, ending, deleted):  # (until the namespace's default ServiceAccount exists)
        wait_for(lambda: cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(manifest)), 30, "a pod")

    def phase(name: str) -> str | None:
        return (get_json(cluster, "pod", name, "-n", namespace).get("status") or {}).get("phase")

    def started() -> bool:  # the agent has taken all three: the init container sleeps, the others run
        init_started = (get_json(cluster, "pod", "starting", "-n", namespace).get("status") or {}).get("startTime")
        return bool(init_started) and phase("ending") == phase("deleted") == "Running"

    wait_for(started, 60, "the node agent to start the pods", interval=0.2)
    cluster.kubectl("delete", "pod", "deleted", "-n", namespace, "--wait=false")
    wait_for(stopped.exists, 30, "the deleted pod's process to be told to stop", interval=0.1)
    cluster.stop_process("kube-apiserver")
    time.sleep(10)  # the outage itself, not a wait for a condition
    cluster.start_process("kube-apiserver")
    names = ("starting", "ending", "deleted")

    def state() -> dict:
        return {n: get_json(cluster, "pod", n, "-n", namespace).get("status") for n in names}

    try:
        wait_for(
            lambda: phase("starting") == phase("ending") == "Succeeded" and phase("deleted") == "Failed",
            60,
            "two pods Succeeded and the deleted one Failed",
            interval=0.5,
            detail=state,
        )
        # then the agent's own delete (grace 0: the kubelet's "it has stopped") went through too
        wait_for(
            lambda: (
                get_json(cluster, "pod", "deleted", "-n", namespace)["metadata"].get("deletionGracePeriodSeconds") == 0
            ),
            30,
            "the deleted pod's final delete",
            interval=0.5,
        )
    finally:
        unkept = '[{"op": "remove", "path": "/metadata/finalizers"}]'
        cluster.kubectl("patch", "pod", "deleted", "-n", namespace, "--type=json", "-p", unkept, check=False)
