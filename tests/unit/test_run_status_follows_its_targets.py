"""The run's status from its targets' (pure, `controller.status`): its phase, progress, best speedup,
message and conditions; the event said once when the run finishes; a stalled run keeps what it had;
a target's counts from its cache entries."""

from enginewright.api.cache import CacheEntry, Outcome, TimingStats
from enginewright.api.models import RouteResult, TargetStatus
from enginewright.api.routes import Route
from enginewright.controller.status import condition, is_true, run_status, stalled, target_counts, waiting_for_store
from enginewright.search.flow import Failed


def target(gpu: str, stage: str, **fields) -> TargetStatus:
    return TargetStatus(gpu_type=gpu, stage=stage, **fields)


def status_of(targets, previous=None, dry_run=False):
    return run_status(targets, previous or {}, 3, objective="latency", accuracy_validated=True, dry_run=dry_run)


def test_a_run_is_pending_until_a_target_runs_then_running_then_confirming():
    assert status_of([target("a", "probing"), target("b", "pending")])[0]["phase"] == "Pending"
    assert status_of([target("a", "stage1"), target("b", "probing")])[0]["phase"] == "Running"
    assert status_of([target("a", "stage2"), target("b", "done")])[0]["phase"] == "Running"
    assert status_of([target("a", "confirming"), target("b", "stage1")])[0]["phase"] == "Confirming"


def test_an_unfinished_run_is_reconciling_with_no_event_and_says_why_a_target_waits():
    status, event = status_of(
        [target("a", "stage1", message="3 Jobs"), target("b", "probing", reason="Unschedulable", message="no node")]
    )
    assert event is None and status["observedGeneration"] == 3
    assert status["message"] == "a: 3 Jobs; b: no node"
    assert is_true(status, "Reconciling") and not is_true(status, "Ready") and not is_true(status, "Stalled")
    assert condition(status, "Reconciling")["reason"] == "Unschedulable"
    assert condition(status, "Ready")["reason"] == "Unschedulable"
    assert condition(status_of([target("a", "stage1")])[0], "Reconciling")["reason"] == "Reconciling"


def test_progress_counts_every_measured_route_and_the_best_speedup_names_the_objective():
    winner = RouteResult(route_id="r1", route="x=1", speedup=1.23456)
    status, _ = status_of(
        [
            target("a", "done", planned=4, done=2, failed=1, rejected=1, winner=winner),
            target("b", "stage1", planned=6, done=1),
        ]
    )
    assert status["progress"] == "5/10" and status["bestSpeedup"] == "1.235x latency"
    assert status["accuracyValidated"] is True and [t["gpuType"] for t in status["targets"]] == ["a", "b"]
    assert status_of([target("a", "probing")])[0]["progress"] is None


def test_a_run_whose_targets_are_done_succeeds_and_says_so_once():
    targets = [target("a", "done", message="winner x=1"), target("b", "done", message="kept the default")]
    status, event = status_of(targets)
    assert status["phase"] == "Succeeded" and status["message"] == "a: winner x=1; b: kept the default"
    assert is_true(status, "Ready") and condition(status, "Ready")["reason"] == "Succeeded"
    assert event == ("Normal", "Succeeded", status["message"])
    again, event = status_of(targets, previous=status)
    assert again["phase"] == "Succeeded" and event is None
    assert condition(again, "Ready")["lastTransitionTime"] == condition(status, "Ready")["lastTransitionTime"]


def test_a_dry_run_succeeds_as_a_dry_run():
    status, event = status_of([target("a", "done", message="12 routes")], dry_run=True)
    assert status["message"] == "dry run: a: 12 routes" and condition(status, "Ready")["reason"] == "DryRun"
    assert event == ("Normal", "DryRun", "dry run: a: 12 routes")


def test_a_run_with_a_failed_target_fails_with_that_targets_reason_once_all_are_finished():
    failed = target("b", "failed", reason="ProbeFailed", message="ProbeFailed: the probe ended")
    assert status_of([target("a", "stage1"), failed])[0]["phase"] == "Running"
    status, event = status_of([target("a", "done", message="winner"), failed])
    assert status["phase"] == "Failed" and status["message"] == "b: ProbeFailed: the probe ended"
    assert is_true(status, "Stalled") and condition(status, "Stalled")["reason"] == "ProbeFailed"
    assert event == ("Warning", "Failed", status["message"])
    assert status_of([target("a", "done"), failed], previous=status)[1] is None
    assert condition(status_of([target("b", "failed", message="?")])[0], "Stalled")["reason"] == "TargetFailed"


def test_a_stalled_run_keeps_its_phase_and_targets_unless_it_can_never_go_on():
    previous = {"phase": "Running", "targets": [{"gpuType": "a", "stage": "stage1"}], "progress": "1/4"}
    status = stalled(previous, 2, "JobNameTaken", "Job x exists")
    assert status["phase"] == "Running" and status["targets"] == previous["targets"]
    assert status["progress"] == "1/4" and status["message"] == "Job x exists" and status["observedGeneration"] == 2
    assert is_true(status, "Stalled") and condition(status, "Stalled")["reason"] == "JobNameTaken"
    assert stalled({}, 1, "InvalidSpec", "spec.x: bad")["phase"] == "Pending"
    assert stalled({}, 1, "InvalidSpec", "spec.x: bad", final=True)["phase"] == "Failed"


def test_a_store_away_keeps_the_status_and_reconciles():
    previous = {"phase": "Running", "targets": [{"gpuType": "a", "stage": "stage1"}]}
    status = waiting_for_store(previous, 2, "waiting for the object store: timeout")
    assert status["phase"] == "Running" and status["targets"] == previous["targets"]
    assert is_true(status, "Reconciling") and condition(status, "Reconciling")["reason"] == "StoreUnavailable"


def entry(knobs: dict, outcome=Outcome.ok, median=None, baseline=10.0, build=None, reused_from=None) -> CacheEntry:
    route = Route.of(knobs)
    timing = TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=10) if median else None
    return CacheEntry(
        target="a",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=outcome,
        timing=timing,
        baseline_ms=baseline,
        build_seconds=build,
        measure_seconds=1.0 if timing else None,
        reused_from=reused_from,
    )


def test_a_targets_counts_come_from_its_cache_entries():
    entries = [
        entry({}, median=10.0),
        entry({"a": "1"}, median=5.0, build=2.0),
        entry({"a": "2"}, median=8.0, build=3.0, reused_from="earlier-run"),
        entry({"a": "3"}, Outcome.build_failed, build=4.0),
        entry({"a": "4"}, Outcome.accuracy_rejected),
    ]
    counted = target_counts(
        target("a", "stage1"), {e.route_id: e for e in entries}, Failed("NoDefault", "?", planned=7)
    )
    assert (counted.planned, counted.done, counted.failed, counted.rejected, counted.unmeasured) == (7, 3, 1, 1, 0)
    assert counted.default_ms == 10.0 and counted.best.speedup == 2.0
    assert counted.best.route == Route.of({"a": "1"}).canonical
    assert counted.gpu_seconds == 1.0 + (2.0 + 1.0) + 4.0  # the reused entry's time was the earlier run's
