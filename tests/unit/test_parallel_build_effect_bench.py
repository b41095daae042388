"""bench/parallel_build_effect.py's pure parts: routes parse as tune names them, engine keys carry no
load mark, and the ratio of engines built beside others to engines built alone is taken rep by rep,
with an interval that holds the ratio."""

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
