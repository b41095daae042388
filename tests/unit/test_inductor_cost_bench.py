"""bench/inductor_cost.py's pure parts: the naive sweep holds every configuration tune can name, each
named as tune names its route, and the ratios are tune over naive."""

import sys
from pathlib import Path

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
