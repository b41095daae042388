"""A batch's paired rounds simulated with the product's own statistics (`measure.paired.compare`,
`stop_after`, the batch's pooled `Spread`), to see what the early `slower` stop costs and saves
(issue 19, ask 7): rounds a batch spends, and how often a route no faster than the default is left
with an interval that lets it into a confirmation round (`search.winner.could_win`: its low end
below 1 - margin; a confirmation costs ~9 s on a 2-core host), a false `faster`, and power for a
route 5% faster. Three policies, side by side on the same simulated batches:

  min-rounds       every route waits for minRounds (before session 30);
  slower, pooled   a route slower beyond the margin stops after minRoundsIfSlower rounds, and its
                   loads join the batch's pooled spread like any other's;
  slower, apart    the same, its loads kept out of the pooled spread (their means carry more round noise).

    python bench/early_stop_sim.py [--batches 400] [--seed 1]

A load's time: the route's ratio x the load's lasting offset (log-normal, --load-sd) x the round's
drift shared by every load (--drift-sd) x its own round noise (--round-sd). The default's two loads
stay for the whole batch, as in the worker. Prints one line per noise setting and policy.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from enginewright.measure.paired import Spread, compare, load_key, stop_after  # noqa: E402

MARGIN = 0.03
RULE = {"margin": MARGIN, "precision": 0.01, "min_rounds": 5, "max_rounds": 30}
# a stage 1 like the ~2 ms CPU model's: two routes far slower, one equal, one 15% slower, one 5% faster
BATCH = (2.0, 2.5, 1.0, 1.15, 0.95)
POLICIES = {"min-rounds": (5, True), "slower, pooled": (2, True), "slower, apart": (2, False)}
NOISE = {  # (load sd, round sd, drift sd), log scale
    "CPU-like (loads 5%, rounds 10%)": (0.05, 0.10, 0.10),
    "GPU-like (loads 3%, rounds 1%)": (0.03, 0.01, 0.10),
}


def batch(
    rng: random.Random, policy: tuple[int, bool], noise: tuple[float, float, float]
) -> list[tuple[int, str, float]]:
    """(rounds, why stopped, interval low) of each route of BATCH, measured one after another."""
    early, pool_slower = policy
    load_sd, round_sd, drift_sd = noise
    default_offsets = [math.exp(rng.gauss(0, load_sd)) for _ in range(2)]
    prior, placed = Spread(), []
    for ratio in BATCH:
        offsets = [math.exp(rng.gauss(0, load_sd)) for _ in range(2)]
        times: dict[str, list[float]] = {load_key(e, i): [] for e in ("d", "r") for i in range(2)}
        while True:
            drift = math.exp(rng.gauss(0, drift_sd))
            for i in range(2):
                times[load_key("d", i)].append(default_offsets[i] * drift * math.exp(rng.gauss(0, round_sd)))
                times[load_key("r", i)].append(ratio * offsets[i] * drift * math.exp(rng.gauss(0, round_sd)))
            n = len(times["d"])
            result = compare([times["r"], times["r@2"]], [times["d"], times["d@2"]], prior=prior)
            why = stop_after(result, n, **RULE, min_rounds_if_slower=early)
            if why:
                break
        if why != "slower" or pool_slower:
            prior = prior + Spread.of([times["r"], times["r@2"]])
        placed.append((n, why, result.low))
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"routes of each batch (ratio route/default): {BATCH}; {args.batches} batches a policy, the same seeds")
    for label, noise in NOISE.items():
        print(f"\n{label}")
        base = None
        for name, policy in POLICIES.items():
            rng = random.Random(args.seed)
            runs = [batch(rng, policy, noise) for _ in range(args.batches)]
            rounds = statistics.fmean(sum(n for n, _, _ in run) for run in runs)
            base = base or rounds
            equal = [run[2] for run in runs]  # the route equal to the default
            slower15 = [run[3] for run in runs]
            faster = [run[4] for run in runs]
            noise_candidates = statistics.fmean(
                (low < 1 - MARGIN) + (s_low < 1 - MARGIN) for (_, _, low), (_, _, s_low) in zip(equal, slower15)
            )
            print(
                f"  {name:<15} rounds a batch {rounds:5.1f} ({rounds / base:.2f}x)  "
                f"equal route: {statistics.fmean(n for n, _, _ in equal):4.1f} rounds, "
                f"false 'faster' {sum(w == 'faster' for _, w, _ in equal)}/{len(equal)}  "
                f"no-faster routes left able to win (a confirmation each): {noise_candidates:.2f} a batch  "
                f"5%-faster route placed faster {sum(w == 'faster' for _, w, _ in faster)}/{len(faster)}, "
                f"stopped slower {sum(w == 'slower' for _, w, _ in faster)}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
