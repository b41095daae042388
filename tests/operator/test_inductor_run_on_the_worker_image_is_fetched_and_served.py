"""An Inductor TuningRun through the operator, its worker Jobs run from the Inductor worker image built
here (images/worker-inductor-cpu: PyPI's torch on CPU) by the node agent in image mode: a tiny MLP
exported with torch.export, mixed search with the eager route (`compile=false`) beside a compiled
knob, a confirmation round, the winner published. `enginewright fetch` brings the engine back from
the catalog, and the fetched engine, loaded here (the test venv's torch), reproduces the reference
outputs. Every worker pod ran the image's digest; the compiled routes were compiled inside it
(Inductor's C++ code generation needs the image's g++ and Python headers), the eager one was not."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import numpy as np
import pytest

from enginewright.api.cache import CacheEntry
from enginewright.api.contracts import ConfirmationResult, Provenance
from tests.cluster.harness import wait_for
from tests.cluster.image_cluster import MODELS_BUCKET, RUNS_BUCKET, started_image_cluster
from tests.cluster.images import image_name
from tests.cluster.operator_process import start_operator
from tests.operator.conftest import apply, wait_condition
from tests.operator.inductor_mlp import PAIRS, THRESHOLD, inductor_run, put_mlp

NAMESPACE = "inductor"
RUN = "inductor-mlp"
IMAGE = image_name("worker-inductor-cpu")
KNOBS = [{"name": "compile", "values": ["false"]}, {"name": "freezing", "values": ["true"]}]


@pytest.fixture(scope="module")
def image_cluster(tmp_path_factory):
    from minio import Minio

    from tests.cluster.harness import S3_ACCESS_KEY, S3_SECRET_KEY

    with started_image_cluster(NAMESPACE) as cluster:
        cluster.s3 = Minio(cluster.s3_endpoint, access_key=S3_ACCESS_KEY, secret_key=S3_SECRET_KEY, secure=False)
        cluster.mlp = put_mlp(cluster.s3, tmp_path_factory.mktemp("inductor-mlp"), MODELS_BUCKET, RUNS_BUCKET)
        yield cluster


def stored(s3, part: str) -> list[str]:
    return [
        o.object_name
        for o in s3.list_objects(RUNS_BUCKET, f"runs/{NAMESPACE}/{RUN}-", recursive=True)
        if part in o.object_name
    ]


def test_mixed_run_with_the_eager_route_on_the_inductor_image_is_fetched_and_serves_the_references(
    image_cluster, tmp_path
):
    from enginewright.accuracy.metrics import loss
    from enginewright.backends import get_backend

    cluster, s3 = image_cluster, image_cluster.s3
    operator = start_operator(
        cluster,
        tmp_path / "operator.log",
        RUNS_BUCKET,
        ENGINEWRIGHT_WORKER_COMMAND="python -m enginewright.worker",
        ENGINEWRIGHT_WORKER_IMAGE_INDUCTOR=IMAGE,
        ENGINEWRIGHT_NAMESPACES=NAMESPACE,
    )
    try:
        apply(cluster, NAMESPACE, inductor_run(RUN, "mixed", KNOBS, MODELS_BUCKET))
        status = wait_condition(cluster, NAMESPACE, RUN, "Ready", 420)
    finally:
        operator.stop()
    assert "Traceback" not in operator.log_text()
    assert status["phase"] == "Succeeded"
    (target,) = status["targets"]
    assert target["stage"] == "done" and target["engineUri"].endswith(".inductor.tar"), target

    # every route measured, the eager one included; compiled inside the image, the eager one not
    entries = {
        e.route: e
        for e in (CacheEntry.from_json(s3.get_object(RUNS_BUCKET, key).read()) for key in stored(s3, "/entries/"))
    }
    assert {route: e.outcome.value for route, e in entries.items()} == {
        "": "ok",
        "-compile=false": "ok",
        "-freezing=true": "ok",
    }, {r: e.error for r, e in entries.items()}
    assert entries[""].load_info["compiled"] == 1 and entries["-freezing=true"].load_info["compiled"] == 1
    assert entries["-compile=false"].load_info["compiled"] == 0

    # the worker pods: the Inductor image's digest, its non-root user, all exited 0; one confirmed
    worker = cluster.image_store.image(IMAGE)

    def all_ended():  # the run is Ready once the confirmation's result is stored: its pod may still be exiting
        items = json.loads(
            cluster.kubectl(
                "get", "pods", "-n", NAMESPACE, "-l", f"tuning.enginewright.io/run={RUN}", "-o", "json"
            ).stdout
        )["items"]
        return (
            items
            if all("terminated" in c["state"] for p in items for c in p["status"].get("containerStatuses", []))
            else None
        )

    pods = wait_for(all_ended, 60, "every worker pod of the run terminated", interval=0.5)
    stages = sorted(p["metadata"]["labels"]["tuning.enginewright.io/stage"] for p in pods)
    assert stages.count("confirm") == 1 and "probe" in stages, stages
    for pod in pods:
        (container,) = pod["status"]["containerStatuses"]
        assert container["image"] == IMAGE and container["imageID"] == worker.digest
        assert container["state"].get("terminated", {}).get("exitCode") == 0, (pod["metadata"]["name"], pod["status"])
    (confirm_key,) = stored(s3, "/confirm/")
    confirmation = ConfirmationResult.model_validate_json(s3.get_object(RUNS_BUCKET, confirm_key).read())
    assert len(confirmation.rounds) >= 3 and all(len(r) == 3 for r in confirmation.rounds.values())

    # fetch: the catalog's engine for a CPU node with this torch, verified, with its provenance
    dest = tmp_path / "fetched"
    fetched = subprocess.run(
        [
            sys.executable,
            "-m",
            "enginewright",
            "fetch",
            "--catalog",
            f"s3://{RUNS_BUCKET}",
            "--model",
            RUN,
            "--gpu",
            "cpu",
            "--dest",
            str(dest),
        ],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.startswith(f"fetched {target['engineUri'].rsplit('/', 1)[0]}")
    (engine_file,) = [p for p in dest.iterdir() if p.name.startswith("engine")]
    provenance = Provenance.model_validate_json((dest / "provenance.json").read_text())
    engine = engine_file.read_bytes()
    assert hashlib.sha256(engine).hexdigest() == provenance.engine.sha256 == target["engineSha256"]
    assert provenance.route.route == target["winner"]["route"]
    assert (provenance.compiler.name, provenance.search.mode, provenance.search.routes_measured) == (
        "inductor",
        "mixed",
        3,
    )
    # what the build chose by timing, read from the engine's load: nothing on a CPU (no Triton kernels)
    tuned = provenance.engine.tuned_at_build
    assert tuned is not None and (tuned.kernels, tuned.by_coordinate_descent) == (0, 0), tuned

    # the fetched engine, loaded in this process, reproduces the reference outputs
    runner = get_backend("inductor").load(engine, tmp_path / "load")
    try:
        worst = 0.0
        for i in range(PAIRS):
            with (
                np.load(cluster.mlp / f"inputs-{i}.npz") as inputs,
                np.load(cluster.mlp / f"references-{i}.npz") as refs,
            ):
                outputs = runner.run({k: inputs[k] for k in inputs.files})
                worst = max(worst, *(loss(outputs[name], refs[name], "cosine") for name in refs.files))
    finally:
        runner.close()
    assert worst < THRESHOLD
