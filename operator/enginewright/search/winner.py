"""Winner selection: the fastest accuracy-passing route, unless the default is within noise."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from enginewright.api.cache import CacheEntry
from enginewright.measure.paired import Comparison, Spread, by_engine, compare
from enginewright.measure.stats import t_cdf, t_quantile  # noqa: F401  (re-exported)
from enginewright.search.planners import clearly_faster, entry_speedup


@dataclass
class Decision:
    """Which route wins on one target, and why."""

    winner_id: str
    default_id: str
    speedup: float
    margin: float
    reason: str
    confirmed: bool = False
    ratios: dict[str, float] = field(default_factory=dict)
    rounds: int = 0  # confirmation rounds behind a confirmed decision
    low: float | None = None  # the speedup's 95% interval (across loads and rounds), when it was measured
    high: float | None = None
    loads: int = 0  # loads of each engine behind a confirmed decision (0: rounds of one load each)
    times: dict[str, float] = field(default_factory=dict)  # ms per call of each engine in the rounds decided on

    @property
    def default_won(self) -> bool:
        return self.winner_id == self.default_id


def noise_margin(entries: Sequence[CacheEntry], floor: float) -> float:
    """The margin a candidate must beat: the configured floor, raised by the measured relative spread
    (max-min)/median across batches of the default route that unpaired routes (timed before paired
    rounds, or imported) were compared with. Paired routes were each judged against a default timed
    right next to them: the default's drift between batches says nothing about them."""
    baselines = sorted({(e.batch, e.baseline_ms) for e in entries if e.baseline_ms and e.paired is None})
    values = [b for _, b in baselines]
    if len(values) < 2:
        return floor
    spread = (max(values) - min(values)) / statistics.median(values)
    return max(floor, min(spread, 0.5))


def could_win(entry: CacheEntry, margin: float) -> bool:
    """Worth a confirmation round: not placed wholly above the margin line by its paired rounds."""
    return entry.paired is None or entry.paired.low < 1.0 - margin


def rank_candidates(entries: Sequence[CacheEntry], default_id: str, default_ms: float) -> list[CacheEntry]:
    """Accuracy-passing non-default routes, fastest (relative to their own baseline) first."""
    passed = [e for e in entries if e.passed and e.route_id != default_id]
    return sorted(passed, key=lambda e: (-entry_speedup(e, default_ms), e.route_id))


def choose_winner(entries: Sequence[CacheEntry], default_id: str, margin: float) -> Decision:
    """Preliminary winner from sweep measurements alone (before any confirmation round)."""
    default = next((e for e in entries if e.route_id == default_id and e.passed), None)
    if default is None or default.median_ms is None:  # (an entry that passed was timed: never None)
        raise ValueError("the default route has no successful measurement: nothing to compare against")
    default_ms = default.median_ms
    ranked = rank_candidates(entries, default_id, default_ms)
    clear = [e for e in ranked if clearly_faster(e, default_ms, margin)]
    if clear:
        best = clear[0]
        how = (
            "paired with the default in its batch, the whole interval" if best.paired else "against its batch's default"
        )
        paired = best.paired
        best_ms = best.median_ms
        assert best_ms is not None  # it passed: it was timed
        return Decision(
            best.route_id,
            default_id,
            entry_speedup(best, default_ms),
            margin,
            f"route {best.route or '(default)'} is {entry_speedup(best, default_ms):.3f}x the "
            f"default in the sweep ({how} beyond the {margin:.1%} noise margin); unconfirmed: "
            f"no confirmation round decided",
            low=1.0 / paired.high if paired else None,
            high=1.0 / paired.low if paired else None,
            loads=(paired.loads or 1) if paired else 0,
            times={default_id: paired.default_ms or default_ms, best.route_id: paired.route_ms or best_ms}
            if paired
            else {},
        )
    return Decision(
        default_id,
        default_id,
        1.0,
        margin,
        "no route beat the default route beyond the noise margin" if ranked else "no other route passed",
    )


def strict_winner(entries: Sequence[CacheEntry], default_id: str) -> str:
    """The reference tuner's rule, for comparison: the lowest measured time wins, no margin."""
    passed = [e for e in entries if e.passed]
    return min(passed, key=lambda e: (e.median_ms, e.route_id)).route_id


def twin(default_id: str) -> str:
    """The key of the default's second load in confirmation rounds of one load per engine (saved
    before `confirm.loads`): the default loaded twice, in the one serving process of the round."""
    return f"{default_id}~2"


def confirm(rounds: Mapping[str, Sequence[float]], default_id: str, margin: float) -> Decision:
    """Decide from an interleaved confirmation round.

    `rounds[key][i]` is a load's time in round i, keys `measure.paired.load_key(route_id, n)`; every
    load was measured in every round, interleaved on one device. Each engine (the default and each
    candidate) was loaded several times: a candidate is confirmed when its geometric-mean time over
    its loads is below (1 - margin) times the default's, AND the one-sided Student-t upper bound of
    the difference of mean log times, with the standard error from the spread across loads pooled
    over every engine of the round and the rounds' moments (`measure.paired.compare`), is below 0 at a 95% family-wise level (Bonferroni over the
    candidates: each at 1 - 0.05/k). So one lucky load (an engine loaded again can run lastingly
    apart from its twin) cannot make a winner. The confirmed candidate with the lowest ratio wins;
    otherwise the default. The speedup is the default's geometric-mean time over the winner's, with
    its two-sided 95% interval. Rounds of one load per engine (saved before loads, or `loads: 1`) are
    judged by `confirm_by_rounds`, the rule before loads.
    """
    engines = by_engine(rounds)
    if default_id not in engines:
        raise ValueError(f"a confirmation round needs the default {default_id} (got {sorted(engines)})")
    candidates = {k: v for k, v in engines.items() if k != default_id}
    n = len(engines[default_id][0])
    if n < 2:
        raise ValueError(f"a confirmation round needs at least 2 rounds (got {n})")
    for route_id, loads in engines.items():
        if any(len(values) != n for values in loads):
            raise ValueError(f"route {route_id} has {[len(v) for v in loads]} rounds, the default {n}")
    if all(len(loads) == 1 for loads in candidates.values()) and len(engines[default_id]) <= 2:
        return confirm_by_rounds(rounds, default_id, margin)
    default = engines[default_id]
    level = 1.0 - 0.05 / max(1, len(candidates))
    ratios: dict[str, float] = {}
    bounds: dict[str, tuple[float, float]] = {}
    times = {}
    confirmed: list[tuple[float, str]] = []
    one_sided_of = against_default(engines, default_id, level=level, sided=1)
    for route_id, both in against_default(engines, default_id).items():
        one_sided = one_sided_of[route_id]
        ratios[route_id] = one_sided.ratio
        bounds[route_id] = (both.low, both.high)
        times[route_id], times[default_id] = both.a_ms, both.b_ms
        if one_sided.ratio < 1.0 - margin and one_sided.high < 1.0:
            confirmed.append((one_sided.ratio, route_id))
    count = len(default)
    if confirmed:
        geo, best = min(confirmed)
        low, high = 1.0 / bounds[best][1], 1.0 / bounds[best][0]
        return Decision(
            best,
            default_id,
            1.0 / geo,
            margin,
            f"confirmed over {n} interleaved rounds of {count} loads each: {1 / geo:.3f}x the default "
            f"(95% {low:.3f}-{high:.3f} across loads and rounds; the 95% upper bound of its time ratio is below 1 "
            f"and its ratio below the {margin:.1%} noise margin)",
            confirmed=True,
            ratios=ratios,
            rounds=n,
            low=low,
            high=high,
            loads=count,
            times={default_id: times[default_id], best: times[best]},
        )
    return Decision(
        default_id,
        default_id,
        1.0,
        margin,
        f"no candidate was confirmed faster than the default over {n} interleaved rounds of {count} loads each",
        confirmed=True,
        ratios=ratios,
        rounds=n,
        loads=count,
        times={default_id: times[default_id]} if times else {},
    )


SETTLED_AFTER = 3  # a confirmation's rounds before it may stop because no candidate can still win
SETTLED_LOADS = 3  # loads of each engine it needs: with fewer, the spread across loads says too little


def settled(rounds: Mapping[str, Sequence[float]], default_id: str, margin: float) -> bool:
    """Whether a confirmation may stop before its last round: after SETTLED_AFTER rounds or more, no
    candidate can still be confirmed, each one's two-sided 95% interval (across loads and rounds, the
    other candidates' load spread pooled, as `confirm` judges it) lying wholly above the noise-margin
    line. Only with SETTLED_LOADS loads or more of every engine: with 2 of each the interval rests on
    2 degrees of freedom and can come out narrow by chance, and on the H200's committed rounds it
    stopped 1 verified 5% winner after 3 rounds (0.9735-0.9744, the moments' term cut to 0) that all
    5 rounds named. One load each (the rule before loads) never settles.

    A confirmation stopped early keeps the default: it can lose a winner the last rounds would have
    named, never add one, so it adds no false winner; most confirmations are of candidates that are
    noise, which is where it saves. The looks at rounds 3, 4, ... are not corrected for: with 5 rounds
    there are two. `margin`: the floor of the noise margin is enough (the flow's margin is never below
    it, so its line is never above the floor's). Replayed on the H200's committed confirmations:
    `bench/reconfirm.py --grid`."""
    engines = by_engine(rounds)
    default = engines.get(default_id)
    if not default or len(default[0]) < SETTLED_AFTER:
        return False
    if len(engines) < 2 or min(len(loads) for loads in engines.values()) < SETTLED_LOADS:
        return False  # (no candidate, or too few loads)
    line = 1.0 - margin
    return all(c.low > line for c in against_default(engines, default_id).values())


def against_default(engines: Mapping[str, Sequence[Sequence[float]]], default_id: str, **how) -> dict[str, Comparison]:
    """Each candidate's loads against the default's (`measure.paired.compare`, `how`: its level and
    sides), the other candidates' load spread pooled as prior: how `confirm` and `settled` judge them.
    `engines`: each engine's loads (`measure.paired.by_engine`)."""
    default = engines[default_id]
    candidates = {k: v for k, v in engines.items() if k != default_id}
    return {
        route_id: compare(
            loads, default, prior=sum((Spread.of(v) for k, v in candidates.items() if k != route_id), Spread()), **how
        )
        for route_id, loads in candidates.items()
    }


def confirm_by_rounds(rounds: Mapping[str, Sequence[float]], default_id: str, margin: float) -> Decision:
    """The rule before loads, for rounds of one load per engine (the default possibly twice, key
    `<default_id>~2`): a candidate is confirmed when, against every default load, the geometric mean
    of its per-round ratios is below 1 - margin AND the one-sided Student-t upper bound of the mean
    log-ratio over rounds is below 0 at a 95% family-wise level (Bonferroni over the candidates)."""
    defaults = [list(rounds[key]) for key in (default_id, twin(default_id)) if key in rounds]
    n = len(defaults[0])
    candidates = {k: v for k, v in rounds.items() if k not in (default_id, twin(default_id))}
    level = 1.0 - 0.05 / max(1, len(candidates))
    quantile = t_quantile(level, n - 1)
    combined = [math.exp(statistics.fmean(math.log(d[i]) for d in defaults)) for i in range(n)]
    ratios: dict[str, float] = {}
    confirmed: list[tuple[float, str]] = []
    for route_id, times in candidates.items():
        ratios[route_id] = math.exp(statistics.fmean(math.log(t / b) for t, b in zip(times, combined)))
        beats_all = True
        for base in defaults:
            logs = [math.log(t / b) for t, b in zip(times, base)]
            mean = statistics.fmean(logs)
            upper = mean + quantile * statistics.stdev(logs) / math.sqrt(n)
            beats_all &= math.exp(mean) < 1.0 - margin and upper < 0.0
        if beats_all:
            confirmed.append((ratios[route_id], route_id))
    against = "both loads of the default" if len(defaults) > 1 else "the default"
    if confirmed:
        geo, best = min(confirmed)
        return Decision(
            best,
            default_id,
            1.0 / geo,
            margin,
            f"confirmed over {n} interleaved rounds: {1 / geo:.3f}x the default "
            f"(geometric mean of paired ratios; 95% upper bound below 1 against {against})",
            confirmed=True,
            ratios=ratios,
            rounds=n,
        )
    return Decision(
        default_id,
        default_id,
        1.0,
        margin,
        f"no candidate was confirmed faster than {against} over {n} interleaved rounds",
        confirmed=True,
        ratios=ratios,
        rounds=n,
    )
