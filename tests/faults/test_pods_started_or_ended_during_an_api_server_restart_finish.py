"""The test cluster's node agent (the kubelet of these tests) rides out a kube-apiserver restart, as a
kubelet does: a pod it is starting when the API server goes away still runs, and a pod that ends
while the API server is away is still reported Succeeded. Before, the first request that found the
API server away ended the pod's runner thread for good, and the pod (and its Job) stayed Pending or
Running forever: test_api_server_restart_mid_run failed that way (300 s at stage1, 0/3 routes)."""

import json
import time

from tests.cluster.harness import wait_for
from tests.conftest import get_json

SECRET = "agent-secret"


def pod(name: str, containers: list[dict], init: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": "cpu-0",  # bound by the test: only the node agent is under test
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "initContainers": init or [],
            "containers": containers,
        },
    }


def test_pods_started_or_ended_while_the_api_server_is_away_finish(cluster, namespace):
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
    for manifest in (starting, ending):  # (until the namespace's default ServiceAccount exists)
        wait_for(lambda: cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(manifest)), 30, "a pod")

    def phase(name: str) -> str | None:
        return (get_json(cluster, "pod", name, "-n", namespace).get("status") or {}).get("phase")

    def started() -> bool:  # the agent has taken both: the init container sleeps, the other one runs
        init_started = (get_json(cluster, "pod", "starting", "-n", namespace).get("status") or {}).get("startTime")
        return bool(init_started) and phase("ending") == "Running"

    wait_for(started, 60, "the node agent to start both pods", interval=0.2)
    cluster.stop_process("kube-apiserver")
    time.sleep(10)  # the outage itself, not a wait for a condition
    cluster.start_process("kube-apiserver")
    wait_for(
        lambda: phase("starting") == phase("ending") == "Succeeded",
        60,
        "both pods Succeeded",
        interval=0.5,
        detail=lambda: {n: get_json(cluster, "pod", n, "-n", namespace).get("status") for n in ("starting", "ending")},
    )
