"""The generated CRD installs with kubectl, becomes Established, and the API server enforces it."""

import json

from tests.conftest import get_json


def test_crd_is_established(cluster, crd_installed):
    crd = get_json(cluster, "crd", "tuningruns.tuning.enginewright.io")
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert crd["spec"]["names"]["shortNames"] == ["trun"]


def test_object_violating_the_schema_is_rejected(cluster, crd_installed, namespace):
    bad = {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningRun",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {
            "model": {"uri": "not-a-uri"},
            "compiler": {"name": "tensorrt"},
            "accuracy": {"disabled": True, "reason": "x"},
            "targets": [{"gpuType": "NVIDIA-H200"}],
        },
    }
    result = cluster.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert result.returncode != 0
    assert "spec.model.uri" in result.stderr
    listed = get_json(cluster, "trun", "-n", namespace)
    assert listed["items"] == []


def dry_run(cluster, namespace: str, name: str, **spec) -> object:
    """`kubectl apply --dry-run=server` of a TuningRun named `name` whose spec is a minimal one with
    `spec`'s fields put in (the API server validates it against the CRD; nothing is created)."""
    doc = {
        "apiVersion": "tuning.enginewright.io/v1alpha1",
        "kind": "TuningRun",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"uri": "s3://models/m.onnx"},
            "compiler": {"name": "onnxruntime"},
            "accuracy": {"disabled": True, "reason": "x"},
            "targets": [{"gpuType": "cpu", "gpusPerJob": 0}],
            **spec,
        },
    }
    return cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)


def test_resource_quantities_are_int_or_string(cluster, crd_installed, namespace):
    """`cpu: 2` is a quantity as in any pod spec; a word that is no quantity is refused at apply."""

    def target(requests):
        return [{"gpuType": "cpu", "gpusPerJob": 0, "resources": {"requests": requests}}]

    accepted = dry_run(cluster, namespace, "ints", targets=target({"cpu": 2, "memory": "4Gi"}))
    assert accepted.returncode == 0, accepted.stderr
    refused = dry_run(cluster, namespace, "word", targets=target({"cpu": "lots"}))
    assert refused.returncode != 0 and "spec.targets[0].resources.requests.cpu" in refused.stderr, refused.stderr


def test_build_parallelism_is_bounded_at_apply(cluster, crd_installed, namespace):
    """spec.search.buildParallelism: 1 to 16 routes built at once by a worker Job."""
    accepted = dry_run(cluster, namespace, "four", search={"buildParallelism": 4})
    assert accepted.returncode == 0, accepted.stderr
    for name, builds in (("none", 0), ("many", 17)):
        refused = dry_run(cluster, namespace, name, search={"buildParallelism": builds})
        assert refused.returncode != 0 and "spec.search.buildParallelism" in refused.stderr, refused.stderr
