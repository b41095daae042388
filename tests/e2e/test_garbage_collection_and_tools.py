"""The controller-manager's garbage collector runs, and the cached helm build works."""

import json
import subprocess

from tests.conftest import get_json, wait_for


def test_deleting_the_owner_garbage_collects_its_job(cluster, namespace):
    cluster.kubectl("create", "configmap", "owner", "-n", namespace)
    owner = get_json(cluster, "configmap", "owner", "-n", namespace)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "owned",
            "namespace": namespace,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
            ],
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x", "command": ["true"]}]}
            },
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(job))
    assert get_json(cluster, "job", "owned", "-n", namespace)["metadata"]["name"] == "owned"
    cluster.kubectl("delete", "configmap", "owner", "-n", namespace)
    wait_for(
        lambda: cluster.kubectl("get", "job", "owned", "-n", namespace, check=False).returncode != 0,
        60,
        "the garbage collector to delete the owned Job",
        0.3,
    )


def test_helm_runs_from_the_cached_build(cluster):
    out = subprocess.run(
        [str(cluster.binaries / "helm"), "version", "--short"], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("v3.")
