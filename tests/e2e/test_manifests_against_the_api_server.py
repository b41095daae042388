"""The example manifests apply; deliberately invalid ones are refused by `kubectl apply` itself,
with a message naming the field (OpenAPI schema and CEL rules of the generated CRD)."""

import copy
import json
from pathlib import Path

import pytest
import yaml

EXAMPLES = sorted(Path("examples").glob("tuningrun-*.yaml"))
BASE = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())


def mutate(path: str, value):
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node = doc
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value
    return doc


DELETE = object()

INVALID = {
    "negative threshold": (mutate("spec.accuracy.threshold", -1), "spec.accuracy.threshold"),
    "zero threshold": (mutate("spec.accuracy.threshold", 0), "spec.accuracy.threshold"),
    "dryRun with mixed": (
        mutate("spec.search", {**BASE["spec"]["search"], "mode": "mixed", "dryRun": True}),
        "spec.search.dryRun",
    ),
    "empty targets": (mutate("spec.targets", []), "spec.targets"),
    "unknown metric": (mutate("spec.accuracy.metric", "rmse"), "spec.accuracy.metric"),
    "one reference pair": (mutate("spec.accuracy.pairs", BASE["spec"]["accuracy"]["pairs"][:1]), "spec.accuracy.pairs"),
    "unknown compiler": (mutate("spec.compiler.name", "tvm"), "spec.compiler.name"),
    "maxRoutes 0": (mutate("spec.search.maxRoutes", 0), "spec.search.maxRoutes"),
    "unknown search mode": (mutate("spec.search.mode", "random"), "spec.search.mode"),
    "model uri not s3": (mutate("spec.model.uri", "http://example.com/m.onnx"), "spec.model.uri"),
    "accuracy disabled without reason": (mutate("spec.accuracy", {"disabled": True}), "spec.accuracy.reason"),
    "duplicate gpuType": (mutate("spec.targets", [{"gpuType": "cpu"}, {"gpuType": "cpu"}]), "spec.targets"),
    "missing model": (mutate("spec.model", DELETE), "spec.model"),
    "bad sha256 pin": (mutate("spec.model.sha256", "abc"), "spec.model.sha256"),
    "confirm rounds 1": (mutate("spec.search.confirm", {"rounds": 1}), "spec.search.confirm.rounds"),
    "input shape ranks differ": (
        mutate("spec.compiler.inputShapes", [{"name": "x", "min": [1], "opt": [1, 2], "max": [1, 2]}]),
        "spec.compiler.inputShapes[0]",
    ),
    "input shape min above opt": (
        mutate("spec.compiler.inputShapes", [{"name": "x", "min": [1, 4], "opt": [1, 2], "max": [1, 8]}]),
        "spec.compiler.inputShapes[0]",
    ),
    "input shape opt above max": (
        mutate("spec.compiler.inputShapes", [{"name": "x", "min": [1], "opt": [8], "max": [4]}]),
        "spec.compiler.inputShapes[0]",
    ),
    "duplicate knob names": (
        mutate(
            "spec.search.knobs",
            [{"name": "enable_mem_pattern", "values": ["0"]}, {"name": "enable_mem_pattern", "values": ["1"]}],
        ),
        "spec.search.knobs",
    ),
    "knob values over the total": (
        mutate("spec.search.knobs", [{"name": f"k{i}", "values": [str(v) for v in range(64)]} for i in range(17)]),
        "spec.search.knobs",
    ),
    "knob value too long": (
        mutate("spec.search.knobs", [{"name": "k", "values": ["v" * 257]}]),
        "spec.search.knobs[0].values[0]",
    ),
    "setting name too long": (mutate("spec.compiler.settings", {"s" * 257: "1"}), "spec.compiler.settings"),
    "too many pinned knobs": (mutate("spec.search.pinned", {f"k{i}": "1" for i in range(65)}), "spec.search.pinned"),
}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_manifests_apply(cluster, crd_installed, namespace, path):
    result = cluster.kubectl("apply", "-n", namespace, "-f", str(path))
    assert "created" in result.stdout
    name = yaml.safe_load(path.read_text())["metadata"]["name"]
    stored = json.loads(cluster.kubectl("get", "trun", name, "-n", namespace, "-o", "json").stdout)
    # Defaults of objects the manifest left out are filled in by the API server from the schema.
    assert stored["spec"]["search"]["confirm"]["topK"] == 3
    assert stored["spec"]["timing"]["minRounds"] >= 2
    assert stored["spec"]["publish"]["enabled"] is True


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_manifest_is_refused_naming_the_field(cluster, crd_installed, namespace, case):
    manifest, field = INVALID[case]
    manifest = copy.deepcopy(manifest)
    manifest["metadata"]["name"] = "invalid"
    result = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest), check=False)
    assert result.returncode != 0, f"{case}: accepted"
    assert field in result.stderr, result.stderr
    assert cluster.kubectl("get", "trun", "invalid", "-n", namespace, check=False).returncode != 0


@pytest.mark.parametrize("case", sorted(INVALID))
def test_the_same_manifests_fail_pydantic_validation(case):
    from pydantic import ValidationError

    from enginewright.api.models import TuningRun

    with pytest.raises(ValidationError):
        TuningRun.model_validate(INVALID[case][0])
