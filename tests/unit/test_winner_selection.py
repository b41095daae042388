"""Winner selection with a noise margin, and the interleaved confirmation rule."""

import random

import pytest

from enginewright.search.winner import choose_winner, confirm, noise_margin, strict_winner, t_quantile
from tests.unit.test_planners import entry

DEFAULT = entry({}, 10.0).route_id


def test_default_wins_when_nothing_beats_it_beyond_the_margin():
    entries = [entry({}, 10.0), entry({"a": "off"}, 9.8), entry({"b": "2"}, 9.9)]
    decision = choose_winner(entries, DEFAULT, margin=0.03)
    assert decision.default_won and decision.speedup == 1.0
    assert strict_winner(entries, DEFAULT) != DEFAULT  # the naive rule is fooled by 2%


def test_fastest_passing_route_wins_beyond_the_margin():
    entries = [
        entry({}, 10.0),
        entry({"a": "off"}, 8.0),
        entry({"b": "2"}, 7.0, outcome="accuracy-rejected"),
        entry({"c": "y"}, 9.0),
    ]
    decision = choose_winner(entries, DEFAULT, margin=0.03)
    assert decision.winner_id == entries[1].route_id
    assert decision.speedup == pytest.approx(1.25)


def test_each_route_is_compared_with_its_own_batch_baseline():
    # Batch 2 ran on a slower moment: 9.5 vs its baseline 12 is a real 21% gain; 8.9 vs 9 is not.
    entries = [
        entry({}, 9.0, baseline=9.0),
        entry({"a": "off"}, 8.9, baseline=9.0),
        entry({"c": "y"}, 9.5, baseline=12.0, batch="stage1-b001"),
    ]
    assert choose_winner(entries, DEFAULT, margin=0.03).winner_id == entries[2].route_id


def test_noise_margin_grows_with_the_default_spread_across_batches():
    entries = [entry({}, 10.0, baseline=10.0), entry({"a": "off"}, 9, baseline=10.6, batch="stage1-b001")]
    assert noise_margin(entries, 0.02) == pytest.approx(0.6 / 10.3)
    assert noise_margin(entries[:1], 0.02) == 0.02


def test_default_without_a_measurement_is_an_error():
    with pytest.raises(ValueError, match="default route"):
        choose_winner([entry({"a": "off"}, 8.0)], DEFAULT, 0.03)


def test_confirmation_accepts_a_consistent_gain_and_rejects_noise():
    rng = random.Random(3)
    base = [10 * rng.uniform(0.95, 1.05) for _ in range(7)]
    rounds = {
        "default": base,
        "real": [b * 0.85 * rng.uniform(0.99, 1.01) for b in base],
        "noise": [b * rng.uniform(0.94, 1.06) for b in base],
    }
    decision = confirm(rounds, "default", margin=0.03)
    assert decision.winner_id == "real" and decision.confirmed
    assert decision.speedup == pytest.approx(1 / 0.85, rel=0.02)
    del rounds["real"]
    assert confirm(rounds, "default", margin=0.03).default_won


def test_confirmation_false_winner_rate_on_a_to_a_is_at_most_nominal():
    # A/A: the "candidates" are the default itself with 5% noise per round. The rule is built for a
    # 5% family-wise false-winner rate; a naive "lower mean wins" rule picks a candidate every time.
    rng = random.Random(7)
    trials, false_wins, naive_wins = 1000, 0, 0
    for _ in range(trials):
        rounds = {name: [10 * rng.gauss(1, 0.05) for _ in range(5)] for name in ("default", "b", "c")}
        false_wins += not confirm(rounds, "default", margin=0.03).default_won
        naive_wins += min(rounds, key=lambda r: sum(rounds[r])) != "default"
    assert false_wins / trials < 0.065  # nominal 5%, plus sampling error of 1000 trials
    assert naive_wins / trials > 0.5


def test_t_quantiles_match_the_tables():
    assert t_quantile(0.95, 4) == pytest.approx(2.132, abs=1e-3)
    assert t_quantile(0.975, 6) == pytest.approx(2.447, abs=1e-3)
    assert t_quantile(0.95, 29) == pytest.approx(1.699, abs=1e-3)


def test_confirmation_needs_two_rounds_of_equal_length():
    with pytest.raises(ValueError):
        confirm({"default": [1.0], "x": [0.5]}, "default", 0.03)
    with pytest.raises(ValueError):
        confirm({"default": [1.0, 1.0], "x": [0.5]}, "default", 0.03)
