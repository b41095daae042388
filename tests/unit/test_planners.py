"""fast / full / mixed planners, budgets, batching and resume."""

import pytest
from hypothesis import given, strategies as st

from enginewright.api.cache import CacheEntry, Outcome, TimingStats
from enginewright.api.routes import Knob
from enginewright.search.planners import (
    PlanError,
    build_space,
    full_size,
    improving_values,
    make_batches,
    pending,
    plan_fast,
    plan_full,
    plan_mixed_stage2,
    plan_stage1,
)

KNOBS = [
    Knob("a", ("on", "off"), "on"),
    Knob("b", ("0", "1", "2", "3"), "1"),
    Knob("c", ("x", "y", "z"), "x"),
    Knob("regs", None, "0"),
]


def test_fast_is_default_plus_one_change_at_a_time():
    space = build_space(KNOBS)
    routes = plan_fast(space)
    assert routes[0].canonical == ""
    assert len(routes) == 1 + (1 + 3 + 2)  # 1 + number of non-default values
    assert all(len(r.knobs) == 1 for r in routes[1:])
    assert len({r.id for r in routes}) == len(routes)


def test_empty_space_takes_every_sweepable_knob_but_not_open_ended_ones():
    names = [k.name for k in build_space(KNOBS)]
    assert names == ["a", "b", "c"]


def test_open_ended_knob_sweeps_only_explicit_values():
    space = build_space(KNOBS, [("regs", ["32", "64"])])
    assert [r.canonical for r in plan_fast(space)] == ["", "-regs=32", "-regs=64"]


def test_unknown_knob_and_disallowed_value_name_the_knob():
    with pytest.raises(PlanError, match="no knob 'bb'.*did you mean b"):
        build_space(KNOBS, [("bb", ["1"])])
    with pytest.raises(PlanError, match="knob 'a' does not allow 'maybe'"):
        build_space(KNOBS, [("a", ["maybe"])])
    with pytest.raises(PlanError, match="also pinned"):
        build_space(KNOBS, [("a", ["off"])], pinned={"a": "off"})


def test_pinned_knobs_are_in_every_route_including_default():
    space = build_space(KNOBS, [("b", ["2"])], pinned={"c": "z"})
    assert [r.canonical for r in plan_fast(space, {"c": "z"})] == ["-c=z", "-b=2 -c=z"]


@given(st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_full_is_the_cartesian_product(sizes):
    knobs = [Knob(f"k{i}", tuple(str(v) for v in range(n)), "0") for i, n in enumerate(sizes)]
    space = build_space(knobs, [(k.name, list(k.values)) for k in knobs])
    routes = plan_full(space)
    assert len(routes) == full_size(space) == len({r.id for r in routes})
    assert routes[0].canonical == ""


def test_full_over_budget_is_refused_with_the_field_name():
    space = build_space(KNOBS)
    with pytest.raises(PlanError, match=r"24 routes, over spec.search.maxRoutes=10"):
        plan_full(space, max_routes=10)
    with pytest.raises(PlanError, match="maxRoutes=3"):
        plan_stage1("fast", space, max_routes=3)


def entry(knobs, median, baseline=10.0, outcome=Outcome.ok, batch="stage1-b000"):
    from enginewright.api.routes import Route

    route = Route.of(knobs)
    timing = TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=10) if median else None
    return CacheEntry(
        target="t",
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=outcome,
        timing=timing,
        baseline_ms=baseline,
        batch=batch,
    )


def test_improving_needs_accuracy_and_more_than_the_noise_margin():
    space = build_space(KNOBS)
    stage1 = [
        entry({}, 10.0),
        entry({"a": "off"}, 9.0),  # 10% faster: improving
        entry({"b": "2"}, 9.9),  # 1% faster: noise
        entry({"b": "3"}, 8.0, outcome=Outcome.accuracy_rejected),  # fast but wrong
        entry({"c": "y"}, 8.5),  # improving
        entry({"c": "z"}, None, outcome=Outcome.crash),
    ]
    improving = improving_values(space, stage1, default_ms=10.0, margin=0.03)
    assert set(improving) == {"a", "c"}
    assert improving["c"][0][0] == "y"


def test_mixed_stage2_combines_improving_knobs_only_and_orders_by_promise():
    space = build_space(KNOBS)
    improving = {"a": [("off", 1.1)], "c": [("y", 1.2), ("z", 1.05)]}
    routes = plan_mixed_stage2(space, improving)
    assert [r.canonical for r in routes] == ["-a=off -c=y", "-a=off -c=z"]
    assert plan_mixed_stage2(space, {"a": [("off", 1.1)]}) == []
    assert len(plan_mixed_stage2(space, improving, budget=1)) == 1


def test_batches_are_deterministic_and_resume_skips_done_routes():
    routes = plan_full(build_space(KNOBS))
    batches = make_batches(routes, 5, "stage1")
    assert [b.name for b in batches] == [f"stage1-b{i:03d}" for i in range(5)]
    assert make_batches(routes, 5, "stage1") == batches
    assert sum(len(b.routes) for b in batches) == len(routes)
    done = [r.id for r in routes[:7]]
    assert pending(routes, done) == routes[7:]
