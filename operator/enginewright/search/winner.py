"""Winner selection: the fastest accuracy-passing route, unless the default is within noise."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Sequence

from enginewright.api.cache import CacheEntry
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
    if default is None:
        raise ValueError("the default route has no successful measurement: nothing to compare against")
    ranked = rank_candidates(entries, default_id, default.median_ms)
    clear = [e for e in ranked if clearly_faster(e, default.median_ms, margin)]
    if clear:
        best = clear[0]
        how = ("paired with the default in its batch, the whole interval" if best.paired
               else "against its batch's default")
        return Decision(best.route_id, default_id, entry_speedup(best, default.median_ms), margin,
                        f"route {best.route or '(default)'} is {entry_speedup(best, default.median_ms):.3f}x the "
                        f"default in the sweep ({how} beyond the {margin:.1%} noise margin); unconfirmed: "
                        f"no confirmation round decided")
    return Decision(default_id, default_id, 1.0, margin,
                    "no route beat the default route beyond the noise margin" if ranked
                    else "no other route passed")


def strict_winner(entries: Sequence[CacheEntry], default_id: str) -> str:
    """The reference tuner's rule, for comparison: the lowest measured time wins, no margin."""
    passed = [e for e in entries if e.passed]
    return min(passed, key=lambda e: (e.median_ms, e.route_id)).route_id


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-12:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """Student t cumulative distribution function."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: int) -> float:
    """Upper quantile: the t with P(T <= t) = p (bisection; p in (0.5, 1))."""
    lo, hi = 0.0, 1000.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def twin(default_id: str) -> str:
    """The key of the default engine's second process in a confirmation round."""
    return f"{default_id}~2"


def confirm(rounds: dict[str, Sequence[float]], default_id: str, margin: float) -> Decision:
    """Decide from an interleaved confirmation round.

    `rounds[route_id][i]` is the route's time in round i; every route was measured in every round,
    interleaved on one device. The default may be held by a second process too (key
    `<default_id>~2`): then each candidate is judged against both processes, because one process
    can run lastingly faster than another holding the identical engine (the H200 A/A test saw 17%).
    For each candidate and default process the paired ratio candidate/default per round is taken;
    the rule: a candidate is confirmed when, against every default process, the geometric mean of
    its ratios is below 1 - margin AND the one-sided Student-t upper confidence bound of the mean
    log-ratio is below 0 at a 95% family-wise level (Bonferroni over the candidates: each at
    1 - 0.05/k). The confirmed candidate with the lowest ratio wins; otherwise the default. The
    speedup reported is against the geometric mean of the default processes, round by round. (A
    bootstrap bound was tried first: with 5 rounds it declared 11% false winners on an A/A test.)
    """
    defaults = [list(rounds[key]) for key in (default_id, twin(default_id)) if key in rounds]
    n = len(defaults[0])
    if n < 2:
        raise ValueError(f"a confirmation round needs at least 2 rounds (got {n})")
    candidates = {k: v for k, v in rounds.items() if k not in (default_id, twin(default_id))}
    level = 1.0 - 0.05 / max(1, len(candidates))
    quantile = t_quantile(level, n - 1)
    combined = [math.exp(statistics.fmean(math.log(d[i]) for d in defaults)) for i in range(n)]
    ratios: dict[str, float] = {}
    confirmed: list[tuple[float, str]] = []
    for route_id, times in candidates.items():
        if len(times) != n or any(len(d) != n for d in defaults):
            raise ValueError(f"route {route_id} has {len(times)} rounds, the default {n}")
        ratios[route_id] = math.exp(statistics.fmean(math.log(t / b) for t, b in zip(times, combined)))
        beats_all = True
        for base in defaults:
            logs = [math.log(t / b) for t, b in zip(times, base)]
            mean = statistics.fmean(logs)
            upper = mean + quantile * statistics.stdev(logs) / math.sqrt(n)
            beats_all &= math.exp(mean) < 1.0 - margin and upper < 0.0
        if beats_all:
            confirmed.append((ratios[route_id], route_id))
    against = "both default processes" if len(defaults) > 1 else "the default"
    if confirmed:
        geo, best = min(confirmed)
        return Decision(best, default_id, 1.0 / geo, margin,
                        f"confirmed over {n} interleaved rounds: {1 / geo:.3f}x the default "
                        f"(geometric mean of paired ratios; 95% upper bound below 1 against {against})",
                        confirmed=True, ratios=ratios, rounds=n)
    return Decision(default_id, default_id, 1.0, margin,
                    f"no candidate was confirmed faster than {against} over {n} interleaved rounds",
                    confirmed=True, ratios=ratios, rounds=n)
