"""spec.triggers.schedule (controller.policy, pure): a duration of at least an hour; once the target's
current run, which published a winner other than the default, is a schedule old (counted from its
startedAt in the policy's status, so a restart neither re-measures early nor forgets), the policy
starts a re-measure of that winner on the unchanged stack (reason Scheduled), named for the time it
counts from so it never collides with an earlier re-measure of the same stack; its outcome decides as
a stack change's re-measure does, and a full re-tune it starts gets a name of its own too."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import ValidationError

from enginewright.api.policy import PolicyTargetStatus, Stack, Triggers, duration_seconds
from enginewright.controller.policy import (
    REGRESSED,
    RUNNER_UP_WINS,
    SCHEDULED,
    DriverReading,
    RunOutcome,
    decide,
    next_remeasure,
    remeasure_name,
    run_name,
    scheduled,
    scheduled_remeasure_name,
    scheduled_retune_name,
    target_status,
)

STACK = Stack(driver_major="550", compiler_image="reg/worker-onnxruntime:1", model_digest="a" * 64)
GPU = "NVIDIA-H200"
WINNER = "-graph_optimization_level=ORT_ENABLE_BASIC"
PUBLISHED = RunOutcome("Succeeded", WINNER)
SINCE = "2026-12-01T06:00:00Z"
WEEK = Triggers(schedule="168h")


def at(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


def check(
    current: RunOutcome | None, when: str, triggers: Triggers = WEEK, since: str | None = SINCE, remeasuring=None
):
    """One check of a target on an unchanged stack whose current run was recorded at `since`."""
    decision = decide("mlp", GPU, triggers, STACK, DriverReading("550"), STACK, current, remeasuring)
    return scheduled("mlp", GPU, decision, current, remeasuring, triggers.schedule_seconds, since, at(when))


def test_a_schedule_is_a_duration_of_at_least_an_hour():
    assert duration_seconds("168h") == 7 * 24 * 3600 and duration_seconds("1h30m") == 5400
    assert Triggers(schedule="1h").schedule_seconds == 3600 and Triggers().schedule_seconds is None
    with pytest.raises(ValidationError, match="must be at least 1h"):
        Triggers(schedule="59m")
    assert duration_seconds("999999h9999999m99999999s") < 2562047 * 3600  # Go's largest duration
    # 3000000h overflows Go's duration (CEL's duration() failed on it); a unit twice, or out of order
    for bad in ("7d", "1 h", "5ms", "", "168", "3000000h", "1h1h", "30m1h", "1.0000000001h"):
        with pytest.raises(ValidationError, match="is not a duration"):
            Triggers(schedule=bad)


def test_before_the_schedule_is_due_nothing_starts_and_once_due_the_winner_is_re_measured():
    assert check(PUBLISHED, "2026-12-08T05:59:59Z").action == "none"
    decision = check(PUBLISHED, "2026-12-08T06:00:00Z")
    assert (decision.action, decision.reason, decision.remeasure, decision.stack) == (
        "start",
        SCHEDULED,
        WINNER,
        STACK,
    )
    assert decision.run == scheduled_remeasure_name("mlp", GPU, STACK, SINCE)
    assert decision.run not in (remeasure_name("mlp", GPU, STACK), run_name("mlp", GPU, STACK))
    assert check(PUBLISHED, "2026-12-09T00:00:00Z").run == decision.run  # repeated before the write: same run
    later = "2026-12-08T06:00:05Z"  # the next one counts from this re-measure's startedAt: another name
    assert scheduled_remeasure_name("mlp", GPU, STACK, later) != decision.run


def test_the_schedule_re_measures_only_a_finished_run_with_a_published_non_default_winner():
    due = "2026-12-31T00:00:00Z"
    for current in (None, RunOutcome("Running"), RunOutcome("Failed"), RunOutcome("Succeeded", "")):
        assert check(current, due).action == "none", current
    unchanged = decide("mlp", GPU, WEEK, STACK, DriverReading("550"), STACK, RunOutcome("Running"), WINNER)
    assert scheduled("mlp", GPU, unchanged, PUBLISHED, WINNER, 3600.0, SINCE, at(due)) == unchanged  # one going
    assert check(PUBLISHED, due, triggers=Triggers()).action == "none"  # no schedule
    changed = decide("mlp", GPU, WEEK, STACK.model_copy(update={"driver_major": "560"}), DriverReading("560"), STACK)
    assert scheduled("mlp", GPU, changed, PUBLISHED, None, 3600.0, SINCE, at(due)) == changed  # the change wins


def test_a_scheduled_re_measure_decides_as_a_re_measure_with_a_full_re_tune_of_its_own_name():
    started = "2026-12-08T06:00:05Z"  # the scheduled re-measure's startedAt
    running = scheduled_remeasure_name("mlp", GPU, STACK, SINCE)

    def after(current: RunOutcome):
        return decide(
            "mlp", GPU, WEEK, STACK, DriverReading("550"), STACK, current, WINNER,
            current_run=running, scheduled_since=started,
        )  # fmt: skip

    full = scheduled_retune_name("mlp", GPU, STACK, started)
    assert full not in (run_name("mlp", GPU, STACK), running)  # run_name(STACK) is the run it re-measured
    regressed = after(RunOutcome("Succeeded", ""))
    assert (regressed.action, regressed.reason, regressed.run) == ("start", REGRESSED, full)
    assert running in regressed.message and "on schedule" in regressed.message
    assert after(RunOutcome("Succeeded", "-intra_op_num_threads=2")).reason == RUNNER_UP_WINS
    assert after(RunOutcome("Succeeded", "-intra_op_num_threads=2")).run == full
    assert (after(PUBLISHED).action, after(PUBLISHED).reason) == ("record", "WinnerConfirmed")
    assert after(RunOutcome("Running")).action == "none"


def test_the_status_says_when_the_next_re_measure_is_due():
    status = PolicyTargetStatus(gpu_type=GPU, stack=STACK, run="r", started_at=SINCE)
    assert next_remeasure(7 * 24 * 3600.0, status, PUBLISHED) == "2026-12-08T06:00:00Z"
    assert next_remeasure(None, status, PUBLISHED) is None
    assert next_remeasure(3600.0, status, RunOutcome("Running")) is None
    assert next_remeasure(3600.0, status, RunOutcome("Succeeded", "")) is None
    going = target_status(status, GPU, check(PUBLISHED, "2026-12-08T06:00:00Z"), STACK, True, "2026-12-08T06:00:05Z")
    assert going.reason == SCHEDULED and going.started_at == "2026-12-08T06:00:05Z"
    assert next_remeasure(3600.0, going, PUBLISHED) is None  # while the re-measure goes
