"""A TuningPolicy's decision (controller.policy, pure): each part of a target's stack changed alone
starts a run with a new deterministic name; an unchanged stack, a part whose trigger is off, a pool
with no labelled node, or nodes that disagree start none; a decision recorded in the status is not
made again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from enginewright.api.models import TuningRunSpec
from enginewright.api.policy import RUNS_KEPT, Stack, Triggers, TuningPolicy
from enginewright.controller.policy import (
    ANNOTATION_STACK,
    Decision,
    DriverReading,
    decide,
    driver_reading,
    observed_stack,
    owned_by,
    policy_status,
    run_manifest,
    run_name,
    target_status,
)

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
BASE = Stack(driver_major="550", compiler_image="reg/worker-onnxruntime:1", model_digest="a" * 64)
ALL = Triggers()
CHANGES = {
    "driver_major": ("560", "DriverMajorChanged"),
    "compiler_image": ("reg/worker-onnxruntime:2", "CompilerVersionChanged"),
    "model_digest": ("b" * 64, "ModelDigestChanged"),
}
TRIGGER_OF = {"driver_major": "driver_major", "compiler_image": "compiler_version", "model_digest": "model_digest"}


def template() -> TuningRunSpec:
    spec = yaml.safe_load(Path("examples/tuningrun-onnx-fast.yaml").read_text())["spec"]
    spec["targets"] = [{"gpuType": "NVIDIA-H200"}, {"gpuType": "NVIDIA-L40S"}]
    return TuningRunSpec.model_validate(spec)


def reading(stack: Stack) -> DriverReading:
    return DriverReading(stack.driver_major)


def test_a_target_without_a_run_starts_its_first():
    decision = decide("mlp", "NVIDIA-H200", ALL, BASE, reading(BASE), None)
    assert (decision.action, decision.reason, decision.stack) == ("start", "Initial", BASE)
    assert decision.run == run_name("mlp", "NVIDIA-H200", BASE)


def test_an_unchanged_stack_starts_nothing():
    decision = decide("mlp", "NVIDIA-H200", ALL, BASE, reading(BASE), BASE)
    assert (decision.action, decision.run, decision.stack) == ("none", None, BASE)


@pytest.mark.parametrize("part", list(CHANGES))
def test_each_part_changed_alone_starts_a_run_named_for_the_new_stack(part):
    value, reason = CHANGES[part]
    now = BASE.model_copy(update={part: value})
    decision = decide("mlp", "NVIDIA-H200", ALL, now, reading(now), BASE)
    assert (decision.action, decision.reason, decision.stack) == ("start", reason, now)
    assert decision.run == run_name("mlp", "NVIDIA-H200", now) != run_name("mlp", "NVIDIA-H200", BASE)
    assert f"{getattr(BASE, part)} -> {value}" in decision.message
    # Recorded, the same observation decides nothing more (a repeated check starts no second run).
    status = target_status(None, "NVIDIA-H200", decision, now, started=True, when="t1")
    assert status.stack == now and status.run == decision.run
    assert decide("mlp", "NVIDIA-H200", ALL, now, reading(now), status.stack).action == "none"


@pytest.mark.parametrize("part", list(CHANGES))
def test_a_part_whose_trigger_is_off_starts_nothing(part):
    now = BASE.model_copy(update={part: CHANGES[part][0]})
    off = Triggers(**{TRIGGER_OF[part]: False})
    assert decide("mlp", "NVIDIA-H200", off, now, reading(now), BASE).action == "none"
    others = [p for p in CHANGES if p != part]
    both = now.model_copy(update={others[0]: CHANGES[others[0]][0]})
    decision = decide("mlp", "NVIDIA-H200", off, both, reading(both), BASE)
    assert decision.action == "start" and decision.reason == CHANGES[others[0]][1]  # only the enabled part counts


def test_two_parts_changed_name_both_reasons():
    now = BASE.model_copy(update={"driver_major": "560", "compiler_image": "reg/worker-onnxruntime:2"})
    decision = decide("mlp", "NVIDIA-H200", ALL, now, reading(now), BASE)
    assert decision.reason == "DriverMajorChanged,CompilerVersionChanged"


def test_a_pool_with_no_labelled_node_keeps_its_driver():
    """Scaled to zero (or not yet labelled by GPU feature discovery): no node says otherwise."""
    now = BASE.model_copy(update={"driver_major": None})
    assert decide("mlp", "NVIDIA-H200", ALL, now, DriverReading(None), BASE).action == "none"
    changed = now.model_copy(update={"compiler_image": "reg/worker-onnxruntime:2"})
    decision = decide("mlp", "NVIDIA-H200", ALL, changed, DriverReading(None), BASE)
    assert decision.action == "start" and decision.stack is not None
    assert decision.stack.driver_major == "550" and decision.reason == "CompilerVersionChanged"


def test_the_first_driver_seen_after_a_run_without_one_is_recorded_not_retuned():
    first = BASE.model_copy(update={"driver_major": None})
    decision = decide("mlp", "NVIDIA-H200", ALL, BASE, reading(BASE), first)
    assert (decision.action, decision.run, decision.stack) == ("record", None, BASE)
    status = target_status(None, "NVIDIA-H200", decision, BASE, started=False, when="t")
    assert status.stack == BASE and status.run is None


def test_nodes_that_disagree_are_waited_for():
    labels = [
        {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/cuda.driver.major": "550"},
        {"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/cuda.driver.major": "560"},
        {"nvidia.com/gpu.product": "NVIDIA-H200"},  # not labelled yet: not counted
    ]
    driver = driver_reading(labels)
    assert driver == DriverReading(None, ("550", "560"))
    now = observed_stack(template(), driver, BASE.compiler_image)
    decision = decide("mlp", "NVIDIA-H200", ALL, now, driver, BASE)
    assert (decision.action, decision.reason, decision.stack) == ("wait", "DriversDisagree", BASE)
    assert "550, 560" in decision.message
    assert driver_reading(labels[1:]) == DriverReading("560")
    assert driver_reading([]) == DriverReading(None)


def test_the_observed_stack_comes_from_nodes_image_and_template():
    spec = template()
    spec.model.sha256 = "c" * 64
    stack = observed_stack(spec, DriverReading("570"), "reg/w:3")
    assert stack == Stack(driver_major="570", compiler_image="reg/w:3", model_digest="c" * 64)


@pytest.mark.parametrize(
    "policy,gpu_type",
    [
        ("mlp", "NVIDIA-H200"),
        ("a" * 63, "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"),
        ("team.model-v2", "Tesla_T4"),
    ],
)
def test_run_names_are_dns_labels_that_name_the_stack(policy, gpu_type):
    names = {run_name(policy, gpu_type, BASE.model_copy(update={p: v})) for p, (v, _) in CHANGES.items()}
    names.add(run_name(policy, gpu_type, BASE))
    assert len(names) == 4  # each stack its own run
    for name in names:
        assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert run_name(policy, gpu_type, BASE) == run_name(policy, gpu_type, BASE.model_copy())


def test_the_run_name_is_pinned():
    """A new operator version must name the run of an unchanged stack as the old one did, or its first
    check after an upgrade would start a second run."""
    assert run_name("mlp", "NVIDIA-H200", BASE) == "mlp-nvidia-h200-fce72766"


def test_the_run_is_the_template_for_one_target_in_the_policys_namespace():
    spec = template()
    h200 = spec.targets[0]
    decision = decide("mlp", h200.gpu_type, ALL, BASE, reading(BASE), None)
    doc = run_manifest("mlp", "team-a", "uid-1", spec, h200, decision)
    meta = doc["metadata"]
    assert (meta["name"], meta["namespace"]) == (decision.run, "team-a")
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "tuning.enginewright.io/v1alpha1",
            "kind": "TuningPolicy",
            "name": "mlp",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert owned_by(doc, "uid-1") and not owned_by(doc, "uid-2")
    assert Stack.model_validate_json(meta["annotations"][ANNOTATION_STACK]) == BASE
    run = TuningRunSpec.model_validate(doc["spec"])
    assert [t.gpu_type for t in run.targets] == ["NVIDIA-H200"]
    assert run.publish.model_name == "mlp"  # every run of the policy publishes to one catalog model
    assert run.search == spec.search and run.model == spec.model
    assert [t.gpu_type for t in spec.targets] == ["NVIDIA-H200", "NVIDIA-L40S"]  # the template is not changed
    spec.publish.model_name = "shared-mlp"
    assert run_manifest("mlp", "team-a", "u", spec, h200, decision)["spec"]["publish"]["modelName"] == "shared-mlp"
    assert not owned_by({"metadata": {"name": decision.run}}, "uid-1")  # someone else's run of that name


def test_a_start_not_carried_out_leaves_the_recorded_run():
    before = target_status(None, "NVIDIA-H200", decide("p", "g", ALL, BASE, reading(BASE), None), BASE, True, "t0")
    now = BASE.model_copy(update={"driver_major": "560"})
    decision = decide("p", "g", ALL, now, reading(now), before.stack)
    failed = target_status(before, "NVIDIA-H200", decision, now, started=False, when="t1")
    assert (failed.stack, failed.run, failed.observed) == (BASE, before.run, now)
    done = target_status(before, "NVIDIA-H200", decision, now, started=True, when="t1")
    assert done.runs == [before.run, decision.run] and done.started_at == "t1"


def test_the_runs_list_is_kept_short_and_without_repeats():
    status = None
    for i in range(RUNS_KEPT + 5):
        decision = Decision("start", BASE, "X", "", f"run-{i % (RUNS_KEPT + 2)}")
        status = target_status(status, "g", decision, BASE, True, "t")
    assert status is not None and len(status.runs) == RUNS_KEPT == len(set(status.runs))
    assert status.runs[-1] == f"run-{(RUNS_KEPT + 4) % (RUNS_KEPT + 2)}"


def test_the_status_says_ready_waiting_or_stalled():
    target = target_status(None, "g", decide("p", "g", ALL, BASE, reading(BASE), None), BASE, True, "t")
    ready = policy_status({"kopf": {"x": 1}}, 3, [target], None, [])
    kinds = {c["type"]: (c["status"], c["reason"]) for c in ready["conditions"]}
    assert kinds["Ready"] == ("True", "UpToDate") and kinds["Stalled"][0] == "False"
    assert ready["observedGeneration"] == 3 and ready["kopf"] == {"x": 1}  # kopf's bookkeeping is kept
    assert TuningPolicy.model_validate({"metadata": {"name": "p"}, "spec": {"template": template()}, "status": ready})
    waiting = policy_status(ready, 3, [target], None, ["nodes of g report driver majors 550, 560"])
    kinds = {c["type"]: (c["status"], c["reason"]) for c in waiting["conditions"]}
    assert kinds["Ready"] == ("False", "Waiting") and kinds["Reconciling"] == ("True", "Waiting")
    stalled = policy_status(ready, 3, [target], ("RunNameTaken", "a TuningRun p-g-1 exists"), [])
    kinds = {c["type"]: (c["status"], c["reason"]) for c in stalled["conditions"]}
    assert kinds["Stalled"] == ("True", "RunNameTaken") and kinds["Ready"][0] == "False"
    again = policy_status(ready, 3, [target], None, [])
    assert again["conditions"] == ready["conditions"]  # an unchanged state writes the same status


def test_the_example_policy_is_a_valid_policy():
    doc = yaml.safe_load(Path("examples/tuningpolicy-demo.yaml").read_text())
    example = TuningPolicy.model_validate(doc)
    assert [t.gpu_type for t in example.spec.template.targets] == ["NVIDIA-H200", "NVIDIA-L40S"]
    assert example.spec.triggers == Triggers(schedule="168h")  # every stack trigger on (the defaults), a week
