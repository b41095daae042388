"""On a stack change a policy first re-measures its target's published winner (controller.policy,
pure): a run of spec.search.routes = [the winner] against the default; a winner that holds is
recorded (that run published it for the new stack), one that lost to the default is a regression
and starts the full re-tune under the name a plain stack change gives it; each decision, repeated,
names the same run."""

from __future__ import annotations

from enginewright.api.models import TuningRunSpec
from enginewright.api.policy import Stack, Triggers
from enginewright.controller.policy import (
    ANNOTATION_REMEASURE,
    REGRESSED,
    DriverReading,
    RunOutcome,
    decide,
    policy_status,
    remeasure_name,
    run_manifest,
    run_name,
    run_outcome,
    target_status,
)
from tests.unit.test_a_policy_starts_a_run_only_when_the_stack_changes import template

OLD = Stack(driver_major="550", compiler_image="reg/worker-onnxruntime:1", model_digest="a" * 64)
NEW = OLD.model_copy(update={"driver_major": "560"})
WINNER = "-graph_optimization_level=ORT_ENABLE_BASIC -intra_op_num_threads=2"
PUBLISHED = RunOutcome("Succeeded", WINNER)
GPU = "NVIDIA-H200"


def change(current: RunOutcome | None):
    return decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), OLD, current, None)


def after(current: RunOutcome | None):
    """A check once the re-measure was recorded for the new stack."""
    return decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), NEW, current, WINNER)


def test_a_stack_change_re_measures_the_published_winner_not_a_full_run():
    decision = change(PUBLISHED)
    assert (decision.action, decision.reason, decision.remeasure) == ("start", "DriverMajorChanged", WINNER)
    assert decision.run == remeasure_name("mlp", GPU, NEW) != run_name("mlp", GPU, NEW)
    assert "re-measuring the published winner" in decision.message
    # The run measures the default and the winner only, with the confirmation rule deciding
    spec = TuningRunSpec.model_validate(template().wire())
    spec.search.confirm.top_k = 0
    doc = run_manifest("mlp", "team-a", "uid-1", spec, spec.targets[0], decision)
    search = doc["spec"]["search"]
    assert search["routes"] == [WINNER] and search["mode"] == "fast" and not search.get("knobs")
    assert search["measureUncompiled"] is False and search["confirm"]["topK"] == 1
    assert doc["metadata"]["annotations"][ANNOTATION_REMEASURE] == WINNER
    TuningRunSpec.model_validate(doc["spec"])  # a valid run


def test_without_a_published_non_default_winner_the_change_starts_the_full_run():
    for current in (None, RunOutcome("Succeeded", ""), RunOutcome("Running"), RunOutcome("Failed")):
        decision = change(current)
        assert decision.remeasure is None and decision.run == run_name("mlp", GPU, NEW)


def test_a_running_re_measure_starts_nothing():
    assert after(RunOutcome("Running")).action == "none"
    assert after(RunOutcome("Confirming")).action == "none"


def test_a_winner_that_held_is_recorded_and_the_re_measure_cleared():
    decision = after(RunOutcome("Succeeded", "-intra_op_num_threads=2 -graph_optimization_level=ORT_ENABLE_BASIC"))
    assert (decision.action, decision.reason, decision.run) == ("record", "WinnerConfirmed", None)
    before = target_status(None, GPU, change(PUBLISHED), NEW, started=True, when="t1")
    assert before.remeasure == WINNER
    status = target_status(before, GPU, decision, NEW, started=False, when="t2")
    assert status.remeasure is None and status.reason == "WinnerConfirmed" and status.run == before.run
    assert after(RunOutcome("Succeeded", WINNER)).action == "record"  # (the shell emits once: remeasure is None now)
    assert decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), NEW, PUBLISHED, None).action == "none"


def test_a_winner_the_default_beat_is_a_regression_that_starts_the_full_re_tune():
    decision = after(RunOutcome("Succeeded", ""))
    assert (decision.action, decision.reason, decision.remeasure) == ("start", REGRESSED, None)
    assert decision.run == run_name("mlp", GPU, NEW)  # the name a plain stack change gives: started once
    assert WINNER in decision.message and "no longer beats the default" in decision.message
    assert after(RunOutcome("Succeeded", "")).run == decision.run
    status = target_status(None, GPU, decision, NEW, started=True, when="t1")
    doc = policy_status({}, 1, [status], None, [])
    regressed = next(c for c in doc["conditions"] if c["type"] == REGRESSED)
    assert regressed["status"] == "True" and GPU in regressed["message"]
    # Recorded, the full run is the current one: no second regression, no second run
    assert decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), NEW, RunOutcome("Running"), None).action == "none"


def test_a_failed_or_deleted_re_measure_starts_the_full_re_tune():
    for current in (RunOutcome("Failed"), None):
        decision = after(current)
        assert (decision.action, decision.reason, decision.run) == (
            "start",
            "RemeasureFailed",
            run_name("mlp", GPU, NEW),
        )


def test_no_regression_condition_is_false():
    status = target_status(None, GPU, change(PUBLISHED), NEW, started=True, when="t1")
    regressed = next(c for c in policy_status({}, 1, [status], None, [])["conditions"] if c["type"] == REGRESSED)
    assert (regressed["status"], regressed["reason"]) == ("False", "NoRegression")


def test_the_outcome_counts_a_winner_only_once_published():
    target = {"winner": {"routeId": "x", "route": "-b=2 -a=1"}}
    assert run_outcome({"status": {"phase": "Publishing", "targets": [target]}}) == RunOutcome("Publishing", None)
    published = {**target, "engineUri": "s3://c/engine.onnx"}
    assert run_outcome({"status": {"phase": "Succeeded", "targets": [published]}}) == RunOutcome(
        "Succeeded", "-a=1 -b=2"
    )
    assert run_outcome({}) == RunOutcome("Pending", None) and run_outcome(None) is None
