"""The default route is measured fresh by every run, whatever the cache holds; a reused route wins only
through a confirmation round against that fresh default: its reused number alone never wins."""

from enginewright.api.cache import Paired, TimingStats
from enginewright.api.routes import Knob, Route
from enginewright.search.flow import Decided, FlowSpec, Observed, RunBatches, RunConfirmation, next_step
from tests.unit.test_reuse_needs_the_same_fingerprint import ROUTE, base, entry

KNOBS = [Knob("max_autotune", ("0", "1"), "0")]
SPEC = FlowSpec(mode="fast", routes_per_batch=8, top_k=3, confirm_rounds=5, confirm_loads=2)


def test_the_default_is_always_measured_fresh():
    default = Route.of({})
    reused_default = entry(base(), route=default).model_copy(update={"reused_from": "run earlier"})
    reused_route = entry(base()).model_copy(update={"reused_from": "run earlier"})
    step = next_step(SPEC, Observed(KNOBS, {default.id: reused_default, ROUTE.id: reused_route}))
    assert isinstance(step, RunBatches) and [r.id for b in step.batches for r in b.routes] == [default.id, ROUTE.id]


def test_a_reused_route_wins_only_through_confirmation():
    default = Route.of({})
    fresh_default = entry(base(), route=default, run="this-run", baseline_ms=1.0)
    faster = entry(
        base(),
        timing=TimingStats(median_ms=0.5, mean_ms=0.5, p90_ms=0.5, min_ms=0.5, n=10),
        baseline_ms=1.0,
        engine_uri="file:///e",
        engine_sha256="0" * 64,
        paired=Paired(ratio=0.5, low=0.45, high=0.55, rounds=5, stopped="faster"),
    )
    reused = faster.model_copy(update={"reused_from": "run earlier"})
    entries = {default.id: fresh_default, ROUTE.id: reused}
    no_confirm = FlowSpec(mode="fast", top_k=0)
    decided = next_step(no_confirm, Observed(KNOBS, entries))
    assert isinstance(decided, Decided) and decided.decision.default_won
    assert any("a reused number alone never wins" in note for note in decided.notes)
    assert decided.summary()["reused"] == {ROUTE.id: "run earlier"}
    # The same number measured by this run wins unconfirmed (the flow's rule for its own routes).
    own = next_step(no_confirm, Observed(KNOBS, {default.id: fresh_default, ROUTE.id: faster}))
    assert own.decision.winner_id == ROUTE.id
    # With confirmation on, the reused route is confirmed against this run's default.
    step = next_step(SPEC, Observed(KNOBS, entries))
    assert isinstance(step, RunConfirmation) and [c.route_id for c in step.candidates] == [ROUTE.id]
    assert step.default is fresh_default
