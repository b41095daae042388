"""The tests read the cluster in their own process (`LocalCluster.get`, behind `get_json`) instead of
starting kubectl for each poll: what they read must be what `kubectl get -o json` prints, for a named
object, a list with a label selector, a custom resource by its short name (applied after the first
read, so the reader learns the new kind), a cluster-scoped kind, and a name that is not there."""

import json

import pytest

from tests.conftest import get_json


def kubectl_json(cluster, *args: str) -> dict:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_the_harness_reads_objects_as_kubectl_prints_them(cluster, namespace):
    for name, side in (("left-one", "left"), ("right-one", "right")):
        cluster.kubectl("create", "configmap", name, "-n", namespace, f"--from-literal=side={side}")
        cluster.kubectl("label", "configmap", name, "-n", namespace, f"side={side}")
    assert cluster.get("nodes")["items"]  # read before the CRDs exist: discovery without them

    assert get_json(cluster, "cm", "left-one", "-n", namespace) == kubectl_json(
        cluster, "cm", "left-one", "-n", namespace
    )
    listed = get_json(cluster, "configmaps", "-n", namespace, "-l", "side=left")
    assert [item["metadata"]["name"] for item in listed["items"]] == ["left-one"]
    assert listed == kubectl_json(cluster, "configmaps", "-n", namespace, "-l", "side=left")
    assert get_json(cluster, "nodes") == kubectl_json(cluster, "nodes")

    cluster.install_crds()
    assert get_json(cluster, "trun", "-n", namespace) == kubectl_json(cluster, "trun", "-n", namespace)
    crd = "tuningruns.tuning.enginewright.io"
    assert get_json(cluster, "crd", crd)["spec"]["names"]["shortNames"] == ["trun"]
    assert get_json(cluster, "crd", crd) == kubectl_json(cluster, "crd", crd)

    with pytest.raises(RuntimeError, match="not found"):
        get_json(cluster, "configmap", "absent", "-n", namespace)
    with pytest.raises(RuntimeError, match="doesn't have a resource type"):
        cluster.get("nonesuch")
