"""A TuningPolicy through a change of the worker's compiler image, end to end: real worker Jobs (ONNX
Runtime, the example model) on a node of a GPU type of the test's own, run by a node agent of its
own, publishing to the real store, with an operator of its own (namespaces `p-*`, the policy checked
every 0.5 s, MIRROR allowed as a worker image).

The first run publishes with the operator's worker image; the template's `compiler.image` then
becomes MIRROR: the stack's compilerImage changed, so the policy starts a re-measure of the published
winner (reason CompilerVersionChanged, counted in enginewright_policy_runs_started_total) whose Jobs
run MIRROR, or, when the first run published the default, the full re-tune at once; a re-measure
that does not confirm the winner starts the full re-tune after it (as after a driver change; which
way it goes is decided by real measurements, as in the driver test: the test prints the branch).

The test cluster's node agent runs containers as host processes (tests/cluster/node_agent.py): the
image is not pulled, every reference runs this checkout's worker with the venv's ONNX Runtime. So
MIRROR is the same image under another reference (as a registry mirror serves it), not a new
compiler: what the policy reacts to is the reference, which is what it watches. The catalog entry's
stack records the compiler version the worker reports, not the image: both entries have the same
onnxruntime version, so the new one does not mark the old superseded (same stack); the old entry is
kept, `fetch` hands out the newest, and `fetch --run` still the old one, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from enginewright.api.policy import Stack
from enginewright.controller.policy import ANNOTATION_REMEASURE, ANNOTATION_TRIGGER, remeasure_name, run_name
from enginewright.controller.settings import Settings
from tests.conftest import get_json
from tests.operator import test_a_policy_run_through_a_driver_change_publishes_an_entry_per_stack as e2e
from tests.operator.conftest import FAST_TIMING, manifest, wait_condition
from tests.operator.test_a_policy_retunes_when_a_nodes_driver_changes import (
    policy_doc,
    policy_event_posted,
    recorded,
    start_policy_operator,
)

p_namespace, new_node, store_namespace = e2e.p_namespace, e2e.new_node, e2e.store_namespace  # its fixtures

IMAGE = Settings().default_image("onnxruntime")  # the test operator sets no worker image
MIRROR = f"registry.example.com/mirror/{IMAGE}"  # the same image under another reference


@pytest.fixture
def policy_operator(cluster, tmp_path):
    running = start_policy_operator(cluster, tmp_path / "operator.log", ENGINEWRIGHT_ALLOWED_IMAGES=MIRROR)
    yield running
    running.stop()
    running.assert_clean()


def started_for(operator, trigger: str) -> float:
    text = operator.metrics()
    match = re.search(rf'^enginewright_policy_runs_started_total{{trigger="{trigger}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def test_a_new_compiler_image_re_measures_the_winner_on_jobs_of_that_image(
    cluster, store_namespace, new_node, policy_operator, s3, tmp_path
):
    namespace = store_namespace
    gpu_type, node = e2e.node_of_its_own(cluster, new_node, "policy-image", namespace)
    model = f"policy-image-{namespace}"
    template = manifest("unused", knobs=e2e.KNOBS)["spec"]
    template.update(
        targets=[{"gpuType": gpu_type, "gpusPerJob": 0}],
        publish={"modelName": model},
        timing={**FAST_TIMING, "roundSeconds": 0.05},
    )
    template["compiler"]["settings"] = dict(e2e.SETTINGS)
    template["search"]["confirm"] = {"topK": 1, "rounds": 3, "loads": 4}
    first = run_name("mlp", gpu_type, Stack(driver_major="550", compiler_image=IMAGE))
    stack = Stack(driver_major="550", compiler_image=MIRROR)
    check, full = remeasure_name("mlp", gpu_type, stack), run_name("mlp", gpu_type, stack)
    try:
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(policy_doc(template)))
        recorded(cluster, namespace, first)
        (published,) = wait_condition(cluster, namespace, first, "Ready", 240)["targets"]
        winner = published["winner"]["route"]

        cluster.kubectl(
            "patch", "tpol", "mlp", "-n", namespace, "--type=merge",
            "-p", json.dumps({"spec": {"template": {"compiler": {"image": MIRROR}}}}),
        )  # fmt: skip
        target, current = e2e.settled(cluster, namespace, (check, full))
        started = get_json(cluster, "trun", check if winner else full, "-n", namespace)
        assert started["metadata"]["annotations"][ANNOTATION_TRIGGER] == "CompilerVersionChanged", started
        assert started["spec"]["compiler"]["image"] == MIRROR
        assert target["stack"]["compilerImage"] == MIRROR and target["observed"]["compilerImage"] == MIRROR
        policy_event_posted(
            cluster,
            namespace,
            "RunStarted",
            lambda e: started["metadata"]["name"] in e["message"] and "CompilerVersionChanged" in e["message"],
        )
        assert started_for(policy_operator, "CompilerVersionChanged") == 1
        if winner:
            assert started["metadata"]["annotations"][ANNOTATION_REMEASURE] == winner
            branch = "confirmed" if target["reason"] == "WinnerConfirmed" else f"{target['reason']}: the full re-tune"
            assert target["run"] == (check if target["reason"] == "WinnerConfirmed" else full), target
        else:
            branch = "the default was published: the full re-tune at once"
            assert target["run"] == full and target["reason"] == "CompilerVersionChanged", target
        print(
            f"\ncompiler image: {branch} (was {winner or '(default)'}, now {current['winner']['route'] or '(default)'})"
        )
        images = {
            c["image"]
            for job in get_json(cluster, "jobs", "-n", namespace)["items"]
            if job["metadata"]["ownerReferences"][0]["name"] == started["metadata"]["name"]
            for c in job["spec"]["template"]["spec"]["containers"]
        }
        assert images == {MIRROR}, images

        # The catalog keeps the first entry beside the new one; the worker reports one onnxruntime
        # version for both references, so both are of one stack: fetch hands out the newest.
        entries = e2e.index(s3, model)
        old, new = entries[first], entries[target["run"]]
        assert old["sha256"] == published["engineSha256"] and new["sha256"] == current["engineSha256"]
        assert old["stack"]["compilerVersion"] == new["stack"]["compilerVersion"] and "supersededBy" not in old
        out, engine = e2e.fetch(cluster, tmp_path / "newest", model, gpu_type, "550")
        assert out["runUid"] == new["runUid"] and hashlib.sha256(engine).hexdigest() == new["sha256"], out
        out, engine = e2e.fetch(cluster, tmp_path / "old", model, gpu_type, "550", "--run", old["runUid"])
        assert out["runUid"] == old["runUid"] and hashlib.sha256(engine).hexdigest() == old["sha256"], out
    finally:
        cluster.kubectl("delete", "tpol,trun", "--all", "-n", namespace, "--timeout=60s", check=False)
