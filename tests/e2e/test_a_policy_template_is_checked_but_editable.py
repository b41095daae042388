"""The TuningPolicy CRD on the real API server: the example applies; its template is checked as a
TuningRun's spec is (a repeated gpuType is refused at apply), but unlike a run's spec it can be
edited; a run's spec still cannot."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

from tests.conftest import get_json

EXAMPLE = yaml.safe_load(Path("examples/tuningpolicy-demo.yaml").read_text())


def apply(cluster, namespace: str, doc: dict, check: bool = True):
    return cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=check)


def test_the_policy_crd_checks_the_template_and_lets_it_change(cluster, crd_installed, namespace):
    crd = get_json(cluster, "crd", "tuningpolicies.tuning.enginewright.io")
    assert {c["type"]: c["status"] for c in crd["status"]["conditions"]}["Established"] == "True"
    apply(cluster, namespace, EXAMPLE)
    stored = get_json(cluster, "tpol", "demo-mlp", "-n", namespace)
    assert stored["spec"]["triggers"] == {
        "driverMajor": True,
        "compilerVersion": True,
        "modelDigest": True,
        "schedule": "168h",
    }

    edited = copy.deepcopy(EXAMPLE)
    edited["spec"]["template"]["model"]["sha256"] = "e" * 64
    apply(cluster, namespace, edited)  # a run's spec is immutable; a policy's template is not
    assert get_json(cluster, "tpol", "demo-mlp", "-n", namespace)["spec"]["template"]["model"]["sha256"] == "e" * 64

    twice = copy.deepcopy(EXAMPLE)
    twice["metadata"]["name"] = "twice"
    twice["spec"]["template"]["targets"].append({"gpuType": "NVIDIA-H200"})
    refused = apply(cluster, namespace, twice, check=False)
    assert refused.returncode != 0 and "each gpuType may appear once" in refused.stderr, refused.stderr

    run = {"apiVersion": "tuning.enginewright.io/v1alpha1", "kind": "TuningRun", "metadata": {"name": "r"}}
    run["spec"] = copy.deepcopy(EXAMPLE["spec"]["template"])
    apply(cluster, namespace, run)
    run["spec"]["model"]["sha256"] = "e" * 64
    changed = apply(cluster, namespace, run, check=False)
    assert changed.returncode != 0 and "spec is immutable" in changed.stderr, changed.stderr
