"""Paired rounds: a route timed against the default right next to it, until the comparison is decided.

Each round times the default and the route together on the same device (in the worker, interleaved in
blocks within one process; who goes first in `round_order`), so drift of the host
hits both; the route's time is judged by the
per-round ratio route/default, never by its time against a default measured minutes earlier. The
rounds stop as soon as they have placed the route (sequential stopping): once the ratio's 95%
interval lies wholly below or wholly above the noise-margin line (1 - margin), or is within
+-precision, or after `max_rounds`.
"""

from __future__ import annotations

import math
import statistics
from typing import Callable, Sequence

from enginewright.api.cache import Paired
from enginewright.search.winner import t_quantile

LEVEL = 0.95  # two-sided confidence of the ratio's interval


def interval(route_ms: Sequence[float], default_ms: Sequence[float]) -> tuple[float, float, float]:
    """Geometric mean of route/default over the rounds, and its 95% interval (Student t on logs)."""
    if len(route_ms) != len(default_ms) or not route_ms:
        raise ValueError(f"paired rounds need equal, non-zero counts (got {len(route_ms)} and {len(default_ms)})")
    logs = [math.log(r / d) for r, d in zip(route_ms, default_ms)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), 0.0, math.inf
    half = t_quantile(1 - (1 - LEVEL) / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def stop_reason(route_ms: Sequence[float], default_ms: Sequence[float], *, margin: float, precision: float,
                min_rounds: int, max_rounds: int) -> str | None:
    """Why to stop adding rounds now, or None to go on."""
    rounds = len(route_ms)
    if rounds < min_rounds:
        return None
    _, low, high = interval(route_ms, default_ms)
    line = 1.0 - margin
    if high < line:
        return "faster"
    if low > line:
        return "not-faster"
    if high / low <= (1.0 + precision) ** 2:
        return "precise"
    if rounds >= max_rounds:
        return "max-rounds"
    return None


def alternate(time_round: Callable[[bool], tuple[float, float]],
              stop: Callable[[list[float], list[float]], str | None]) -> tuple[list[float], list[float], str]:
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


def one_after_the_other(time_default: Callable[[], float],
                        time_route: Callable[[], float]) -> Callable[[bool], tuple[float, float]]:
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
    ratio, low, high = interval(route_ms, default_ms)
    return Paired(ratio=ratio, low=low, high=high if math.isfinite(high) else ratio, rounds=len(route_ms),
                  stopped=stopped)
