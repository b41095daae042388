"""`kubectl apply` refuses a TuningRun whose model or reference URIs climb out of their prefix
(`..`), have empty or '.' segments, or carry control characters; plain keys are accepted."""

import copy
import json
from pathlib import Path

import pytest
import yaml

BASE = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())


def run_with(namespace: str, name: str, *, model: str | None = None, inputs: str | None = None) -> dict:
    doc = copy.deepcopy(BASE)
    doc["metadata"] = {"name": name, "namespace": namespace}
    if model is not None:
        doc["spec"]["model"]["uri"] = model
    if inputs is not None:
        doc["spec"]["accuracy"]["pairs"][1]["inputs"] = inputs
    return doc


@pytest.mark.parametrize(
    "uri",
    [
        "s3://bucket/../../etc/passwd",
        "s3://bucket/a//model.onnx",
        "s3://bucket/./model.onnx",
        "s3://bucket/models/",
        "s3://bucket/a\u0007b",
    ],
)
def test_unsafe_uris_are_refused_with_a_message(cluster, crd_installed, namespace, uri):
    for field, doc in (
        ("spec.model.uri", run_with(namespace, "bad-model", model=uri)),
        ("spec.accuracy.pairs[1].inputs", run_with(namespace, "bad-pair", inputs=uri)),
    ):
        result = cluster.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)
        assert result.returncode != 0, f"{field}={uri!r} was accepted"
        assert field in result.stderr and "no empty, '.' or '..' key segments" in result.stderr, result.stderr
    assert json.loads(cluster.kubectl("get", "trun", "-n", namespace, "-o", "json").stdout)["items"] == []


def test_plain_keys_with_dots_in_names_are_accepted(cluster, crd_installed, namespace):
    doc = run_with(namespace, "dots", model="s3://bucket/.cache/v1..2/model.onnx", inputs="s3://bucket/x../in.npz")
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
