"""The Inductor worker image built here (images/worker-inductor-cpu: PyPI's torch on CPU) runs the
operator's Jobs: a cluster whose node agent runs pods from images, the operator with the image's
worker command, an Inductor run of a tiny exported MLP with the eager route to Ready. Every worker pod
ran that image's digest, and the default route was compiled inside it (Inductor's C++ code generation
needs the image's g++ and Python headers) while the eager route was not."""

from __future__ import annotations

import json

import pytest

from enginewright.api.cache import CacheEntry
from tests.cluster.image_cluster import MODELS_BUCKET, RUNS_BUCKET, ImageCluster, require_images, store_secret
from tests.cluster.images import image_name
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import apply, wait_condition
from tests.operator.inductor_mlp import inductor_run, put_mlp

NAMESPACE = "inductor-images"
IMAGE = image_name("worker-inductor-cpu")


@pytest.fixture(scope="module")
def image_cluster(tmp_path_factory):
    from minio import Minio

    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY
    images = require_images()
    cluster = ImageCluster(images=images.layout)
    cluster.start()
    try:
        cluster.kubectl("apply", "--server-side", "-f", "crds/")
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/tuningruns.tuning.enginewright.io")
        cluster.s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
        put_mlp(cluster.s3, tmp_path_factory.mktemp("inductor-mlp"), MODELS_BUCKET, RUNS_BUCKET)
        cluster.kubectl("create", "namespace", NAMESPACE)
        store_secret(cluster, NAMESPACE)
        cluster.image_store = images
        yield cluster
    finally:
        cluster.stop()
        cluster.remove()


def test_an_inductor_run_reaches_ready_with_workers_from_the_inductor_image(image_cluster, tmp_path):
    operator = start_operator(image_cluster, tmp_path / "operator.log", RUNS_BUCKET,
                              ENGINEWRIGHT_WORKER_COMMAND="python -m enginewright.worker",
                              ENGINEWRIGHT_WORKER_IMAGE_INDUCTOR=IMAGE, ENGINEWRIGHT_NAMESPACES=NAMESPACE)
    try:
        apply(image_cluster, NAMESPACE, inductor_run("mlp-inductor-image", "fast",
                                                     [{"name": "compile", "values": ["false"]}], MODELS_BUCKET))
        status = wait_condition(image_cluster, NAMESPACE, "mlp-inductor-image", "Ready", 420)
    finally:
        operator.stop()
    assert status["phase"] == "Succeeded"
    s3 = image_cluster.s3
    entries = [CacheEntry.from_json(s3.get_object(RUNS_BUCKET, o.object_name).read())
               for o in s3.list_objects(RUNS_BUCKET, f"runs/{NAMESPACE}/mlp-inductor-image-", recursive=True)
               if "/entries/" in o.object_name]
    by_route = {e.route: e for e in entries}
    assert sorted(by_route) == ["", "-compile=false"]
    assert all(e.outcome.value == "ok" for e in entries), [(e.route, e.error) for e in entries]
    assert by_route[""].load_info["compiled"] == 1 and by_route["-compile=false"].load_info["compiled"] == 0
    assert by_route[""].versions.compiler.startswith("inductor-torch-")
    worker = image_cluster.image_store.image(IMAGE)
    pods = json.loads(image_cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l",
                                            "tuning.enginewright.io/run=mlp-inductor-image", "-o", "json").stdout)["items"]
    assert pods
    for pod in pods:
        (container,) = pod["status"]["containerStatuses"]
        assert container["image"] == IMAGE and container["imageID"] == worker.digest
        assert container["state"]["terminated"]["exitCode"] == 0
    assert "Traceback" not in operator.log_text()
