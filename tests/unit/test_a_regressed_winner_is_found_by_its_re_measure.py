"""A policy's re-measure (the published winner against the default, on the new stack) is judged by
the product's own confirmation rule (`search.winner.confirm`, the run's default rounds and loads, the
3% noise margin). "A regression is detected" means that confirmation rejects the published winner:
the default wins the re-measure, and the policy starts a full re-tune.

The regression is defined against the default, as the issue's re-tune condition is ("the winner no
longer beats the default"): a winner published at 1.075x the default (time ratio 0.93) now runs 3%
SLOWER than the default on the new stack (ratio 1.03). A winner that only loses 3% of its own time
(0.93 -> 0.958) still beats the default by 4%: it is not a regression in this sense, and the
confirmation keeps it most of the time (the bounds below say how often).

The measurement source is synthetic (this test only): the noise of the H200 with the load protocol,
from docs/benchmarks.md ("per-load offsets are real but small"): a lasting offset per load, sd 2%
(measured 1.0-2.25%); round-to-round noise per load, sd 2.5% (measured 1.05-2.8%); and a drift of the
host's speed shared by every load of a round, sd 5% (interleaving cancels it). Fixed seed, 400 trials
per case. Measured with this seed: detection 400/400 at ratio 1.03, 394/400 (98.5%) at ratio 1.00;
false regressions 1/400 (0.25%) for the unregressed 1.075x winner, 39/400 (9.75%) for a marginal
1.053x one."""

import math
import random

from enginewright.api.models import Confirm, Search, default_of
from enginewright.measure.paired import load_key
from enginewright.search.winner import confirm

TRIALS = 400
LOADS, ROUNDS = default_of(Confirm, "loads"), default_of(Confirm, "rounds")
MARGIN = default_of(Search, "noise_margin")
LASTING, ROUND_NOISE, HOST_DRIFT = 0.02, 0.025, 0.05


def re_measure(rng: random.Random, ratio: float) -> dict[str, list[float]]:
    """One confirmation's rounds: the default ("d") and the winner ("w", `ratio` times the default's
    true time), LOADS loads each, every load timed in every round."""
    host = [math.exp(rng.gauss(0, HOST_DRIFT)) for _ in range(ROUNDS)]
    times = {}
    for engine, scale in (("d", 1.0), ("w", ratio)):
        for i in range(LOADS):
            lasting = math.exp(rng.gauss(0, LASTING))
            times[load_key(engine, i)] = [
                0.3 * scale * lasting * host[r] * math.exp(rng.gauss(0, ROUND_NOISE)) for r in range(ROUNDS)
            ]
    return times


def rejected_share(ratio: float, seed: int = 24) -> float:
    """The share of trials whose confirmation rejects the winner (the default wins)."""
    rng = random.Random(seed)
    return sum(confirm(re_measure(rng, ratio), "d", MARGIN).default_won for _ in range(TRIALS)) / TRIALS


def test_a_winner_now_3_percent_slower_than_the_default_is_detected_in_95_percent_of_trials():
    assert rejected_share(1.03) >= 0.95


def test_a_winner_now_no_faster_than_the_default_is_detected_in_95_percent_of_trials():
    assert rejected_share(1.00) >= 0.95


def test_an_unregressed_winner_is_rarely_called_regressed():
    # 1.075x the default: a false regression (an unneeded full re-tune) in at most 2% of trials
    assert rejected_share(0.93) <= 0.02
    # A marginal winner (1.053x, just past the 3% margin) is re-tuned more often: said in the README
    assert rejected_share(0.95) <= 0.12
