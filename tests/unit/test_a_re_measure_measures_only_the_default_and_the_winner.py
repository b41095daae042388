"""spec.search.routes: a run that measures only the default and the listed routes (how a policy
re-measures a published winner on a new stack), then confirms them against the default with the
product's confirmation rule; nothing else is planned, whatever the mode or the compiler's knobs."""

import pytest
from pydantic import ValidationError

from enginewright.api.models import Search
from enginewright.api.routes import Knob, Route
from enginewright.measure.paired import load_key
from enginewright.search.flow import Decided, FlowSpec, Observed, RunBatches, RunConfirmation, first_step, next_step
from enginewright.search.planners import PlanError
from tests.unit.test_tuning_flow_steps import entry

KNOBS = [Knob("a", ("on", "off"), "on"), Knob("b", ("x", "y", "z"), "x"), Knob("c", ("0", "1"), "0")]
WINNER = Route.of({"a": "off", "b": "y"})


def test_only_the_default_and_the_listed_route_are_planned():
    step = first_step(FlowSpec(routes=("-b=y -a=off",)), KNOBS)  # any token order: the canonical route
    assert [r for b in step.batches for r in b.routes] == [Route(), WINNER]
    assert step.planned == 2


def test_the_listed_route_is_confirmed_against_the_default_and_the_rule_decides():
    spec = FlowSpec(routes=(WINNER.canonical,))
    entries = {e.route_id: e for e in (entry({}, 10.0), entry(WINNER.as_dict, 8.0))}
    step = next_step(spec, Observed(KNOBS, entries))
    assert isinstance(step, RunConfirmation) and [c.route_id for c in step.candidates] == [WINNER.id]
    # The winner of the old stack is now 3% slower than the default, on every load: the default wins
    rounds = {
        **{load_key(Route().id, i): [10.0 + 0.01 * i, 10.02 + 0.01 * i] * 3 for i in range(5)},
        **{load_key(WINNER.id, i): [10.3 + 0.01 * i, 10.31 + 0.01 * i] * 3 for i in range(5)},
    }
    decided = next_step(spec, Observed(KNOBS, entries, {step.name: rounds}))
    assert isinstance(decided, Decided) and decided.decision.default_won and decided.decision.confirmed


def test_a_listed_route_the_compiler_cannot_build_names_the_route():
    with pytest.raises(PlanError, match=r"spec.search.routes\['-d=1'\].*no knob 'd'"):
        first_step(FlowSpec(routes=("-d=1",)), KNOBS)
    with pytest.raises(PlanError, match="does not allow 'w'"):
        first_step(FlowSpec(routes=("-b=w",)), KNOBS)


def test_routes_cannot_be_combined_with_knobs_or_mixed_and_must_set_a_knob():
    with pytest.raises(ValidationError, match="cannot be combined"):
        Search.model_validate({"routes": ["-a=off"], "mode": "mixed"})
    with pytest.raises(ValidationError, match="cannot be combined"):
        Search.model_validate({"routes": ["-a=off"], "knobs": [{"name": "a", "values": ["off"]}]})
    with pytest.raises(ValidationError, match="sets no knob"):
        Search.model_validate({"routes": [" "]})
    with pytest.raises(ValidationError, match="not of the form"):
        Search.model_validate({"routes": ["a=off"]})
    assert isinstance(first_step(FlowSpec(mode="full", routes=("-c=1",)), KNOBS), RunBatches)
