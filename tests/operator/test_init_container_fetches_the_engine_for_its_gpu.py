"""The init-container pattern on the local control plane: the operator publishes a run for two GPU
types, then the pod of the example Deployment (examples/inference-deployment.yaml) is created; it
lands on the node labelled NVIDIA-H200, its init container runs `enginewright fetch` into the
emptyDir, and the inference container loads the engine published for the H200 — not the L40S one.

The Deployment is the example's, with what this cluster needs changed (its containers' `python`, the
store endpoint, the GPU product given instead of read from NVML, the node type pinned)."""

import copy
import re
import sys
from pathlib import Path

import yaml

from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, apply, manifest, wait_condition

MODEL = "mlp-served"


def example_for_this_cluster(cluster, gpu: str) -> dict:
    """The example Deployment as the node agent can run it: its containers' `python` is this
    interpreter (the agent runs commands as host processes, not images), the store is the test's
    S3 server with the namespace's store Secret, and — this machine has no GPU for NVML, so
    `--gpu auto` cannot answer here — the GPU product is given and the pod pinned to that node type."""
    deployment = yaml.safe_load(Path("examples/inference-deployment.yaml").read_text())
    assert deployment["kind"] == "Deployment"
    doc = copy.deepcopy(deployment)
    pod = doc["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"nvidia.com/gpu.product": gpu}
    (fetch,) = pod["initContainers"]
    assert fetch["command"][:3] == ["python", "-m", "enginewright"] and "auto" in fetch["args"]
    fetch["command"][0] = sys.executable
    fetch["args"] = [
        f"s3://{RUNS_BUCKET}/catalog" if a.startswith("s3://") else MODEL if a == "mlp" else a for a in fetch["args"]
    ]
    env = {e["name"]: e for e in fetch["env"]}
    env["GPU_PRODUCT"]["value"] = gpu
    env["ENGINEWRIGHT_S3_ENDPOINT"]["value"] = cluster.s3_endpoint
    env["ENGINEWRIGHT_S3_SECURE"]["value"] = "false"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        env[name]["valueFrom"]["secretKeyRef"]["name"] = "enginewright-store"
    (inference,) = pod["containers"]
    assert inference["command"][0] == "python"
    inference["command"][0] = sys.executable
    return doc


def test_the_init_container_fetches_the_engine_published_for_its_nodes_gpu(cluster, operator, run_namespace):
    run = manifest(
        "served",
        knobs=[{"name": "enable_mem_pattern", "values": ["0"]}],
        targets=("NVIDIA-H200", "NVIDIA-L40S"),
        publish={"modelName": MODEL},
    )
    apply(cluster, run_namespace, run)
    status = wait_condition(cluster, run_namespace, "served", "Ready", 300)
    published = {t["gpuType"]: t["engineSha256"] for t in status["targets"]}
    uris = {t["gpuType"]: t["engineUri"] for t in status["targets"]}
    # Each GPU type has its own engine object. Their bytes may be the same (both CPU builds of one
    # winning route, finished in the same second: CI saw one sha256 for both), so which entry the pod
    # fetched is read from the provenance it serves (its GPU type and run), not from the sha256 alone.
    assert set(published) == {"NVIDIA-H200", "NVIDIA-L40S"} and uris["NVIDIA-H200"] != uris["NVIDIA-L40S"]

    # The example itself is a valid Deployment for the API server, as written.
    checked = cluster.kubectl(
        "apply", "--dry-run=server", "-n", run_namespace, "-f", "examples/inference-deployment.yaml"
    )
    assert "deployment.apps/mlp-inference created (server dry run)" in checked.stdout
    apply(cluster, run_namespace, example_for_this_cluster(cluster, "NVIDIA-H200"))
    logs = cluster.pod_logs
    seen: dict = {}

    def serving() -> bool:
        pods = get_json(cluster, "pods", "-n", run_namespace, "-l", "app.kubernetes.io/name=mlp-inference")["items"]
        pod = seen["pod"] = pods[0] if pods else None
        served = logs / f"{run_namespace}_{pod['metadata']['name']}_inference.log" if pod else None
        if served and served.exists() and "serving" in served.read_text():
            return True
        if pod and (pod.get("status") or {}).get("phase") == "Failed":
            raise AssertionError(f"the pod failed: {pod['status']}\n{fetch_said()}")
        return False

    def fetch_said() -> str:
        pod = seen.get("pod")
        fetch_log = logs / f"{run_namespace}_{pod['metadata']['name']}_fetch-engine.log" if pod else None
        return fetch_log.read_text() if fetch_log and fetch_log.exists() else "(no fetch log)"

    wait_for(
        serving,
        180,
        "the inference container to serve",
        interval=0.5,
        detail=lambda: f"{seen.get('pod') and seen['pod'].get('status')}\n{fetch_said()}",
    )

    pod = seen["pod"]
    served = logs / f"{run_namespace}_{pod['metadata']['name']}_inference.log"
    node = get_json(cluster, "node", pod["spec"]["nodeName"])
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 0
    fetched = (logs / f"{run_namespace}_{pod['metadata']['name']}_fetch-engine.log").read_text()
    assert f"sha256 {published['NVIDIA-H200']}" in fetched and "NVIDIA-H200" in fetched
    line = re.search(r"serving (\S+) ([0-9a-f]{64}) gpu (\S+) run (\S+)", served.read_text())
    assert line, served.read_text()
    assert line.group(1) == "engine.ort.tar" and line.group(2) == published["NVIDIA-H200"]
    assert line.group(3) == "NVIDIA-H200" and line.group(4) == status_uid(cluster, run_namespace)
    operator.assert_clean()


def status_uid(cluster, namespace: str) -> str:
    return get_json(cluster, "trun", "served", "-n", namespace)["metadata"]["uid"]
