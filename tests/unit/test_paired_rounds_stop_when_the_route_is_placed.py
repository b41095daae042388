"""Paired rounds stop as soon as the route is placed against the default, and not before: a clear
win stops at the minimum, a clear loss after two rounds, an A/A pair once its interval is tight, noise at the maximum. The
confirmation judges a candidate against both processes that hold the default. An exclusive knob is
never combined with other changes."""

import random

import pytest

from enginewright.api.routes import Knob, Route
from enginewright.measure.paired import interval, stop_reason, summarise
from enginewright.search.planners import SpaceKnob, build_space, improving_values, plan_full, plan_mixed_stage2
from enginewright.search.winner import confirm, twin

RULE = {"margin": 0.03, "precision": 0.01, "min_rounds": 5, "max_rounds": 30}


def rounds(ratio: float, noise: float, count: int, seed: int = 1) -> tuple[list[float], list[float]]:
    """Default around 1 ms drifting slowly, the route `ratio` times it, each with relative `noise`."""
    rng = random.Random(seed)
    default, route = [], []
    for i in range(count):
        drift = 1.0 + 0.2 * (i % 7) / 7  # the host's speed wanders; both engines of a round share it
        default.append(drift * (1 + rng.gauss(0, noise)))
        route.append(drift * ratio * (1 + rng.gauss(0, noise)))
    return route, default


def first_stop(ratio: float, noise: float, seed: int = 1) -> tuple[int, str]:
    route, default = rounds(ratio, noise, RULE["max_rounds"], seed)
    for n in range(1, len(route) + 1):
        reason = stop_reason(route[:n], default[:n], **RULE)
        if reason:
            return n, reason
    raise AssertionError("never stopped")


def test_a_clear_win_stops_at_the_minimum_rounds_and_a_clear_loss_before():
    assert first_stop(0.8, 0.01) == (5, "faster")
    assert first_stop(1.25, 0.01) == (2, "slower")  # slower beyond the margin: it cannot win


def test_drift_shared_by_both_engines_of_a_round_does_not_widen_the_interval():
    route, default = rounds(0.9, 0.002, 10)
    ratio, low, high = interval(route, default)
    assert 0.895 < low < ratio < high < 0.905  # the 20% drift cancels in the per-round ratios


def test_an_identical_engine_stops_once_it_cannot_beat_the_margin():
    count, reason = first_stop(1.0, 0.005)
    assert reason == "not-faster" and count == 5


def test_a_route_near_the_margin_line_goes_on_until_precise_or_the_maximum():
    count, reason = first_stop(0.97, 0.03)
    assert count > 5 and reason in ("precise", "max-rounds")
    count, reason = first_stop(0.97, 0.2)
    assert (count, reason) == (30, "max-rounds")


def test_no_win_is_placed_before_the_minimum_rounds():
    route, default = rounds(0.5, 0.0, 4)
    assert stop_reason(route, default, **RULE) is None
    route, default = rounds(2.0, 0.0, 1)
    assert stop_reason(route, default, **RULE) is None  # nor a loss after one round


def test_the_summary_is_the_geometric_mean_ratio_with_its_interval():
    paired = summarise([0.5, 0.5, 0.5], [1.0, 1.0, 1.0], "faster")
    assert (
        paired.ratio == pytest.approx(0.5) and paired.low == pytest.approx(0.5) and paired.speedup == pytest.approx(2.0)
    )
    assert paired.rounds == 3 and paired.stopped == "faster"


def test_a_candidate_must_beat_both_default_processes():
    base = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0]
    fast_process = [b * 0.85 for b in base]  # the twin process runs lastingly 15% faster
    candidate = [b * 0.9 for b in base]  # 10% faster than the first default process only
    decision = confirm({"d": base, twin("d"): fast_process, "c": candidate}, "d", 0.03)
    assert decision.default_won and "both loads of the default" in decision.reason
    decision = confirm({"d": base, "c": candidate}, "d", 0.03)
    assert decision.winner_id == "c" and decision.rounds == 7


def test_the_confirmed_speedup_is_against_the_mean_of_both_default_processes():
    base = [1.0, 1.01, 0.99, 1.0, 1.02]
    decision = confirm({"d": base, twin("d"): [b * 1.1 for b in base], "c": [b * 0.5 for b in base]}, "d", 0.03)
    assert decision.winner_id == "c" and decision.speedup == pytest.approx(1.1**0.5 / 0.5)


SPACE = [
    SpaceKnob("compile", "true", ("true", "false"), exclusive=True),
    SpaceKnob("a", "x", ("x", "y")),
    SpaceKnob("b", "0", ("0", "1")),
]


def test_full_search_tries_an_exclusive_value_only_alone():
    routes = plan_full(SPACE)
    assert len(routes) == 4 + 1
    assert Route.of({"compile": "false"}) in [Route.of(r.as_dict) for r in routes]
    assert not any("compile" in r.as_dict and len(r.as_dict) > 1 for r in routes)


def test_mixed_never_combines_an_exclusive_value():
    class Entry:
        def __init__(self, knobs, speedup):
            self.knobs, self.speedup, self.passed, self.median_ms = knobs, speedup, True, 1.0
            self.paired = None

    improving = improving_values(
        SPACE, [Entry({"compile": "false"}, 1.5), Entry({"a": "y"}, 1.2), Entry({"b": "1"}, 1.1)], 1.0, 0.03
    )
    assert set(improving) == {"a", "b"}
    assert [r.as_dict for r in plan_mixed_stage2(SPACE, improving)] == [{"a": "y", "b": "1"}]


def test_the_space_keeps_a_knobs_exclusiveness():
    space = build_space([Knob("compile", ("true", "false"), "true", exclusive=True), Knob("a", ("x", "y"), "x")])
    assert [k.exclusive for k in space] == [True, False]


def test_the_uncompiled_route_is_measured_with_pins_unless_left_out():
    from enginewright.search.planners import plan_fast

    knobs = [Knob("compile", ("true", "false"), "true", exclusive=True), Knob("a", ("x", "y"), "x")]
    space = build_space(knobs, pinned={"a": "y"})
    assert [k.name for k in space] == ["compile"]
    # the uncompiled route runs no compiler: it carries no pins (an option on it would fail its build)
    assert [r.as_dict for r in plan_fast(space, {"a": "y"})] == [{"a": "y"}, {"compile": "false"}]
    assert build_space(knobs, pinned={"a": "y"}, measure_exclusive=False) == []
    assert [k.name for k in build_space(knobs)] == ["compile", "a"]
    assert [k.name for k in build_space(knobs, measure_exclusive=False)] == ["a"]


def test_an_exclusive_knob_cannot_be_pinned_with_other_pins():
    from enginewright.search.planners import PlanError

    knobs = [Knob("compile", ("true", "false"), "true", exclusive=True), Knob("a", ("x", "y"), "x")]
    with pytest.raises(PlanError, match="compile=false ignores every other setting; pin it alone"):
        build_space(knobs, pinned={"compile": "false", "a": "y"})
    assert build_space(knobs, pinned={"compile": "false"}) == [SpaceKnob("a", "x", ("x", "y"))]
    assert [k.name for k in build_space(knobs, [("compile", ["false"])], pinned={"a": "y"})] == ["compile"]


def test_the_sweep_names_a_winner_only_when_the_whole_interval_clears_the_margin():
    from enginewright.api.cache import CacheEntry, Outcome, Paired, TimingStats
    from enginewright.search.winner import choose_winner, could_win

    def entry(knobs, ratio, low, high):
        route = Route.of(knobs)
        return CacheEntry(
            target="t",
            route_id=route.id,
            route=route.canonical,
            knobs=knobs,
            outcome=Outcome.ok,
            timing=TimingStats(median_ms=ratio, mean_ms=ratio, p90_ms=ratio, min_ms=ratio, n=5),
            baseline_ms=1.0,
            paired=None if ratio == 1.0 else Paired(ratio=ratio, low=low, high=high, rounds=5, stopped="x"),
        )

    default = entry({}, 1.0, 1.0, 1.0)
    hopeful = entry({"a": "y"}, 0.85, 0.70, 1.03)  # fastest point estimate, interval crosses the line
    clear = entry({"b": "1"}, 0.92, 0.90, 0.94)
    decision = choose_winner([default, hopeful, clear], default.route_id, 0.03)
    assert decision.winner_id == clear.route_id and "unconfirmed" in decision.reason
    assert choose_winner([default, hopeful], default.route_id, 0.03).default_won
    assert could_win(hopeful, 0.03) and not could_win(entry({"c": "1"}, 1.1, 1.05, 1.15), 0.03)


def test_rounds_alternate_which_engine_goes_first_until_the_rule_stops_them():
    from enginewright.measure.paired import alternate

    firsts = []
    route_ms, default_ms, reason = alternate(
        lambda default_first: firsts.append(default_first) or (1.0, 2.0), lambda r, d: "enough" if len(r) == 5 else None
    )
    assert firsts == [True, False, False, True, True]  # ABBA: a drift within four rounds hits both alike
    assert (route_ms, default_ms, reason) == ([1.0] * 5, [2.0] * 5, "enough")


def test_engines_in_processes_of_their_own_take_whole_rounds_in_turn():
    from enginewright.measure.paired import alternate, one_after_the_other

    order = []
    route_ms, default_ms, _ = alternate(
        one_after_the_other(lambda: order.append("d") or 2.0, lambda: order.append("r") or 1.0),
        lambda r, d: "enough" if len(r) == 3 else None,
    )
    assert order == ["d", "r", "r", "d", "r", "d"]
    assert (route_ms, default_ms) == ([1.0] * 3, [2.0] * 3)


def test_interleaved_rounds_vary_who_goes_first_and_who_follows_whom():
    from enginewright.measure.paired import round_order

    three = [tuple(round_order(["a", "b", "c"], i)) for i in range(6)]
    assert len(set(three)) == 6  # every order once in six rounds: each engine follows each other one
    assert [order[0] for order in three].count("a") == 2
    two = [tuple(round_order(["d", "r"], i)) for i in range(4)]
    assert two.count(("d", "r")) == 2 and two.count(("r", "d")) == 2
