"""What the GitOps sync options in docs/install.md rely on, on the real API server: a TuningRun's
spec cannot be updated in place by any method (apply, server-side apply as Flux does, or a plain
replace as Argo CD's `Replace=true` does), the refusal is a 422 Invalid naming the immutability (what
Flux's `force: true` recreates on), and a delete-and-create (`kubectl replace --force`, Argo CD's
`Force=true,Replace=true`) gives a new run with the new spec."""

import json
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import get_json


@pytest.fixture
def gitops_namespace(cluster, crd_installed):
    name = f"g-{uuid.uuid4().hex[:8]}"  # no operator watches it: only the API server's answers matter
    cluster.kubectl("create", "namespace", name)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false")


def test_a_changed_spec_is_refused_in_place_and_recreated_by_a_forced_replace(cluster, gitops_namespace, tmp_path):
    doc = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())
    doc["metadata"] = {"name": "synced", "namespace": gitops_namespace}
    first = tmp_path / "first.json"
    first.write_text(json.dumps(doc))
    cluster.kubectl("apply", "-f", str(first))
    before = get_json(cluster, "trun", "synced", "-n", gitops_namespace)
    doc["spec"]["search"]["maxRoutes"] = 7
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(doc))
    for how in (["apply"], ["apply", "--server-side", "--force-conflicts"], ["replace"]):
        done = cluster.kubectl(*how, "-f", str(changed), check=False)
        assert done.returncode != 0 and "spec is immutable" in done.stderr, (how, done.stderr)
        assert "is invalid" in done.stderr, done.stderr  # 422 Invalid: what Flux's force recreates on
    cluster.kubectl("replace", "--force", "-f", str(changed))
    after = get_json(cluster, "trun", "synced", "-n", gitops_namespace)
    assert after["spec"]["search"]["maxRoutes"] == 7 and after["metadata"]["uid"] != before["metadata"]["uid"]
