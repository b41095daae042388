"""Paired rounds: a route timed against the default right next to it, until the comparison is decided.

The load is the unit. An engine loaded again (fresh allocations, a fresh process) can run lastingly
apart from its twin for the whole of that load, so rounds within one load are not independent
samples of the route: each engine is loaded several times (`timing.loads`), every round times every
load of both engines interleaved, and the ratio's interval comes from the spread across loads
(`compare`): the difference of the engines' mean log times over their loads, with a standard error
from the pooled variance of the loads' means around their engine's mean (a one-way random-effects
model whose load variance is shared by the engines of one model on one host, so the spread of
every engine measured beside it, the default's loads included, sharpens the estimate; `Spread`).
Round-to-round noise is inside each load's mean, so it is counted too. A drift of the host that
hits both engines of a round alike cancels in their ratio; one that hits them differently does not:
a host-bound engine (launch overhead) against a CUDA-graph one moves with the host's speed at each
round, every load of it alike, so it cancels in no spread across loads. On the H200 the block's
host-bound default ran 0.23-0.62 ms from one turn to the next in every layout, a plain loop's
included, while its CUDA-graph route held 0.14 ms (bench/served_vs_plain.py,
docs/benchmarks/raw/s17/call4); the interval across loads alone (2.60-2.72x) then held none of four
plain loops run after it (1.79-2.49x). So the rounds are moments, sampled too: the interval adds the
variance of the engines' per-round difference that the loads' own round noise does not explain
(`moment_variance`, a round-by-engine random effect), with Welch-Satterthwaite degrees of freedom. It
is near 0 where both engines move alike (identical engines, a GPU-side slowdown), and never narrows
the interval. With one load of each and nothing to pool, the interval falls back to the per-round
ratios of the two loads (the rounds as samples), as before loads.

Each round times the default and the route together on the same device (in the worker, interleaved in
blocks within one process; who goes first in `round_order`), so drift of the host
hits both; the route's time is judged by the
per-round ratio route/default, never by its time against a default measured minutes earlier. The
rounds stop as soon as they have placed the route (sequential stopping): once the ratio's 95%
interval lies wholly below or wholly above the noise-margin line (1 - margin), or is within
+-precision, or after `max_rounds`; a route slower than the default beyond the margin (interval
wholly above 1 + margin) stops after `min_rounds_if_slower` rounds, before `min_rounds` (`stop_after`).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from enginewright.api.cache import Paired
from enginewright.api.models import Timing, default_of
from enginewright.measure.stats import t_quantile

LEVEL = 0.95  # two-sided confidence of the ratio's interval


def interval(route_ms: Sequence[float], default_ms: Sequence[float]) -> tuple[float, float, float]:
    """Geometric mean of route/default over the rounds of one load each, and its 95% interval
    (Student t on the per-round log ratios): `compare` of one load against one."""
    c = compare([route_ms], [default_ms])
    return c.ratio, c.low, c.high


LOAD_MARK = "@"  # a load's key: "<engine>@<n>" for the n-th load (n >= 2); the first load is "<engine>"


def load_key(engine: str, index: int) -> str:
    """The key of the `index`-th load (0-based) of `engine` in a round's times."""
    return engine if index == 0 else f"{engine}{LOAD_MARK}{index + 1}"


def engine_of(key: str) -> str:
    """The engine a load's key names (also the twin keys `<id>~2` of confirmations before loads)."""
    for mark in (LOAD_MARK, "~"):
        head, found, tail = key.rpartition(mark)
        if found and tail.isdigit():
            return head
    return key


def by_engine(times: Mapping[str, Sequence[float]]) -> dict[str, list[list[float]]]:
    """Per-round times by load key -> each engine's loads (lists of per-round ms), in key order."""
    engines: dict[str, list[list[float]]] = {}
    for key, values in times.items():
        engines.setdefault(engine_of(key), []).append(list(values))
    return engines


@dataclass(frozen=True)
class Spread:
    """How far the loads of engines sit from their engine's mean: the sum of squares of each load's
    mean log time around its engine's mean, and its degrees of freedom (loads - 1 per engine).
    Sums of several engines pool them (`+`)."""

    squares: float = 0.0
    df: int = 0

    def __add__(self, other: Spread) -> Spread:
        return Spread(self.squares + other.squares, self.df + other.df)

    @property
    def variance(self) -> float:
        return self.squares / self.df if self.df else math.nan

    @classmethod
    def of(cls, loads: Sequence[Sequence[float]]) -> Spread:
        means = [_mean_log(values) for values in loads]
        if len(means) < 2:
            return cls()
        centre = statistics.fmean(means)
        return cls(sum((m - centre) ** 2 for m in means), len(means) - 1)


def _mean_log(values: Sequence[float]) -> float:
    return statistics.fmean(math.log(v) for v in values)


@dataclass(frozen=True)
class Comparison:
    """Engine A against engine B, timed in the same interleaved rounds."""

    ratio: float  # A/B: the geometric mean over A's loads and rounds over B's
    low: float  # its 95% interval (two-sided)
    high: float
    a_ms: float  # A's geometric-mean time per call over its loads and rounds
    b_ms: float
    loads: tuple[int, int]  # loads of A and of B
    df: int  # degrees of freedom of the interval (0: the rounds of one load each)
    spread: float  # the standard deviation of one load's mean log time (nan: one load each)
    round_share: float  # the share of the interval's variance more rounds would shrink (round noise, moments)
    moment_spread: float = 0.0  # the standard deviation of the rounds' moment in A/B (log): `moment_variance`

    @property
    def by_loads(self) -> bool:
        return self.df > 0


def compare(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    prior: Spread = Spread(),
    level: float = LEVEL,
    sided: int = 2,
    moments: bool = True,
) -> Comparison:
    """A's loads against B's (each a list of per-round ms, every load timed in the same rounds),
    with a `level` interval (`sided` 2: two-sided; 1: the bound is the upper one, returned as
    `high`) from the spread across loads, pooled with `prior` (other engines measured on the same
    model and host), and the rounds' moments (`moment_variance`; `moments=False`: the interval across
    loads alone, as before 2026-12-04, for comparing the two). With one load of each and no prior:
    the per-round ratios of the two loads."""
    rounds = {len(values) for values in [*a, *b]}
    if not a or not b or len(rounds) != 1 or 0 in rounds:
        raise ValueError(
            f"a comparison needs loads timed in the same, non-zero number of rounds (got "
            f"{sorted(len(v) for v in [*a, *b])})"
        )
    a_log, b_log = _mean_of_rounds(a), _mean_of_rounds(b)  # (every load has the same rounds: the mean of
    a_ms, b_ms = math.exp(a_log), math.exp(b_log)  # the loads' means is the mean of all rounds)
    diff = a_log - b_log
    pooled = Spread.of(a) + Spread.of(b) + prior
    share = _round_share(a, b, pooled)
    if pooled.df == 0:
        if len(a[0]) < 2:
            return Comparison(math.exp(diff), 0.0, math.inf, a_ms, b_ms, (len(a), len(b)), 0, math.nan, math.nan)
        logs = [math.log(x / y) for x, y in zip(a[0], b[0])]
        half = _quantile(level, sided, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        return _comparison(diff, half, sided, a_ms, b_ms, (1, 1), 0, math.nan, share)
    loads_part = pooled.variance * (1 / len(a) + 1 / len(b))
    variance, moment_df = moment_variance(a, b) if moments else (0.0, 0)
    moments_part = variance / len(a[0])
    df, half = pooled.df, _quantile(level, sided, pooled.df) * math.sqrt(loads_part)
    if moments_part > 0:
        # Welch-Satterthwaite degrees of freedom for the sum; never narrower than the loads' own
        # interval (the loads' few df must not widen the moments' part: 2 loads in stage 1 are df 2)
        welch = (loads_part + moments_part) ** 2 / (loads_part**2 / pooled.df + moments_part**2 / moment_df)
        welch_df = max(1, math.floor(welch))
        both = _quantile(level, sided, welch_df) * math.sqrt(loads_part + moments_part)
        if both > half:
            df, half = welch_df, both
        # what more rounds would shrink: the loads' round noise and the moments
        share = (share * loads_part + moments_part) / (loads_part + moments_part) if not math.isnan(share) else share
    return _comparison(
        diff, half, sided, a_ms, b_ms, (len(a), len(b)), df, math.sqrt(pooled.variance), share, math.sqrt(variance)
    )


def moment_variance(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The variance, over rounds, of A's mean log time minus B's (each over its loads) that the loads'
    own round noise does not explain, and its degrees of freedom (rounds - 1): how much the moment
    of a round moves one engine against the other. The round noise of an engine is its loads' two-way
    residual (a load's lasting offset and the round's moment taken out), whose mean over L loads
    adds 1/L of it to the difference. 0 with fewer than 2 rounds, or where the noise explains all."""
    count = len(a[0])
    if count < 2:
        return 0.0, 0

    def by_round_and_noise(loads) -> tuple[list[float], float]:
        """The engine's mean log time per round, and its loads' two-way residual variance."""
        logs = [[math.log(v) for v in values] for values in loads]
        by_round = [statistics.fmean(values[r] for values in logs) for r in range(count)]
        if len(logs) < 2:
            return by_round, 0.0  # not separable from the moments: all of it counts as moment (wider)
        by_load = [statistics.fmean(values) for values in logs]
        grand = statistics.fmean(by_load)
        squares = sum(
            (logs[i][r] - by_load[i] - by_round[r] + grand) ** 2 for i in range(len(logs)) for r in range(count)
        )
        return by_round, squares / ((len(logs) - 1) * (count - 1))

    (a_rounds, a_noise), (b_rounds, b_noise) = by_round_and_noise(a), by_round_and_noise(b)
    differences = [x - y for x, y in zip(a_rounds, b_rounds)]
    noise = a_noise / len(a) + b_noise / len(b)
    return max(0.0, statistics.variance(differences) - noise), count - 1


def _comparison(diff, half, sided, a_ms, b_ms, loads, df, spread, share, moments=0.0) -> Comparison:
    low = math.exp(diff - half) if sided == 2 else 0.0
    return Comparison(math.exp(diff), low, math.exp(diff + half), a_ms, b_ms, loads, df, spread, share, moments)


def _quantile(level: float, sided: int, df: int) -> float:
    return t_quantile(1 - (1 - level) / sided, df)


def _mean_of_rounds(loads: Sequence[Sequence[float]]) -> float:
    return statistics.fmean(math.log(v) for values in loads for v in values)


def _round_share(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]], pooled: Spread) -> float:
    """How much of one load's mean-time variance is round-to-round noise (the rest lasts for the
    load): the within-load variance of round-centred log times over the rounds, against the pooled
    variance. Near 0: more rounds cannot narrow the interval, only more loads can."""
    loads = [*a, *b]
    count = len(loads[0])
    if count < 2 or not pooled.df or not pooled.variance:
        return math.nan
    centres = [statistics.fmean(math.log(values[r]) for values in loads) for r in range(count)]
    within = statistics.fmean(
        statistics.variance([math.log(values[r]) - centres[r] for r in range(count)]) for values in loads
    )
    return min(1.0, within / count / pooled.variance)


EARLY_ROUNDS: int = default_of(Timing, "min_rounds_if_slower")


def stop_after(
    comparison: Comparison,
    rounds: int,
    *,
    margin: float,
    precision: float,
    min_rounds: int,
    max_rounds: int,
    min_rounds_if_slower: int = EARLY_ROUNDS,
) -> str | None:
    """Why to stop adding rounds now (or None). From `min_rounds_if_slower` on, before `min_rounds`:
    the interval lies wholly above 1 + margin (`slower`: slower than the default beyond the noise
    margin; a futility stop, which can make no winner, so no false one). From `min_rounds` on: the
    interval lies wholly below the noise-margin line 1 - margin (`faster`) or wholly above it
    (`not-faster`), is within +-precision (`precise`), is made almost wholly of lasting per-load
    offsets so that more rounds would not narrow it (`loads`: a fifth or less of it is round noise),
    or the rounds reached `max_rounds`. Most routes of a search's first stage are clearly slower
    (stage 1 on a ~2 ms CPU model: 0.45-0.74x, intervals far above the line after two rounds); they
    paid `min_rounds` rounds each, three fifths of them after their place was plain."""
    if rounds < min_rounds:
        return "slower" if rounds >= min_rounds_if_slower and comparison.low > 1.0 + margin else None
    line = 1.0 - margin
    if comparison.high < line:
        return "faster"
    if comparison.low > line:
        return "not-faster"
    if comparison.high / max(comparison.low, 1e-300) <= (1.0 + precision) ** 2:
        return "precise"
    if comparison.by_loads and comparison.round_share <= 0.2:
        return "loads"
    if rounds >= max_rounds:
        return "max-rounds"
    return None


def rounds_until(
    time_round: Callable[[int], Mapping[str, float]], stop: Callable[[dict[str, list[float]]], str | None]
) -> tuple[dict[str, list[float]], str]:
    """Rounds `time_round(index)` (each engine load's ms per call in round `index`) until
    `stop(times so far)` gives a reason; returns the times by key and that reason."""
    times: dict[str, list[float]] = {}
    index = 0
    while True:
        for key, ms in time_round(index).items():
            times.setdefault(key, []).append(ms)
        index += 1
        reason = stop(times)
        if reason:
            return times, reason


def stop_reason(
    route_ms: Sequence[float],
    default_ms: Sequence[float],
    *,
    margin: float,
    precision: float,
    min_rounds: int,
    max_rounds: int,
    min_rounds_if_slower: int = EARLY_ROUNDS,
) -> str | None:
    """Why to stop adding rounds of one load each now, or None to go on (`stop_after`)."""
    if len(route_ms) < min(min_rounds, min_rounds_if_slower):
        return None
    return stop_after(
        compare([route_ms], [default_ms]),
        len(route_ms),
        margin=margin,
        precision=precision,
        min_rounds=min_rounds,
        max_rounds=max_rounds,
        min_rounds_if_slower=min_rounds_if_slower,
    )


def alternate(
    time_round: Callable[[bool], tuple[float, float]], stop: Callable[[list[float], list[float]], str | None]
) -> tuple[list[float], list[float], str]:
    """Paired rounds, who goes first in `round_order` (default first, then route, route, default,
    ...): `time_round(default_first)` times one round of both and returns (route's ms, default's
    ms), until `stop(route_ms, default_ms)` gives a reason. Returns the route's times, the
    default's times and that reason."""
    route_ms: list[float] = []
    default_ms: list[float] = []
    while True:
        route, default = time_round(round_order(("default", "route"), len(route_ms))[0] == "default")
        route_ms.append(route)
        default_ms.append(default)
        reason = stop(route_ms, default_ms)
        if reason:
            return route_ms, default_ms, reason


def round_order(keys: Sequence[str], index: int) -> list[str]:
    """The order of round `index` of engines interleaved block by block: shifted each round, and
    the shifts reversed in every other cycle of them (A B C, B C A, C A B, then C B A, A C B, B A C),
    so that no engine always runs right after the same one (a shift alone keeps A B C A B C's
    neighbours) and each goes first equally often."""
    shift = index % len(keys)
    order = list(keys[shift:]) + list(keys[:shift])
    return order[::-1] if (index // len(keys)) % 2 else order


def one_after_the_other(
    time_default: Callable[[], float], time_route: Callable[[], float]
) -> Callable[[bool], tuple[float, float]]:
    """A `time_round` for engines that cannot be interleaved (each in a process of its own): a whole
    round of one, then of the other."""

    def time_round(default_first: bool) -> tuple[float, float]:
        if default_first:
            default = time_default()
            return time_route(), default
        route = time_route()
        return route, time_default()

    return time_round


def summarise(route_ms: Sequence[float], default_ms: Sequence[float], stopped: str) -> Paired:
    """One load of each: the per-round ratios' geometric mean and interval."""
    ratio, low, high = interval(route_ms, default_ms)
    return Paired(
        ratio=ratio, low=low, high=high if math.isfinite(high) else ratio, rounds=len(route_ms), stopped=stopped
    )


def summarise_loads(comparison: Comparison, rounds: int, stopped: str) -> Paired:
    """The route's loads against the default's: ratio, interval, and what they stand on."""
    c = comparison
    return Paired(
        ratio=c.ratio,
        low=c.low,
        high=c.high if math.isfinite(c.high) else c.ratio,
        rounds=rounds,
        stopped=stopped,
        loads=c.loads[0],
        default_loads=c.loads[1],
        df=c.df,
        route_ms=c.a_ms,
        default_ms=c.b_ms,
        load_spread=None if math.isnan(c.spread) else c.spread,
        round_share=None if math.isnan(c.round_share) else c.round_share,
        moment_spread=c.moment_spread or None,
    )
