"""bench/inductor_cost.py's pure parts: the naive sweep holds every configuration tune can name, each
named as tune names its route, and the ratios are tune over naive."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from inductor_cost import configurations, ratios, route_text  # noqa: E402


def test_the_sweep_holds_eager_once_and_every_combination_of_the_others():
    configs = configurations(["compile", "freezing", "triton.cudagraphs"])
    assert configs[0] == {}  # the default first
    assert configs.count({"compile": "false"}) == 1
    assert len(configs) == 1 + 4  # eager, and 2 x 2 compiled
    assert [route_text(c) for c in configs] == [
        "",
        "-compile=false",
        "-triton.cudagraphs=true",
        "-freezing=true",
        "-freezing=true -triton.cudagraphs=true",
    ]
    assert configurations(["freezing"]) == [{}, {"freezing": "true"}]


def test_ratios_are_tune_over_naive():
    assert ratios({"wall_s": 10.0, "cpu_s": 20.0}, {"wall_s": 25.0, "cpu_s": 30.0}) == {"wall": 2.5, "cpu": 1.5}


def test_variants_name_their_sides_and_their_order_rotates(tmp_path):
    from inductor_cost import parse_variants, side_order

    assert parse_variants([]) == {"tune": None}
    for name in ("before", "after"):
        (tmp_path / name / "enginewright").mkdir(parents=True)
    variants = parse_variants([f"before={tmp_path / 'before'}", f"after={tmp_path / 'after'}"])
    assert list(variants) == ["tune:before", "tune:after"]
    sides = ["naive", *variants]
    orders = [side_order(sides, pair) for pair in range(6)]
    assert len({tuple(order) for order in orders}) == 6  # every order of three sides once in six pairs
    assert all(sorted(order) == sorted(sides) for order in orders)
    for first, second in [("tune:before", "tune:after"), ("naive", "tune:after"), ("naive", "tune:before")]:
        ahead = [order.index(first) < order.index(second) for order in orders[:2]]
        assert ahead == [True, False] or ahead == [False, True]  # every pair of pairs balances each two
    assert side_order(["naive", "tune"], 1) == ["tune", "naive"]
    with pytest.raises(SystemExit, match="no enginewright package"):
        parse_variants([f"x={tmp_path}"])
    with pytest.raises(SystemExit, match="NAME=OPERATOR_DIR"):
        parse_variants(["before"])


def test_a_variant_takes_its_own_tune_options(tmp_path):
    from inductor_cost import parse_variant_args, parse_variants

    (tmp_path / "enginewright").mkdir()
    variants = parse_variants([f"w1={tmp_path}", f"w4={tmp_path}"])
    extra = parse_variant_args(["w4=--build-parallelism 4"], variants)
    assert extra == {"tune:w4": ["--build-parallelism", "4"]}
    with pytest.raises(SystemExit, match="for a --variant NAME"):
        parse_variant_args(["w2=--build-parallelism 2"], variants)
