"""What the API server cannot check is checked before any tuning Job: each bad case ends Stalled with
a reason and a message naming the field, a Warning Event, no tuning Job, and no traceback."""

import subprocess

import pytest

from enginewright.api.names import LABEL_STAGE
from tests.operator.conftest import apply, condition, event_posted, jobs, manifest, run_status, wait_condition

KNOB = [{"name": "enable_mem_pattern", "values": ["0"]}]


def stalled(cluster, namespace, doc, reason, words, probe_allowed):
    name = doc["metadata"]["name"]
    apply(cluster, namespace, doc)
    status = wait_condition(cluster, namespace, name, "Stalled", 120)
    stall = condition(status, "Stalled")
    assert stall["reason"] == reason, status
    for word in words:
        assert word in stall["message"], stall["message"]
    assert condition(status, "Ready")["status"] == "False"
    assert condition(status, "Reconciling")["status"] == "False"
    stages = [j["metadata"]["labels"][LABEL_STAGE] for j in jobs(cluster, namespace)]
    assert stages == (["probe"] if probe_allowed else []), stages
    event_posted(cluster, namespace, name, lambda e: e["type"] == "Warning" and e["reason"] == reason)
    return status


# No node of a target's GPU type is not a bad input: pools scale from zero (test_gpu_pools_that_scale_from_zero).
@pytest.mark.parametrize("case", ["missing model", "missing reference data"])
def test_checks_before_any_job(cluster, operator, run_namespace, case):
    doc = manifest("bad", knobs=KNOB)
    if case == "missing model":
        doc["spec"]["model"]["uri"] = "s3://enginewright-models/example/absent.onnx"
        stalled(cluster, run_namespace, doc, "ObjectNotFound", ["spec.model.uri", "absent.onnx"], False)
    else:
        doc["spec"]["accuracy"]["pairs"][1]["references"] = "s3://enginewright-models/example/none.npz"
        stalled(cluster, run_namespace, doc, "ObjectNotFound", ["spec.accuracy.pairs[1].references"], False)
    operator.assert_clean()


def test_a_namespace_without_the_store_secret(cluster, operator, namespace):
    stalled(
        cluster,
        namespace,
        manifest("nosecret", knobs=KNOB),
        "StoreSecretMissing",
        ["enginewright-store", "AWS_ACCESS_KEY_ID"],
        False,
    )
    operator.assert_clean()


@pytest.mark.parametrize("case", ["digest mismatch", "unknown knob"])
def test_checks_that_need_the_compiler_run_only_the_probe(cluster, operator, run_namespace, case):
    doc = manifest("probed", knobs=KNOB)
    if case == "digest mismatch":
        doc["spec"]["model"]["sha256"] = "0" * 64
        status = stalled(cluster, run_namespace, doc, "InvalidInput", ["spec.model.sha256 pins 0000"], True)
    else:
        doc["spec"]["search"]["knobs"] = [{"name": "graph_optimisation_level", "values": ["all"]}]
        status = stalled(
            cluster,
            run_namespace,
            doc,
            "InvalidKnobs",
            ["spec.search.knobs", "graph_optimisation_level", "did you mean graph_optimization_level"],
            True,
        )
    assert status["phase"] == "Failed" and status["targets"][0]["stage"] == "failed"
    assert status["targets"][0]["reason"] == condition(status, "Stalled")["reason"]
    operator.assert_clean()


def test_the_spec_cannot_be_edited_after_apply(cluster, operator, run_namespace):
    apply(cluster, run_namespace, manifest("frozen", knobs=KNOB, targets=("NVIDIA-B200",)))
    done = subprocess.run(
        [
            str(cluster.binaries / "kubectl"),
            "patch",
            "trun",
            "frozen",
            "-n",
            run_namespace,
            "--type=merge",
            "-p",
            '{"spec":{"search":{"maxRoutes":3}}}',
        ],
        env=cluster.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "spec is immutable" in done.stderr, done.stderr
    assert run_status(cluster, run_namespace, "frozen") is not None
