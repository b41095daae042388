"""Cache entries for the unit tests of pure logic: one builder instead of one per test file."""

from enginewright.api.cache import CacheEntry, Outcome, Paired, TimingStats
from enginewright.api.routes import Route


def measured(
    knobs: dict,
    median: float = 1.0,
    *,
    target: str = "cpu",
    paired: Paired | None = None,
    baseline_ms: float | None = None,
    **fields,
) -> CacheEntry:
    """An entry of the route `knobs` measured ok in stage 1 at `median` ms; its baseline is the
    paired rounds' default when `paired` is given, else `baseline_ms` (default: `median`)."""
    route = Route.of(knobs)
    return CacheEntry(
        target=target,
        route_id=route.id,
        route=route.canonical,
        knobs=knobs,
        outcome=Outcome.ok,
        batch=fields.pop("batch", "stage1-b000"),
        timing=TimingStats(median_ms=median, mean_ms=median, p90_ms=median, min_ms=median, n=5),
        baseline_ms=paired.default_ms if paired else (baseline_ms if baseline_ms is not None else median),
        paired=paired,
        **fields,
    )
