"""A TuningRun goes all the way: probe, Jobs per batch on nodes of its GPU type, entries aggregated
into cache ConfigMaps, confirmation, and the measured engine published with its provenance; the
published engine, loaded, reproduces the reference outputs."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from enginewright.api.cache import CacheEntry
from enginewright.api.fingerprint import driver_major
from enginewright.api.names import LABEL_STAGE
from enginewright.controller.shards import SHARD_LIMIT
from tests.cluster.harness import wait_for
from tests.conftest import get_json
from tests.operator.conftest import RUNS_BUCKET, apply, events, jobs, manifest, pod_log, wait_condition

KNOBS = [
    {"name": "graph_optimization_level", "values": ["basic", "all"]},
    {"name": "enable_mem_pattern", "values": ["0"]},
    {"name": "session.intra_op.allow_spinning", "values": ["0"]},
]


def published(s3, status_target: dict) -> tuple[bytes, dict]:
    key = status_target["engineUri"].removeprefix(f"s3://{RUNS_BUCKET}/")
    engine = s3.get_object(RUNS_BUCKET, key).read()
    folder = key.rsplit("/", 1)[0]
    provenance = json.loads(s3.get_object(RUNS_BUCKET, f"{folder}/provenance.json").read())
    return engine, provenance


def reproduces_references(engine: bytes, example, tmp_path, metric_threshold: float) -> float:
    """Load the published engine with the product's backend and compare to the reference outputs."""
    from enginewright.accuracy.metrics import loss
    from enginewright.backends import get_backend

    runner = get_backend("onnxruntime").load(engine, tmp_path)
    worst = 0.0
    for i in range(2):
        with np.load(example / f"inputs-{i}.npz") as inputs, np.load(example / f"references-{i}.npz") as refs:
            outputs = runner.run({k: inputs[k] for k in inputs.files})
            for name in refs.files:
                worst = max(worst, loss(outputs[name], refs[name], "cosine"))
    assert worst < metric_threshold
    return worst


@pytest.mark.parametrize("mode,routes", [("fast", 4), ("full", 8), ("mixed", None)])
def test_a_run_reaches_ready_and_publishes_its_winner(
    cluster, operator, run_namespace, s3, example_in_store, tmp_path, mode, routes
):
    doc = manifest(f"mlp-{mode}", mode=mode, knobs=KNOBS)
    builds = 2 if mode == "full" else 1  # full: its 8 routes built 2 at a time in each sweep Job
    doc["spec"]["search"]["buildParallelism"] = builds
    apply(cluster, run_namespace, doc)
    status = wait_condition(cluster, run_namespace, f"mlp-{mode}", "Ready", 300)
    assert status["phase"] == "Succeeded" and status["observedGeneration"] == 1
    (target,) = status["targets"]
    assert target["stage"] == "done" and target["engineUri"].endswith(".ort.tar")
    if routes:
        assert target["planned"] == routes
    assert target["done"] + target["failed"] + target["rejected"] == target["planned"]
    assert status["progress"] == f"{target['planned']}/{target['planned']}"
    # the decided winner, as a number, and the timing objective it measures
    assert status["bestSpeedup"] == f"{target['winner']['speedup']:.3f}x gpuTime"

    # The cache: every planned route once in the run's ConfigMaps, each shard within the limit.
    maps = [get_json(cluster, "configmap", name, "-n", run_namespace) for name in target["cacheConfigMaps"]]
    cached = [CacheEntry.from_json(v) for m in maps for v in m["data"].values()]
    assert len(cached) == len({e.route_id for e in cached}) == target["planned"]
    assert all(sum(len(k) + len(v) for k, v in m["data"].items()) <= SHARD_LIMIT for m in maps)
    assert all(m["metadata"]["ownerReferences"][0]["kind"] == "TuningRun" for m in maps)

    # The catalog: the measured engine, byte for byte, and provenance that says how it was chosen.
    engine, provenance = published(s3, target)
    assert hashlib.sha256(engine).hexdigest() == target["engineSha256"] == provenance["engine"]["sha256"]
    winner = next(e for e in cached if e.engine_sha256 == target["engineSha256"])
    assert provenance["route"]["route"] == winner.route and provenance["search"]["mode"] == mode
    assert provenance["model"]["sha256"] == hashlib.sha256((example_in_store / "mlp.onnx").read_bytes()).hexdigest()
    assert provenance["run"]["name"] == f"mlp-{mode}" and provenance["compiler"]["versions"]["compiler"].startswith(
        "onnxruntime-"
    )
    assert provenance["timing"]["defaultMs"] > 0 and provenance["timing"]["speedup"] > 0
    reproduces_references(engine, example_in_store, tmp_path, 1e-3)
    index = json.loads(s3.get_object(RUNS_BUCKET, f"catalog/mlp-{mode}/index.json").read())
    assert [e["sha256"] for e in index["entries"]] == [target["engineSha256"]]
    # The stack it was measured on, as the measuring process reported it (these nodes have no driver labels).
    versions = provenance["compiler"]["versions"]
    assert index["entries"][0]["stack"]["compilerVersion"] == versions["compiler"]
    assert index["entries"][0]["stack"].get("driverMajor") == driver_major(versions.get("driver")), index["entries"]

    # Jobs: deterministic names, labelled, no token, and a confirmation Job when candidates were kept.
    made = jobs(cluster, run_namespace)
    stages = {j["metadata"]["labels"][LABEL_STAGE] for j in made}
    assert {"probe", "stage1"} <= stages
    assert ("stage2" in stages) == (mode == "mixed" and any(len(e.knobs) > 1 for e in cached))
    for job in made:
        assert job["metadata"]["name"].startswith(f"mlp-{mode}-cpu-") and len(job["metadata"]["name"]) <= 63
        pod = job["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
        # room for each build at once (the operator's default requests are one build's), none to spare elsewhere
        at_once = builds if job["metadata"]["labels"][LABEL_STAGE] not in ("probe", "confirm") else 1
        (container,) = pod["containers"]
        assert container["resources"]["requests"] == {"cpu": str(at_once), "memory": f"{2 * at_once}Gi"}, job
        if at_once > 1:  # and its worker built that many at once
            assert f"built {at_once} at a time" in pod_log(cluster, run_namespace, job["metadata"]["name"])
    every = {"StageProbing", "StageStage1", "Published", "Succeeded"}  # (kopf posts each after its status)
    reasons = lambda: {e["reason"] for e in events(cluster, run_namespace, f"mlp-{mode}")}  # noqa: E731
    wait_for(lambda: every <= reasons(), 30, f"mlp-{mode}: events {sorted(every)}", interval=0.3, detail=reasons)
    operator.assert_clean()


def test_two_targets_are_measured_on_their_own_node_types_and_published_separately(
    cluster, operator, run_namespace, s3, example_in_store
):
    knobs = [{"name": "enable_mem_pattern", "values": ["0"]}]
    apply(cluster, run_namespace, manifest("two", knobs=knobs, targets=("NVIDIA-H200", "NVIDIA-L40S")))
    status = wait_condition(cluster, run_namespace, "two", "Ready", 300)
    by_type = {t["gpuType"]: t for t in status["targets"]}
    assert set(by_type) == {"NVIDIA-H200", "NVIDIA-L40S"}
    nodes = {
        n["metadata"]["name"]: n["metadata"]["labels"]["nvidia.com/gpu.product"]
        for n in get_json(cluster, "nodes")["items"]
    }
    pods = get_json(cluster, "pods", "-n", run_namespace)["items"]
    assert pods
    for pod in pods:  # where each pod actually ran, not what it asked for
        target = pod["metadata"]["labels"]["tuning.enginewright.io/target"]
        assert nodes[pod["spec"]["nodeName"]].lower() == target
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    uris = {t["engineUri"] for t in by_type.values()}
    assert len(uris) == 2 and any("/NVIDIA-H200/" in u for u in uris) and any("/NVIDIA-L40S/" in u for u in uris)
    for target in by_type.values():
        _, provenance = published(s3, target)
        assert provenance["gpu"]["product"] == target["gpuType"]
        assert nodes[provenance["gpu"]["node"]] == target["gpuType"]
    index = json.loads(s3.get_object(RUNS_BUCKET, "catalog/two/index.json").read())
    assert sorted(e["gpuProduct"] for e in index["entries"]) == ["NVIDIA-H200", "NVIDIA-L40S"]
    # No compiler library was ever loaded into the operator; its metrics count what it aggregated.
    mapped = Path(f"/proc/{operator.process.pid}/maps").read_text()
    for library in ("onnxruntime", "libtorch", "libnvinfer", "numpy"):
        assert library not in mapped
    text = operator.metrics()
    assert 'enginewright_routes_measured_total{outcome="ok"}' in text
    assert "enginewright_reconcile_seconds_count" in text and "enginewright_jobs_created_total" in text
    operator.assert_clean()
