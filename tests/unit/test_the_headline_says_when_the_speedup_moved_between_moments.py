"""An interval across loads is about one moment: when the winner's sweep and its confirmation, minutes
apart in one run, measured speedups whose intervals do not overlap, the headline says so (status,
provenance, report) with both figures and the range they cover. On the H200 the transformer block's
host-bound default moved 0.27-0.59 ms within one run: its cudagraphs route read 2.23x (95% 2.13-2.33)
in the sweep and 2.53x (2.52-2.54) in the confirmation (docs/benchmarks/raw/s11/call7)."""

import pytest

from enginewright.api.cache import CacheEntry, Paired
from enginewright.measure.paired import load_key
from enginewright.search.flow import Decided
from enginewright.search.winner import confirm
from tests.unit.entries import measured


def entry(knobs, median, paired=None, reused_from=None):
    return measured(
        knobs,
        median,
        target="local",
        paired=paired,
        objective="gpuTime",
        engine_uri="file:///e",
        reused_from=reused_from,
    )


def paired(ratio: float, spread: float) -> Paired:
    return Paired(
        ratio=ratio,
        low=ratio * (1 - spread),
        high=ratio * (1 + spread),
        rounds=5,
        stopped="faster",
        loads=2,
        default_loads=2,
        df=2,
        route_ms=0.148,
        default_ms=0.148 / ratio,
    )


DEFAULT = entry({}, 0.588)


def decided(winner: CacheEntry, confirmed_ratio: float) -> Decided:
    rounds = {}
    for i in range(5):
        rounds[load_key(DEFAULT.route_id, i)] = [0.38 * (1 + 0.002 * i) * (1 + 0.003 * r) for r in range(5)]
        rounds[load_key(winner.route_id, i)] = [
            0.38 * confirmed_ratio * (1 - 0.002 * i) * (1 + 0.003 * r) for r in range(5)
        ]
    decision = confirm(rounds, DEFAULT.route_id, 0.03)
    assert decision.winner_id == winner.route_id and decision.confirmed
    return Decided(decision, DEFAULT, (DEFAULT, winner), planned=2)


def test_a_sweep_and_a_confirmation_apart_are_both_said():
    winner = entry({"triton.cudagraphs": "true"}, 0.148, paired(0.449, 0.045))
    step = decided(winner, 1 / 2.53)
    moments = step.headline()["moments"]
    assert moments["apart"]
    assert moments["sweep"]["speedup"] == pytest.approx(1 / 0.449)
    assert moments["confirmation"]["speedup"] == pytest.approx(2.53, rel=0.01)
    low, high = moments["range"]
    assert low == pytest.approx(moments["sweep"]["low"]) and high == pytest.approx(moments["confirmation"]["high"])
    text = step.headline_text()
    assert f"its sweep measured {1 / 0.449:.3f}x" in text and "moved with the host's state" in text


def test_moments_that_agree_add_nothing_to_the_headline_line():
    winner = entry({"triton.cudagraphs": "true"}, 0.148, paired(1 / 2.52, 0.03))
    step = decided(winner, 1 / 2.53)
    assert step.headline()["moments"]["apart"] is False
    assert "sweep measured" not in step.headline_text()


def test_a_reused_winner_has_no_moment_of_this_run():
    winner = entry({"triton.cudagraphs": "true"}, 0.148, paired(0.449, 0.045), reused_from="ns/earlier-run")
    assert decided(winner, 1 / 2.53).headline()["moments"] is None
