"""The tuning flow is one pure function of what was observed: the same observations give the same
step, and a step already done is never asked for again."""

import pytest

from enginewright.api.cache import CacheEntry, Outcome, TimingStats
from enginewright.api.routes import Knob, Route
from enginewright.search.flow import (
    Decided,
    Failed,
    FlowSpec,
    Observed,
    RunBatches,
    RunConfirmation,
    confirmation_name,
    first_step,
    next_step,
)
from enginewright.search.planners import PlanError

KNOBS = [Knob("a", ("on", "off"), "on"), Knob("b", ("x", "y", "z"), "x"), Knob("c", ("0", "1"), "0")]
DEFAULT = Route()


def entry(knobs: dict, ms: float | None, baseline: float = 10.0, outcome=Outcome.ok, kept: bool = True) -> CacheEntry:
    route = Route.of(knobs)
    timing = TimingStats(median_ms=ms, mean_ms=ms, p90_ms=ms, min_ms=ms, n=10) if ms else None
    return CacheEntry(
        target="cpu",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=outcome,
        timing=timing,
        baseline_ms=baseline,
        engine_uri=f"file:///{route.id}" if kept else None,
        error=None if outcome is Outcome.ok else "failed",
    )


def observed(*entries: CacheEntry, **kw) -> Observed:
    return Observed(KNOBS, {e.route_id: e for e in entries}, **kw)


def routes_of(step: RunBatches) -> list[str]:
    return [r.canonical for b in step.batches for r in b.routes]


FAST = FlowSpec(mode="fast", routes_per_batch=2, top_k=2, confirm_rounds=3)
STAGE1 = [
    entry({}, 10.0),
    entry({"a": "off"}, 8.0),
    entry({"b": "y"}, 10.1),
    entry({"b": "z"}, 9.9),
    entry({"c": "1"}, 7.0),
]


def test_nothing_observed_asks_for_every_stage1_batch_with_the_default_first():
    step = next_step(FAST, observed())
    assert isinstance(step, RunBatches) and step.stage == "stage1" and step.default == DEFAULT
    assert [b.name for b in step.batches] == ["stage1-b000", "stage1-b001", "stage1-b002"]
    assert routes_of(step)[0] == "" and len(routes_of(step)) == step.planned == 5


def test_the_first_step_is_the_step_of_nothing_observed():
    assert first_step(FAST, KNOBS) == next_step(FAST, observed())


def test_the_same_observations_give_the_same_step():
    seen = observed(*STAGE1[:3])
    assert next_step(FAST, seen) == next_step(FAST, seen)


def test_a_batch_whose_routes_all_have_entries_is_not_asked_for_again():
    step = next_step(FAST, observed(*STAGE1[:2]))
    assert [b.name for b in step.batches] == ["stage1-b001", "stage1-b002"]
    given_up = next_step(FAST, observed(*STAGE1[:2], given_up=frozenset({"stage1-b001"})))
    assert [b.name for b in given_up.batches] == ["stage1-b002"]


def test_measured_stage1_asks_for_a_confirmation_of_the_best_kept_candidates():
    step = next_step(FAST, observed(*STAGE1))
    assert isinstance(step, RunConfirmation)
    assert [e.route for e in step.candidates] == ["-c=1", "-a=off"] and step.rounds == 3
    assert step.name == confirmation_name(step.candidates) and step.default.route == ""


def test_a_recorded_confirmation_decides_and_is_not_asked_for_again():
    name = next_step(FAST, observed(*STAGE1)).name
    ids = {e.route: e.route_id for e in STAGE1}
    rounds = {ids[""]: [10.0, 10.2, 9.9], ids["-c=1"]: [7.0, 7.1, 6.9], ids["-a=off"]: [8.0, 8.1, 8.2]}
    step = next_step(FAST, observed(*STAGE1, confirmations={name: rounds}))
    assert isinstance(step, Decided) and step.decision.confirmed
    assert step.decision.winner_id == ids["-c=1"] and step.cut_short is None
    assert step.planned == 5 and len(step.entries) == 5


def test_confirmation_is_skipped_when_disabled_and_the_sweep_decides():
    step = next_step(FlowSpec(mode="fast", top_k=0), observed(*STAGE1))
    assert isinstance(step, Decided) and not step.decision.confirmed
    assert step.decision.winner_id == STAGE1[4].route_id


def test_mixed_runs_stage2_over_improving_knobs_then_confirms():
    spec = FlowSpec(mode="mixed", routes_per_batch=4, top_k=1)
    stage2 = next_step(spec, observed(*STAGE1))
    assert isinstance(stage2, RunBatches) and stage2.stage == "stage2"
    assert routes_of(stage2) == ["-a=off -c=1"]  # a and c improved; b did not beat the margin
    assert "2 improving knobs (a, c)" in stage2.note and stage2.planned == 6
    both = entry({"a": "off", "c": "1"}, 7.5)
    step = next_step(spec, observed(*STAGE1, both))
    assert isinstance(step, RunConfirmation) and [e.route for e in step.candidates] == ["-c=1"]


def test_mixed_stage2_cut_by_max_routes_says_so():
    spec = FlowSpec(mode="mixed", top_k=0, max_routes=5)
    step = next_step(spec, observed(*STAGE1))
    assert isinstance(step, Decided) and "maxRoutes=5 kept 0 of 1" in step.cut_short
    assert step.notes and "stage 2" in step.notes[0]


def test_a_default_rejected_by_accuracy_fails_the_target_with_a_reason():
    step = next_step(FAST, observed(entry({}, 10.0, outcome=Outcome.accuracy_rejected)))
    assert isinstance(step, Failed) and step.reason == "ReferenceMismatch"
    assert "spec.accuracy.pairs" in step.message


def test_out_of_time_decides_from_what_was_measured_and_says_it_was_cut():
    step = next_step(FAST, observed(*STAGE1[:3], out_of_time=True))
    assert isinstance(step, Decided) and "2 of 5 planned routes have no measurement" in step.cut_short
    assert "deadline" in step.cut_short


def test_out_of_time_before_the_default_was_measured_fails():
    step = next_step(FAST, observed(out_of_time=True))
    assert isinstance(step, Failed) and step.reason == "DefaultRouteNotMeasured"


def test_an_unknown_knob_is_a_plan_error_naming_the_field():
    with pytest.raises(PlanError, match="spec.search.knobs: the compiler has no knob 'nope'"):
        next_step(FlowSpec(knobs=(("nope", ("1",)),)), observed())
