"""A host-bound engine against a CUDA-graph one moves with the host's speed at each round, every load
of it alike (on the H200 the block's default ran 0.23-0.62 ms turn to turn while its CUDA-graph
route held 0.14 ms: bench/served_vs_plain.py), so the spread across loads cannot see it. The
speedup's interval counts the rounds as moments too, or it is about the few moments one run
happened to sample: the interval across loads alone (2.60-2.72x) held none of four plain loops of
the same routes (1.79-2.49x)."""

import math
import random
import statistics

from enginewright.measure.paired import compare, load_key, moment_variance
from enginewright.search.winner import confirm

ROUNDS, LOADS = 5, 5


def host_bound_run(seed: int) -> tuple[list[list[float]], list[list[float]]]:
    """One confirmation's rounds: the default's call time follows the host's speed at each round (a
    log-normal moment, sd 0.2: 0.23-0.62 ms about a 0.32 ms median), every load alike, with its own
    lasting offset and a little round noise; the winner is GPU-bound, 0.15 ms."""
    rng = random.Random(seed)
    moments = [math.exp(rng.gauss(0, 0.2)) for _ in range(ROUNDS)]
    default = [[0.32 * m * (1 + off) * (1 + rng.gauss(0, 0.003)) for m in moments] for off in _offsets(rng)]
    winner = [[0.15 * (1 + off) * (1 + rng.gauss(0, 0.003)) for _ in moments] for off in _offsets(rng)]
    return winner, default


def _offsets(rng: random.Random) -> list[float]:
    return [rng.gauss(0, 0.01) for _ in range(LOADS)]


def test_the_interval_holds_the_ratio_over_the_hosts_moments_not_one_runs():
    # The ratio a plain loop of these routes sees over the host's moments: 0.15 / 0.32 (the
    # moments' geometric mean is 1). Across 200 runs, each of 5 moments, the 95% interval must hold
    # it about 95% of the time; the interval across loads alone held it in 25 of 200.
    truth = 0.15 / 0.32
    held = sum(c.low <= truth <= c.high for c in (compare(*host_bound_run(seed)) for seed in range(200)))
    assert held >= 180, f"the interval held the ratio over the host's moments in {held} of 200 runs"


def test_the_moments_widen_an_interval_and_never_narrow_it():
    for seed in range(50):
        winner, default = host_bound_run(seed)
        now, alone = compare(winner, default), compare(winner, default, moments=False)
        assert now.ratio == alone.ratio
        assert now.low <= alone.low and now.high >= alone.high
    # across loads alone (the interval before 2026-12-04) it held the ratio over the moments in 25 of 200
    alone = [compare(*host_bound_run(seed), moments=False) for seed in range(200)]
    assert sum(c.low <= 0.15 / 0.32 <= c.high for c in alone) < 60


def test_the_moment_variance_is_the_hosts_and_not_the_loads_round_noise():
    winner, default = host_bound_run(7)
    variance, df = moment_variance(winner, default)
    assert df == ROUNDS - 1
    logs = [statistics.fmean(math.log(v[r]) for v in default) for r in range(ROUNDS)]
    assert 0.5 * statistics.variance(logs) < variance <= statistics.variance(logs) * 1.5
    # engines that move alike have no moment term: what moves both cancels in their ratio
    same = [[v * 0.5 for v in values] for values in default]
    assert moment_variance(same, default)[0] == 0.0


def shared_host_rounds(rng: random.Random, scales: dict[str, float], load_sd: float, noise: float) -> dict:
    """A confirmation's rounds of engines that all move with the host's moment alike (sd 0.2), each
    engine `scales` times 0.3 ms, each load with a lasting offset (sd `load_sd`) and round noise."""
    moments = [math.exp(rng.gauss(0, 0.2)) for _ in range(ROUNDS)]
    rounds = {}
    for engine, scale in scales.items():
        for i in range(LOADS):
            off = rng.gauss(0, load_sd)
            rounds[load_key(engine, i)] = [0.3 * scale * m * (1 + off) * (1 + rng.gauss(0, noise)) for m in moments]
    return rounds


def test_identical_engines_under_a_moving_host_still_name_no_winner():
    rng = random.Random(3)
    named = sum(
        not confirm(shared_host_rounds(rng, {"d": 1.0, "c": 1.0}, 0.02, 0.01), "d", 0.03).default_won
        for _ in range(200)
    )
    # 4 of 200 here, the same as the interval across loads alone (load spread 2% against a 3% margin)
    assert named <= 6, f"{named} of 200 A/A confirmations named a winner"


def test_a_five_percent_gpu_side_win_is_still_confirmed_under_a_moving_host():
    # A GPU-side slowdown moves with nothing on the host: both engines share the moments, so the
    # moment term stays near 0 and a 5% win keeps its power.
    rng = random.Random(5)
    found = sum(
        not confirm(shared_host_rounds(rng, {"d": 1.05, "c": 1.0}, 0.01, 0.005), "d", 0.03).default_won
        for _ in range(100)
    )
    assert found >= 90, f"a 5% win was confirmed in {found} of 100 trials"


def moment_dominated(loads: int, rounds: int, seed: int, offset: float) -> tuple[list[list[float]], list[list[float]]]:
    """Stage 1's shape (2 loads of each), the default host-bound: lasting load offsets of ±`offset`,
    little round noise, and the host's moment (sd 0.025) moving the default against the route."""
    rng = random.Random(seed)
    moments = [math.exp(rng.gauss(0, 0.025)) for _ in range(rounds)]
    offsets = [offset * (-1) ** i for i in range(loads)]
    default = [[0.32 * m * (1 + off) * (1 + rng.gauss(0, 0.001)) for m in moments] for off in offsets]
    route = [[0.30 * (1 - off) * (1 + rng.gauss(0, 0.001)) for _ in moments] for off in offsets]
    return route, default


def test_the_moments_part_keeps_its_own_degrees_of_freedom():
    # Two loads each give the loads' part 2 degrees of freedom; the moments over 15 rounds have 14.
    # Clamping the sum to the loads' 2 made the interval about twice as wide as it needs to be.
    c = compare(*moment_dominated(2, 15, 1, 0.002))
    assert c.moment_spread > 0.01
    assert c.df >= 8


def test_more_rounds_shrink_the_moments_so_they_do_not_stop_as_loads():
    from enginewright.measure.paired import stop_after

    rule = {"margin": 0.03, "precision": 0.001, "min_rounds": 5, "max_rounds": 30}
    # more rounds do shrink the moments' part: counted as round noise, the rounds go on; counted as
    # lasting (the share of the loads' round noise alone, 0.14) they stopped as `loads`
    times = moment_dominated(2, 6, 1, 0.01)
    c = compare(*times)
    assert c.round_share > 0.2
    assert stop_after(c, 6, **rule) != "loads"
    assert stop_after(compare(*times, moments=False), 6, **rule) == "loads"
