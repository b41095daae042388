"""bench/parallel_build_effect.py's pure parts: routes parse as tune names them, engine keys carry no
load mark, and the ratio of engines built beside others to engines built alone is taken rep by rep,
with an interval that holds the ratio."""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from enginewright.api.routes import Route  # noqa: E402
from enginewright.measure.paired import LOAD_MARK  # noqa: E402
from parallel_build_effect import engine_name, parse_routes, ratio_across_reps  # noqa: E402


def test_routes_parse_with_the_default_as_an_empty_one():
    routes = parse_routes(";coordinate_descent_tuning=true;triton.cudagraphs=true,compile=true")
    assert routes == [{}, {"coordinate_descent_tuning": "true"}, {"triton.cudagraphs": "true", "compile": "true"}]
    assert [str(Route.of(r)) for r in routes][:2] == [
        "(default)",
        "-coordinate_descent_tuning=true",
    ]  # as tune names them
    with pytest.raises(SystemExit, match="twice"):
        parse_routes("a=1;a=1")


def test_engine_keys_carry_no_load_mark():
    assert LOAD_MARK not in engine_name(3, "beside", 2) and engine_name(3, "beside", 2) != engine_name(3, "alone", 2)


def test_the_ratio_is_taken_rep_by_rep_and_its_interval_holds_it():
    figures = ratio_across_reps([1.10, 1.00, 1.21], [1.0, 1.0, 1.1])
    assert figures["per_rep"] == [1.1, 1.0, 1.1]
    assert figures["low"] < figures["ratio"] < figures["high"]
    assert figures["ratio"] == pytest.approx((1.1 * 1.0 * 1.1) ** (1 / 3), abs=1e-4)
    assert "low" not in ratio_across_reps([1.2], [1.0])  # one rep: no interval


def test_an_engines_time_is_over_all_its_loads():
    from parallel_build_effect import engine_ms

    rounds = {"r0-alone0": [1.0, 1.0], f"r0-alone0{LOAD_MARK}2": [4.0, 4.0], "r1-alone0": [9.0, 9.0]}
    assert engine_ms(rounds, "r0-alone0", 2) == pytest.approx(2.0)  # not the first load's 1.0
    assert engine_ms(rounds, "r0-alone0", 1) == pytest.approx(1.0)


def test_the_pooled_ratio_leaves_out_routes_whose_builds_gave_the_same_bytes():
    from parallel_build_effect import pooled_ratio

    same = {"distinct_digests": {"alone": 1, "beside": 1}, "shared_digests": 1, "beside_ms": [9.0], "alone_ms": [1.0]}
    differ = {"distinct_digests": {"alone": 2, "beside": 2}, "shared_digests": 0}
    by_route = {
        "-compile=false": same,
        "(default)": {**differ, "beside_ms": [1.1, 1.0], "alone_ms": [1.0, 1.0]},
        "-x=1": {**differ, "beside_ms": [1.21], "alone_ms": [1.1]},
    }
    pooled = pooled_ratio(by_route)
    assert pooled["routes"] == ["(default)", "-x=1"] and pooled["per_rep"] == [1.1, 1.0, 1.1]
    assert pooled_ratio({"-compile=false": same}) is None


def _rounds(per_engine_loads: dict[str, list[float]]) -> dict[str, list[float]]:
    """Rounds as `interleave` keys them: each engine's loads (first unmarked), two equal rounds a load."""
    from enginewright.measure.paired import load_key

    return {load_key(e, i): [ms, ms] for e, loads in per_engine_loads.items() for i, ms in enumerate(loads)}


def test_builds_that_run_apart_beyond_their_loads_show_a_spread():
    from parallel_build_effect import build_spread

    # three builds 1.0, 1.2, 1.4 ms; each build's two loads 2% apart
    rounds = _rounds({"a": [0.99, 1.01], "b": [1.188, 1.212], "c": [1.386, 1.414]})
    spread = build_spread(rounds, ["a", "b", "c"], 2)
    assert spread["builds"] == 3 and spread["max_over_min"] == pytest.approx(1.4, abs=0.01)
    assert spread["between_builds"] == pytest.approx(0.168, abs=0.01)  # the sd of log(1.0, 1.2, 1.4)
    assert spread["between_loads"] < 0.02 and spread["p"] < 0.001


def test_builds_whose_differences_are_only_their_loads_show_none():
    from parallel_build_effect import build_spread

    # loads 20% apart within each build, the builds' means alike: what a load does, not a build
    rounds = _rounds({"a": [0.9, 1.1], "b": [1.1, 0.9], "c": [0.95, 1.05]})
    spread = build_spread(rounds, ["a", "b", "c"], 2)
    assert spread["between_builds"] == 0.0 and spread["p"] > 0.5
    assert spread["between_loads"] > 0.1


def test_the_same_bytes_every_time_is_no_spread_and_one_build_or_load_is_none():
    from parallel_build_effect import build_spread

    rounds = _rounds({"a": [1.0, 1.0], "b": [1.0, 1.0]})
    spread = build_spread(rounds, ["a", "b"], 2)
    assert spread["max_over_min"] == 1.0 and spread["between_builds"] == spread["between_loads"] == 0.0
    assert spread["f"] is None and spread["p"] == 1.0
    assert build_spread(rounds, ["a"], 2) is None and build_spread(rounds, ["a", "b"], 1) is None


def test_the_f_tail_meets_the_tables_critical_values():
    from enginewright.measure.stats import f_sf

    for f, df1, df2 in ((4.10, 2, 10), (3.49, 3, 12), (6.59, 3, 4), (161.4, 1, 1)):
        assert f_sf(f, df1, df2) == pytest.approx(0.05, abs=0.001)
    assert f_sf(1.0, 5, 5) == pytest.approx(0.5) and f_sf(0.0, 2, 3) == 1.0 and f_sf(math.inf, 2, 3) == 0.0


def test_another_rep_starts_only_while_it_fits_the_build_budget():
    from parallel_build_effect import rep_fits

    assert rep_fits(0.0, 0.0, 100.0) and rep_fits(500.0, 400.0, 0.0)  # the first rep; no budget
    assert rep_fits(150.0, 140.0, 300.0) and not rep_fits(170.0, 140.0, 300.0)


def test_the_config_spread_counts_kernels_chosen_differently_in_any_build():
    from parallel_build_effect import config_spread

    a = {"k1": {"XBLOCK": 1024, "found_by_coordesc": True}, "k2": {"XBLOCK": 8, "found_by_coordesc": False}}
    same = {k: dict(v) for k, v in a.items()}
    other = {**a, "k1": {"XBLOCK": 512, "found_by_coordesc": True}}
    fewer = {"k2": a["k2"]}
    assert config_spread([a, same]) == {"kernels": 2, "tuned": [2, 2], "by_descent": [1, 1], "differ": 0}
    assert config_spread([a, same, other])["differ"] == 1  # k1 chosen otherwise in one build of three
    assert config_spread([a, fewer])["differ"] == 1  # k1 tuned in one build only
    assert config_spread([{}, {}]) == {"kernels": 0, "tuned": [0, 0], "by_descent": [0, 0], "differ": 0}  # eager


def test_the_faster_of_two_builds_is_taken_over_every_pair():
    from parallel_build_effect import best_of_two

    # pairs of (1, 2, 4): faster 1, 1, 2 -> mean 4/3; one build's mean 7/3
    assert best_of_two([1.0, 2.0, 4.0]) == {"builds": 3, "one_over_faster_of_two": 1.75, "worst_over_best": 4.0}
    assert best_of_two([1.5, 1.5])["one_over_faster_of_two"] == 1.0  # builds alike: nothing to gain
    assert best_of_two([1.5]) is None
