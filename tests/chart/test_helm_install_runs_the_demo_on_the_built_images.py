"""`helm install` of charts/enginewright with the locally built images, as a user installs it: the
chart's CRDs, the operator Deployment running the operator image (in-cluster config from its
projected ServiceAccount token, read-only root, non-root), and the demo TuningRun
(examples/tuningrun-demo.yaml: mixed search, two GPU types) reaching Ready=True with its worker Jobs
running the worker image."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.chart.chart import CHART, helm
from tests.cluster.harness import REPO, free_port, wait_for
from tests.cluster.image_cluster import RUNS_BUCKET, put_example, started_image_cluster, store_secret
from tests.cluster.images import image_name, version
from tests.operator.conftest import wait_condition

RELEASE, RELEASE_NS, RUN_NS, RUN = "ew", "enginewright-system", "demo", "demo-mlp"


@pytest.fixture(scope="module")
def image_cluster(tmp_path_factory):
    with started_image_cluster() as cluster:
        cluster.s3 = put_example(cluster, tmp_path_factory.mktemp("example"))
        yield cluster


def get(cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_helm_install_runs_the_demo_to_ready_on_the_built_images(image_cluster):
    cluster = image_cluster
    for ns in (RELEASE_NS, RUN_NS):
        cluster.kubectl("create", "namespace", ns)
    store_secret(cluster, RELEASE_NS, "enginewright-operator-store")  # the operator's own access
    store_secret(cluster, RUN_NS)  # the workers' Secret in the run's namespace
    values = {
        "store.endpoint": cluster.s3_endpoint,
        "store.tls": False,
        "watchNamespaces": [RUN_NS],
        "image.repository": "enginewright/operator",
        "image.tag": version(),
        "workerImages": {"onnxruntime": image_name("worker-onnxruntime")},
        "metrics.port": free_port(),
        "healthPort": free_port(),
        "reconcileIntervalSeconds": 1,
        "hostNetwork": True,
    }

    def operator_log() -> str:
        return "\n".join(p.read_text(errors="replace") for p in cluster.pod_logs.glob(f"{RELEASE_NS}_*_operator.log"))

    installed = helm(
        cluster,
        "install",
        RELEASE,
        str(CHART),
        "-n",
        RELEASE_NS,
        "--wait",
        "--timeout",
        "180s",
        *[f"--set-json={k}={json.dumps(v)}" for k, v in values.items()],
    )
    assert "STATUS: deployed" in installed.stdout and "Next steps" in installed.stdout  # NOTES.txt
    get(cluster, "crd", "tuningruns.tuning.enginewright.io")  # from the chart's crds/

    (pod,) = get(cluster, "pods", "-n", RELEASE_NS, "-l", "app.kubernetes.io/component=operator")["items"]
    (status,) = pod["status"]["containerStatuses"]
    assert status["image"] == image_name("operator")
    assert status["imageID"] == cluster.image_store.image(image_name("operator")).digest
    assert pod["spec"]["serviceAccountName"] == "ew-enginewright"

    def healthy():  # the endpoint the chart's probes use (the test node runs pods on the host network)
        restarts = get(cluster, "pod", pod["metadata"]["name"], "-n", RELEASE_NS)["status"]["containerStatuses"][0]
        assert restarts["restartCount"] == 0, f"the operator restarted: {operator_log()[-3000:]}"
        with urllib.request.urlopen(f"http://127.0.0.1:{values['healthPort']}/healthz", timeout=2) as resp:
            return resp.status == 200

    try:
        wait_for(healthy, 90, "the operator pod's /healthz", 0.5)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{operator_log()[-4000:]}") from None

    cluster.kubectl("apply", "-n", RUN_NS, "-f", str(REPO / "examples/tuningrun-demo.yaml"))
    try:
        run = wait_condition(cluster, RUN_NS, RUN, "Ready", 420)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{operator_log()[-4000:]}") from None
    assert run["phase"] == "Succeeded" and len(run["targets"]) == 2
    for target in run["targets"]:
        assert cluster.s3.stat_object(RUNS_BUCKET, target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/")).size > 0
    workers = get(cluster, "pods", "-n", RUN_NS, "-l", f"tuning.enginewright.io/run={RUN}")["items"]
    assert workers and {p["status"]["containerStatuses"][0]["image"] for p in workers} == {
        image_name("worker-onnxruntime")
    }
    log = operator_log()
    assert "Traceback" not in log and "Forbidden" not in log, log[-4000:]
    helm(cluster, "uninstall", RELEASE, "-n", RELEASE_NS, "--wait")
