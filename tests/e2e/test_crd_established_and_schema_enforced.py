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


def test_resource_quantities_are_int_or_string(cluster, crd_installed, namespace):
    """`cpu: 2` is a quantity as in any pod spec; a word that is no quantity is refused at apply."""

    def run(name, requests):
        return {
            "apiVersion": "tuning.enginewright.io/v1alpha1",
            "kind": "TuningRun",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "model": {"uri": "s3://models/m.onnx"},
                "compiler": {"name": "onnxruntime"},
                "accuracy": {"disabled": True, "reason": "x"},
                "targets": [{"gpuType": "cpu", "gpusPerJob": 0, "resources": {"requests": requests}}],
            },
        }

    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(run("ints", {"cpu": 2, "memory": "4Gi"})))
    refused = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(run("word", {"cpu": "lots"})), check=False
    )
    assert refused.returncode != 0 and "spec.targets[0].resources.requests.cpu" in refused.stderr, refused.stderr


def test_build_parallelism_is_bounded_at_apply(cluster, crd_installed, namespace):
    """spec.search.buildParallelism: 1 to 16 routes built at once by a worker Job."""

    def run(name, builds):
        return {
            "apiVersion": "tuning.enginewright.io/v1alpha1",
            "kind": "TuningRun",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "model": {"uri": "s3://models/m.pt2"},
                "compiler": {"name": "inductor"},
                "accuracy": {"disabled": True, "reason": "x"},
                "search": {"buildParallelism": builds},
                "targets": [{"gpuType": "NVIDIA-H200"}],
            },
        }

    cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(run("four", 4)))
    for name, builds in (("none", 0), ("many", 17)):
        refused = cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", input=json.dumps(run(name, builds)), check=False
        )
        assert refused.returncode != 0 and "spec.search.buildParallelism" in refused.stderr, refused.stderr
