"""The load is the unit: an engine loaded again can run lastingly apart from its twin (on the H200 the
same bytes loaded eight times in one process sat up to 6% apart for their whole life), so a
candidate is judged on the spread across loads, never on the rounds of one lucky load; the times a
comparison shows are the ones its ratio is made of."""

import math
import random

import pytest

from enginewright.measure.paired import Spread, by_engine, compare, load_key, stop_after
from enginewright.search.winner import confirm

RULE = {"margin": 0.03, "precision": 0.01, "min_rounds": 5, "max_rounds": 30}


def loads_of(
    engine: str, offsets: list[float], rounds: int, noise: float = 0.002, scale: float = 1.0, seed: int = 1
) -> dict[str, list[float]]:
    """Per-round times of each load of `engine`: `scale` times a host drift shared by every load of a
    round, times the load's lasting offset, times a little round noise."""
    rng = random.Random(seed)
    drift = [1.0 + 0.3 * ((r * 7) % 5) / 5 for r in range(rounds)]  # the host's speed wanders, for all alike
    return {
        load_key(engine, i): [scale * drift[r] * (1 + off) * (1 + rng.gauss(0, noise)) for r in range(rounds)]
        for i, off in enumerate(offsets)
    }


def test_one_lucky_load_does_not_confirm_a_candidate():
    # The candidate is the default's bytes; one of its five loads happens to run 12% faster for good.
    rounds = {
        **loads_of("d", [0.0, 0.01, -0.01, 0.005, -0.005], 5, seed=1),
        **loads_of("c", [0.0, -0.12, 0.01, -0.005, 0.005], 5, seed=2),
    }
    decision = confirm(rounds, "d", 0.03)
    assert decision.default_won and decision.loads == 5
    assert "5 loads each" in decision.reason
    # ...while its lucky load alone, timed against one default load, would have looked like a 12% win
    alone = confirm({"d": rounds["d"], "c": rounds["c@2"]}, "d", 0.03)
    assert not alone.default_won


def test_a_candidate_faster_on_every_load_is_confirmed_with_its_interval_across_loads():
    rounds = {
        **loads_of("d", [0.0, 0.02, -0.02, 0.01, -0.01], 5, seed=3),
        **loads_of("c", [0.0, 0.02, -0.02, 0.01, -0.01], 5, scale=0.9, seed=4),
    }
    decision = confirm(rounds, "d", 0.03)
    assert decision.winner_id == "c" and decision.confirmed
    assert decision.low < 1 / 0.9 < decision.high
    assert decision.speedup == pytest.approx(decision.times["d"] / decision.times["c"])


def test_lasting_load_offsets_set_the_interval_and_more_rounds_do_not_narrow_it():
    few = {**loads_of("d", [0.0, 0.03], 6, noise=0.0005), **loads_of("r", [0.02, -0.01], 6, noise=0.0005, seed=2)}
    many = {**loads_of("d", [0.0, 0.03], 30, noise=0.0005), **loads_of("r", [0.02, -0.01], 30, noise=0.0005, seed=2)}
    width = []
    for times in (few, many):
        engines = by_engine(times)
        c = compare(engines["r"], engines["d"])
        assert c.by_loads and c.df == 2 and c.spread > 0.01 and c.round_share < 0.05
        width.append(c.high / c.low)
    assert width[1] > 0.9 * width[0]  # five times the rounds, about the same interval: the loads set it
    engines = by_engine(few)
    assert stop_after(compare(engines["r"], engines["d"]), 6, **RULE) == "loads"


def test_the_shown_times_make_the_ratio():
    times = {**loads_of("d", [0.0, 0.01], 7, noise=0.01), **loads_of("r", [0.0, -0.01], 7, noise=0.01, scale=0.8)}
    engines = by_engine(times)
    c = compare(engines["r"], engines["d"])
    assert c.ratio == pytest.approx(c.a_ms / c.b_ms)


def test_the_spread_of_other_engines_of_the_model_sharpens_the_interval():
    times = {**loads_of("d", [0.0, 0.01], 6, noise=0.003), **loads_of("r", [0.0, -0.01], 6, noise=0.003, scale=0.9)}
    engines = by_engine(times)
    alone = compare(engines["r"], engines["d"])
    prior = Spread.of([[1.0 + 0.01 * math.sin(i + r) for r in range(6)] for i in range(4)]) + Spread(0.0004, 6)
    pooled = compare(engines["r"], engines["d"], prior=prior)
    assert pooled.df == alone.df + prior.df
    assert pooled.ratio == pytest.approx(alone.ratio)


def test_one_load_each_falls_back_to_the_rounds_as_samples():
    times = {"d": [1.0, 1.1, 0.9, 1.0], "r": [0.8, 0.88, 0.72, 0.8]}
    engines = by_engine(times)
    c = compare(engines["r"], engines["d"])
    assert not c.by_loads and c.low == pytest.approx(0.8) and c.high == pytest.approx(0.8)
