"""Jobs with GPU-type node selectors run on the matching fake node, through the real scheduler,
Job controller and the node agent; failing and unschedulable Jobs end the way Kubernetes says."""

import json
from pathlib import Path

from tests.conftest import get_json, wait_for


def job(name: str, namespace: str, command: list[str], gpu_type: str, backoff: int = 0, env=None) -> dict:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "backoffLimit": backoff,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"nvidia.com/gpu.product": gpu_type},
                    "containers": [
                        {
                            "name": "main",
                            "image": "enginewright/worker:test",
                            "command": command,
                            "env": env or [],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            },
        },
    }


def job_condition(cluster, namespace, name, kind):
    conditions = get_json(cluster, "job", name, "-n", namespace).get("status", {}).get("conditions", [])
    return any(c["type"] == kind and c["status"] == "True" for c in conditions)


def test_h200_job_runs_on_the_h200_node_and_completes(cluster, namespace, tmp_path):
    marker = tmp_path / "ran.txt"
    cluster.kubectl("create", "secret", "generic", "creds", "-n", namespace, "--from-literal=token=s3cr3t")
    env = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    manifest = job("h200", namespace, ["sh", "-c", f'echo "$NODE $TOKEN" > {marker}'], "NVIDIA-H200", env=env)
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))
    wait_for(lambda: job_condition(cluster, namespace, "h200", "Complete"), 60, "Job h200 Complete", 0.3)
    pods = get_json(cluster, "pods", "-n", namespace, "-l", "job-name=h200")["items"]
    assert [p["spec"]["nodeName"] for p in pods] == ["gpu-h200-0"]
    assert pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert marker.read_text().strip() == "gpu-h200-0 s3cr3t"


def test_failing_job_reaches_failed_after_backoff_limit(cluster, namespace):
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps(job("fails", namespace, ["sh", "-c", "exit 3"], "NVIDIA-L40S", backoff=1))
    )
    wait_for(lambda: job_condition(cluster, namespace, "fails", "Failed"), 90, "Job fails Failed", 0.3)
    pods = get_json(cluster, "pods", "-n", namespace, "-l", "job-name=fails")["items"]
    assert len(pods) == 2  # the first try and one retry (backoffLimit 1)
    assert {p["spec"]["nodeName"] for p in pods} == {"gpu-l40s-0"}
    codes = [p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods]
    assert codes == [3, 3]
    reason = [
        c for c in get_json(cluster, "job", "fails", "-n", namespace)["status"]["conditions"] if c["type"] == "Failed"
    ][0]["reason"]
    assert reason == "BackoffLimitExceeded"


def test_job_for_a_gpu_type_no_node_has_stays_pending_unschedulable(cluster, namespace):
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job("b200", namespace, ["true"], "NVIDIA-B200")))

    def unschedulable():
        pods = get_json(cluster, "pods", "-n", namespace, "-l", "job-name=b200")["items"]
        if not pods:
            return None
        conditions = pods[0]["status"].get("conditions", [])
        return [c for c in conditions if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"] and pods[0]

    pod = wait_for(unschedulable, 60, "an Unschedulable pod condition", 0.3)
    assert pod["status"]["phase"] == "Pending"
    assert "node(s) didn't match Pod's node affinity/selector" in json.dumps(pod["status"]["conditions"])


def test_deleting_a_running_pod_kills_its_process(cluster, namespace, tmp_path):
    started = tmp_path / "started"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            job("sleeper", namespace, ["sh", "-c", f"echo $$ > {started}; exec sleep 300"], "NVIDIA-H200")
        ),
    )
    wait_for(lambda: started.exists() and started.read_text().strip(), 60, "the pod process to start", 0.2)
    pid = int(started.read_text())
    cluster.kubectl("delete", "job", "sleeper", "-n", namespace, "--cascade=foreground", "--wait=false")

    def gone():
        return not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()

    wait_for(gone, 60, f"process {pid} to be killed", 0.2)
