"""spec.triggers.schedule for a target whose current run published the default route (controller.policy,
pure): once due, the policy re-measures the default against the run's runners-up (the stage-1 routes
that came closest to it, from its cache entries) on the unchanged stack, reason Scheduled; with no
runners-up there is nothing to measure it against and nothing starts. The re-measure decides as any:
the default kept (WinnerConfirmed, recorded), a runner-up that won (RunnerUpWins: the full re-tune of
the scheduled re-measure's own name), or a failure (RemeasureFailed)."""

from __future__ import annotations

import json

from enginewright.api.models import ReuseMode
from enginewright.api.policy import PolicyTargetStatus
from enginewright.controller.policy import (
    ANNOTATION_REMEASURE,
    ANNOTATION_RUNNERS_UP,
    RUNNER_UP_WINS,
    SCHEDULED,
    DriverReading,
    RunOutcome,
    decide,
    next_remeasure,
    run_manifest,
    runners_up,
    scheduled,
    scheduled_remeasure_name,
    scheduled_retune_name,
    target_status,
    with_runners_up,
)
from tests.unit.test_a_policy_schedule_re_measures_when_due import GPU, SINCE, STACK, WEEK, at, check
from tests.unit.test_a_policy_starts_a_run_only_when_the_stack_changes import template
from tests.unit.test_a_re_measure_carries_the_runners_up import CLOSE, CLOSER, WINNER, run_entries

DEFAULT_WON = RunOutcome("Succeeded", "")
DUE, EARLY = "2026-12-08T06:00:00Z", "2026-12-08T05:59:59Z"


def test_the_runners_up_of_a_default_are_the_fastest_passing_stage1_routes_after_it():
    # (Here the cache's fastest route was not confirmed in the run, so the default won.)
    assert runners_up(run_entries(), "") == (WINNER, CLOSER)
    assert runners_up(run_entries(), "", limit=3) == (WINNER, CLOSER, CLOSE)


def test_a_due_schedule_re_measures_a_winning_default_against_its_runners_up():
    decision = check(DEFAULT_WON, EARLY)
    assert scheduled("mlp", GPU, decision, DEFAULT_WON, None, WEEK.schedule_seconds, SINCE, at(EARLY), (CLOSER,)) == (
        decision
    )  # not yet due
    unchanged = check(DEFAULT_WON, DUE)
    assert unchanged.action == "none"  # no runners-up: nothing to measure the default against
    due = scheduled("mlp", GPU, unchanged, DEFAULT_WON, None, WEEK.schedule_seconds, SINCE, at(DUE), (CLOSER, CLOSE))
    assert (due.action, due.reason, due.run) == ("start", SCHEDULED, scheduled_remeasure_name("mlp", GPU, STACK, SINCE))
    assert (due.remeasure, due.runners_up) == ("", (CLOSER, CLOSE))
    assert f"the default route against its runners-up {CLOSER}, {CLOSE}" in due.message
    assert with_runners_up(due, (CLOSE,)) == due  # carried already: the shell adds none

    doc = run_manifest("mlp", "ns", "uid-1", template(), template().targets[0], due)
    search = doc["spec"]["search"]
    assert search["routes"] == [CLOSER, CLOSE] and search["reuse"] == ReuseMode.none.value
    assert search["confirm"]["topK"] >= 2
    assert doc["metadata"]["annotations"][ANNOTATION_REMEASURE] == ""
    assert json.loads(doc["metadata"]["annotations"][ANNOTATION_RUNNERS_UP]) == [CLOSER, CLOSE]


def test_a_default_re_measure_decides_kept_runner_up_wins_or_failed():
    started = "2026-12-08T06:00:05Z"
    running = scheduled_remeasure_name("mlp", GPU, STACK, SINCE)

    def after(current: RunOutcome | None):
        return decide(
            "mlp", GPU, WEEK, STACK, DriverReading("550"), STACK, current, "",
            current_run=running, scheduled_since=started,
        )  # fmt: skip

    kept = after(DEFAULT_WON)
    assert (kept.action, kept.reason) == ("record", "WinnerConfirmed") and "kept the default" in kept.message
    won = after(RunOutcome("Succeeded", CLOSER))
    full = scheduled_retune_name("mlp", GPU, STACK, started)
    assert (won.action, won.reason, won.run) == ("start", RUNNER_UP_WINS, full)
    assert f"the runner-up {CLOSER} beat the published default" in won.message
    assert (after(RunOutcome("Failed")).reason, after(None).reason) == ("RemeasureFailed", "RemeasureFailed")
    assert after(RunOutcome("Running")).action == "none"

    status = PolicyTargetStatus(gpu_type=GPU, stack=STACK, run=running, remeasure="", started_at=started)
    recorded = target_status(status, GPU, kept, STACK, False, "2026-12-08T07:00:00Z")
    assert recorded.remeasure is None and recorded.reason == "WinnerConfirmed"


def test_the_status_says_when_a_winning_default_is_re_measured_next():
    status = PolicyTargetStatus(gpu_type=GPU, stack=STACK, run="r", started_at=SINCE)
    assert next_remeasure(WEEK.schedule_seconds, status, DEFAULT_WON, (CLOSER,)) == DUE
    assert next_remeasure(WEEK.schedule_seconds, status, DEFAULT_WON) is None  # nothing to re-measure it against
