"""A policy's re-measure carries, beside the published winner, the stage-1 routes of the published
run that came closest to it (its runners-up, up to 2, read from that run's cache entries); when one
of them wins the re-measure (a stage-1 route now beats the default and the winner on the new stack),
the full re-tune starts with a reason of its own, RunnerUpWins (controller.policy, pure)."""

from __future__ import annotations

import json

from enginewright.api.cache import Outcome
from enginewright.api.models import TuningRunSpec
from enginewright.api.policy import Stack, Triggers
from enginewright.controller.policy import (
    ANNOTATION_RUNNERS_UP,
    REGRESSED,
    RUNNER_UP_WINS,
    DriverReading,
    RunOutcome,
    decide,
    policy_status,
    run_manifest,
    run_name,
    runners_up,
    target_status,
    with_runners_up,
)
from tests.unit.entries import measured
from tests.unit.test_a_policy_starts_a_run_only_when_the_stack_changes import template

OLD = Stack(driver_major="550", compiler_image="reg/worker-onnxruntime:1", model_digest="a" * 64)
NEW = OLD.model_copy(update={"driver_major": "560"})
GPU = "NVIDIA-H200"
WINNER = "-graph_optimization_level=ORT_ENABLE_BASIC"
CLOSE, CLOSER = "-enable_mem_pattern=0", "-intra_op_num_threads=2"


def run_entries():
    """A published run's cache: the default, the winner, two close routes, one far behind, one rejected
    by accuracy, and a (faster) stage-2 route, every time against a 1.0 ms default."""
    return [
        measured({}, 1.0),
        measured({"graph_optimization_level": "ORT_ENABLE_BASIC"}, 0.80, baseline_ms=1.0),
        measured({"intra_op_num_threads": "2"}, 0.90, baseline_ms=1.0),
        measured({"enable_mem_pattern": "0"}, 0.95, baseline_ms=1.0),
        measured({"execution_mode": "parallel"}, 1.30, baseline_ms=1.0),
        measured({"inter_op_num_threads": "2"}, 0.50, baseline_ms=1.0).model_copy(
            update={"outcome": Outcome.accuracy_rejected}
        ),
        measured({"intra_op_num_threads": "4", "enable_mem_pattern": "0"}, 0.60, baseline_ms=1.0, stage="stage2"),
    ]


def re_measure():
    """The decision on a stack change of a target whose run published WINNER, with its runners-up."""
    decision = decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), OLD, RunOutcome("Succeeded", WINNER))
    return with_runners_up(decision, runners_up(run_entries(), WINNER))


def after(current: RunOutcome | None):
    """A check once the re-measure was recorded for the new stack."""
    return decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), NEW, current, WINNER)


def test_the_runners_up_are_the_closest_passing_stage_1_routes_but_the_winner():
    assert runners_up(run_entries(), WINNER) == (CLOSER, CLOSE)
    assert runners_up(run_entries(), WINNER, limit=1) == (CLOSER,)
    assert runners_up(run_entries(), CLOSER) == (WINNER, CLOSE)  # the route that won is never its own runner-up
    assert runners_up(run_entries()[1:], WINNER) == ()  # no default entry: nothing to rank against
    assert runners_up([], WINNER) == ()


def test_the_re_measure_measures_the_winner_and_its_runners_up_fresh_all_confirmed():
    decision = re_measure()
    assert decision.remeasure == WINNER and decision.runners_up == (CLOSER, CLOSE)
    assert CLOSER in decision.message and CLOSE in decision.message
    spec = TuningRunSpec.model_validate(template().wire())
    spec.search.confirm.top_k = 1
    doc = run_manifest("mlp", "team-a", "uid-1", spec, spec.targets[0], decision)
    search = doc["spec"]["search"]
    assert search["routes"] == [WINNER, CLOSER, CLOSE] and search["confirm"]["topK"] == 3
    assert search["reuse"] == "none"
    assert json.loads(doc["metadata"]["annotations"][ANNOTATION_RUNNERS_UP]) == [CLOSER, CLOSE]
    TuningRunSpec.model_validate(doc["spec"])  # a valid run
    status = target_status(None, GPU, decision, NEW, started=True, when="t1")
    assert status.runners_up == [CLOSER, CLOSE] and status.wire()["runnersUp"] == [CLOSER, CLOSE]


def test_without_runners_up_the_re_measure_is_the_winners_alone():
    decision = decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), OLD, RunOutcome("Succeeded", WINNER))
    assert with_runners_up(decision, ()) == decision
    full = decide("mlp", GPU, Triggers(), NEW, DriverReading("560"), OLD, RunOutcome("Succeeded", ""))
    assert with_runners_up(full, (CLOSER,)) == full  # not a re-measure: a full run carries nothing


def test_a_runner_up_that_won_the_re_measure_starts_the_full_re_tune_as_runner_up_wins():
    decision = after(RunOutcome("Succeeded", CLOSER))
    assert (decision.action, decision.reason, decision.run) == ("start", RUNNER_UP_WINS, run_name("mlp", GPU, NEW))
    assert CLOSER in decision.message and WINNER in decision.message and "runner-up" in decision.message
    assert after(RunOutcome("Succeeded", CLOSER)) == decision  # repeated: the same run
    before = target_status(None, GPU, re_measure(), NEW, started=True, when="t1")
    status = target_status(before, GPU, decision, NEW, started=True, when="t2")
    assert status.reason == RUNNER_UP_WINS and status.remeasure is None and status.runners_up == []
    regressed = next(c for c in policy_status({}, 1, [status], None, [])["conditions"] if c["type"] == REGRESSED)
    assert regressed["status"] == "False"  # the winner may still beat the default: not a regression


def test_the_winner_confirmed_or_the_default_kept_decide_as_before():
    confirmed = after(RunOutcome("Succeeded", WINNER))
    assert (confirmed.action, confirmed.reason) == ("record", "WinnerConfirmed")
    before = target_status(None, GPU, re_measure(), NEW, started=True, when="t1")
    assert target_status(before, GPU, confirmed, NEW, started=False, when="t2").runners_up == []
    assert after(RunOutcome("Succeeded", "")).reason == REGRESSED
