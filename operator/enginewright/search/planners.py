"""Planners: which routes a search mode tries, in which batches, within which budget."""

from __future__ import annotations

import difflib
import itertools
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from enginewright.api.routes import Knob, Route, parse_route

if TYPE_CHECKING:
    from enginewright.api.cache import CacheEntry


class PlanError(ValueError):
    """The requested search cannot be planned; the message says which field to change."""


@dataclass(frozen=True)
class SpaceKnob:
    """A knob in the search space: its default and the values to try (default first)."""

    name: str
    default: str
    values: tuple[str, ...]
    exclusive: bool = False  # its other values are never combined with other changed knobs

    @property
    def alternatives(self) -> tuple[str, ...]:
        return tuple(v for v in self.values if v != self.default)


@dataclass(frozen=True)
class Batch:
    """Routes one Job (or one local worker pass) builds and measures; its name is deterministic."""

    name: str
    stage: str
    routes: tuple[Route, ...]


def as_built(compiler_knobs: Sequence[Knob], settings: Mapping[str, str], *, settings_are_knobs: bool) -> list[Knob]:
    """The compiler's knobs with the defaults the default route is built with: a base setting
    (`spec.compiler.settings`, `tune --setting`) that names a knob takes the place of the knob's own
    default, as every route is built with the base settings and its knobs over them. So a route holds
    the values that differ from the base: with the base setting graph_optimization_level=disable,
    `-graph_optimization_level=all` (ONNX Runtime's own default) is a route of its own, and
    `-graph_optimization_level=disable` is the default route. Without such settings the knobs, and
    so every route id, are as the compiler reports them.

    Raises PlanError for a setting that names a knob with a value the knob does not allow, and, for a
    compiler whose builds do not read knobs from the base settings (`settings_are_knobs` false:
    `api.models.SETTINGS_ARE_KNOBS`), for any setting that names a knob: the build would ignore it."""
    by_name = {k.name: k for k in compiler_knobs}
    for name in sorted(set(settings) & set(by_name)):
        where = f"spec.compiler.settings.{name}"
        if not settings_are_knobs:
            raise PlanError(
                f"{where}: {name!r} is a route knob of this compiler, not a base setting (its build does "
                "not read it from the settings): pin it with spec.search.pinned or sweep it with spec.search.knobs"
            )
        _check_value(by_name, name, settings[name], where)
    return [replace(k, default=settings[k.name]) if k.name in settings else k for k in compiler_knobs]


def build_space(
    compiler_knobs: Sequence[Knob],
    requested: Iterable[tuple[str, Sequence[str]]] = (),
    pinned: dict[str, str] | None = None,
    measure_exclusive: bool = True,
) -> list[SpaceKnob]:
    """The compiler's knobs intersected with what the user asked for.

    Nothing requested = every sweepable knob the compiler reports (pinned ones excluded). Exclusive
    knobs (Inductor's `compile=false`: not compiling at all) are measured whatever was requested, as
    the default is, unless `measure_exclusive` is off or the knob is pinned: their routes stand alone
    (they ignore every other setting, pins included; `exclusive_route`). A knob the compiler does not
    know, a value it does not allow, or an open-ended knob without values is an error that names the
    knob.
    """
    pinned = pinned or {}
    requested = list(requested)
    by_name = {k.name: k for k in compiler_knobs}
    for name, value in pinned.items():
        _check_value(by_name, name, value, "spec.search.pinned")
    exclusive = [f"{n}={v}" for n, v in pinned.items() if by_name[n].exclusive and v != by_name[n].default]
    if exclusive and len(pinned) > 1:
        raise PlanError(f"spec.search.pinned: {exclusive[0]} ignores every other setting; pin it alone")
    space = []
    if not requested:
        for knob in compiler_knobs:
            if knob.exclusive and not measure_exclusive:
                continue
            if knob.sweepable and knob.name not in pinned and len(knob.default_sweep) > 1:
                values = (knob.default,) + tuple(v for v in knob.default_sweep if v != knob.default)
                space.append(SpaceKnob(knob.name, knob.default, values, knob.exclusive))
        return space
    for name, asked in requested:
        if name in pinned:
            raise PlanError(f"spec.search.knobs: knob {name!r} is also pinned; sweep it or pin it, not both")
        for value in asked:
            _check_value(by_name, name, value, "spec.search.knobs")
        knob = by_name[name]
        ordered = (knob.default,) + tuple(dict.fromkeys(v for v in asked if v != knob.default))
        space.append(SpaceKnob(name, knob.default, ordered, knob.exclusive))
    named = {name for name, _ in requested}
    for knob in compiler_knobs:  # not compiling is a route: measured unless left out or pinned
        if (
            knob.exclusive
            and measure_exclusive
            and knob.sweepable
            and knob.name not in named
            and knob.name not in pinned
            and len(knob.default_sweep) > 1
        ):
            space.append(
                SpaceKnob(
                    knob.name,
                    knob.default,
                    (knob.default,) + tuple(v for v in knob.default_sweep if v != knob.default),
                    True,
                )
            )
    return space


def exclusive_route(knob: SpaceKnob, value: str) -> Route:
    """The route of an exclusive knob's other value: that setting alone (it ignores every other one,
    pinned knobs included: Inductor's compile=false runs no compiler to pin options of)."""
    return Route.of({knob.name: value}, {knob.name: knob.default})


def _check_value(by_name: dict[str, Knob], name: str, value: str, where: str) -> None:
    if name not in by_name:
        close = difflib.get_close_matches(name, list(by_name), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise PlanError(f"{where}: the compiler has no knob {name!r}{hint}")
    knob = by_name[name]
    if knob.values is not None and value not in knob.values:
        raise PlanError(f"{where}: knob {name!r} does not allow {value!r} (allowed: {'|'.join(knob.values)})")


def _defaults(space: Sequence[SpaceKnob]) -> dict[str, str]:
    return {k.name: k.default for k in space}


def baseline(pinned: dict[str, str] | None = None, space: Sequence[SpaceKnob] = ()) -> Route:
    """The default route: every knob at its default (its base setting's value: `as_built`), pinned
    knobs applied."""
    return Route.of(dict(pinned or {}), _defaults(space))


def plan_fast(
    space: Sequence[SpaceKnob], pinned: dict[str, str] | None = None, max_routes: int | None = None
) -> list[Route]:
    """Default route, then one knob changed at a time (1 + number of non-default values)."""
    pinned = dict(pinned or {})
    defaults = _defaults(space)
    routes = [baseline(pinned, space)]
    for knob in space:
        for value in knob.alternatives:
            routes.append(
                exclusive_route(knob, value) if knob.exclusive else Route.of({**pinned, knob.name: value}, defaults)
            )
    _check_budget("fast", len(routes), max_routes)
    return routes


def full_size(space: Sequence[SpaceKnob]) -> int:
    """Routes of a full search: the combinations of the plain knobs, plus each exclusive value alone."""
    plain = math.prod(len(k.values) for k in space if not k.exclusive)
    return plain + sum(len(k.alternatives) for k in space if k.exclusive)


def plan_full(
    space: Sequence[SpaceKnob], pinned: dict[str, str] | None = None, max_routes: int | None = None
) -> list[Route]:
    """Every combination of the space's values (the default route first); an exclusive knob's other
    values only with every other knob at its default."""
    _check_budget("full", full_size(space), max_routes)
    pinned = dict(pinned or {})
    defaults = _defaults(space)
    routes = []
    for combo in itertools.product(*(k.values for k in space)):
        changed = [k for k, value in zip(space, combo) if value != k.default]
        if any(k.exclusive for k in changed):
            if len(changed) == 1:
                routes.append(exclusive_route(changed[0], combo[space.index(changed[0])]))
            continue
        routes.append(Route.of({**pinned, **{k.name: v for k, v in zip(space, combo)}}, defaults))
    return routes


def _check_budget(mode: str, count: int, max_routes: int | None) -> None:
    if max_routes is not None and count > max_routes:
        raise PlanError(
            f"a {mode} search of this space has {count} routes, over spec.search.maxRoutes="
            f"{max_routes}: raise maxRoutes, narrow spec.search.knobs"
            + (", or use mode fast or mixed" if mode == "full" else "")
        )


def beats(median_ms: float, baseline_ms: float, margin: float) -> bool:
    """Faster than the baseline by more than the noise margin, not by a hair."""
    return median_ms < baseline_ms * (1.0 - margin)


def entry_speedup(entry, default_ms: float) -> float:
    """A cache entry's speedup over the default: its paired one, else its own batch baseline's, else
    the run's default time's."""
    return entry.speedup or default_ms / entry.median_ms


def clearly_faster(entry, default_ms: float, margin: float) -> bool:
    """The sweep's rule for a cache entry: paired rounds whose whole interval lies below the margin
    line (a point estimate below it is not enough: identical engines read 0.8-0.9x in single trials on
    the H200); an unpaired entry faster than its baseline by more than the margin."""
    if entry.paired is not None:
        return entry.paired.high < 1.0 - margin
    return beats(1.0 / entry_speedup(entry, default_ms), 1.0, margin)


def clearly_slower(entry, default_ms: float, margin: float) -> bool:
    """`clearly_faster`'s mirror, the paired rounds' own rule for stopping a slower route
    (`measure.paired`): the whole interval above the margin line; an unpaired entry slower than its
    baseline by more than the margin."""
    if entry.paired is not None:
        return entry.paired.low > 1.0 + margin
    return entry_speedup(entry, default_ms) < 1.0 / (1.0 + margin)


def _single_changes(space: Sequence[SpaceKnob], stage1: Iterable[CacheEntry]) -> list[tuple[CacheEntry, str, str]]:
    """Stage-1 entries that changed one combinable knob and passed accuracy: (entry, knob, value)."""
    names = {k.name for k in space if not k.exclusive}
    found = []
    for entry in stage1:
        changed = [(k, v) for k, v in entry.knobs.items() if k in names]
        if len(changed) == 1 and entry.passed:
            found.append((entry, *changed[0]))
    return found


def improving_values(
    space: Sequence[SpaceKnob], stage1: Iterable, default_ms: float, margin: float
) -> dict[str, list[tuple[str, float]]]:
    """Stage-1 single-knob changes that improved: accuracy passed and faster beyond the margin.

    `stage1` holds cache entries; each is compared with the default it was paired with (or its own
    batch baseline). Exclusive knobs are left out: they are never combined. Returns
    knob -> [(value, speedup)], best first.
    """
    found: dict[str, list[tuple[str, float]]] = {}
    for entry, knob, value in _single_changes(space, stage1):
        if clearly_faster(entry, default_ms, margin):
            found.setdefault(knob, []).append((value, entry_speedup(entry, default_ms)))
    return {k: sorted(v, key=lambda item: -item[1]) for k, v in found.items()}


def beside_launch_free(
    space: Sequence[SpaceKnob],
    stage1: Iterable[CacheEntry],
    default: CacheEntry,
    margin: float,
    pinned: dict[str, str] | None = None,
) -> tuple[str, list[Route]]:
    """On a GPU whose default route is host-bound (launch overhead sets its pace) while stage 1's
    fastest combinable change is not (it removed the overhead, as CUDA graphs do): that change with
    each other knob's value that was neither clearly faster nor clearly slower. Those values were
    timed behind the default's launch overhead, where a change to the kernels shows little: resnet50
    on an H100 (session 41), coordinate descent measured 1.030x alone, inside the noise margin, and
    with CUDA graphs ran 2.7% faster than CUDA graphs alone, full search's winner that mixed never
    built. Returns that fastest change's route and the routes, the neutral values' best first; ("", []) where
    the default is not host-bound, not on a GPU (a CPU engine's calling thread does the work: there
    is no launch overhead to take away), or nothing qualifies."""
    measured, versions, default_ms = default.measurements, default.versions, default.median_ms
    if measured is None or not measured.host_bound or versions is None or versions.compute_capability is None:
        return "", []
    if default_ms is None:
        return "", []
    singles = _single_changes(space, stage1)
    faster = [s for s in singles if clearly_faster(s[0], default_ms, margin)]
    if not faster:
        return "", []
    best, knob, value = max(faster, key=lambda s: entry_speedup(s[0], default_ms))
    if best.measurements is None or best.measurements.host_bound is not False:
        return "", []
    neutral = [
        s
        for s in singles
        if s[1] != knob
        and not clearly_faster(s[0], default_ms, margin)
        and not clearly_slower(s[0], default_ms, margin)
    ]
    neutral.sort(key=lambda s: (-entry_speedup(s[0], default_ms), s[1], s[2]))
    defaults = _defaults(space)
    return best.route, [Route.of({**(pinned or {}), knob: value, k: v}, defaults) for _, k, v in neutral]


def plan_mixed_stage2(
    space: Sequence[SpaceKnob],
    improving: dict[str, list[tuple[str, float]]],
    pinned: dict[str, str] | None = None,
    budget: int | None = None,
) -> list[Route]:
    """Combinations of the improving knobs' values, the other knobs at default.

    Only combinations changing two or more knobs (single changes were stage 1). Ordered by the
    product of the single-knob speedups, so a budget cut keeps the most promising. Empty when
    fewer than two knobs improved.
    """
    if len(improving) < 2:
        return []
    pinned = dict(pinned or {})
    defaults = _defaults(space)
    names = sorted(improving)
    options = [[(None, 1.0)] + improving[name] for name in names]
    scored = []
    for combo in itertools.product(*options):
        changes = {name: value for name, (value, _) in zip(names, combo) if value is not None}
        if len(changes) < 2:
            continue
        predicted = math.prod(s for _, s in combo)
        scored.append((-predicted, Route.of({**pinned, **changes}, defaults)))
    scored.sort(key=lambda item: (item[0], item[1].canonical))
    routes = [route for _, route in scored]
    return routes[:budget] if budget is not None else routes


def make_batches(routes: Sequence[Route], routes_per_job: int, stage: str) -> list[Batch]:
    """Split routes into deterministic batches named `<stage>-b000`, ... (resume-safe: the same
    plan always yields the same batches)."""
    if routes_per_job < 1:
        raise PlanError(f"spec.search.routesPerJob must be >= 1 (got {routes_per_job})")
    return [
        Batch(f"{stage}-b{i // routes_per_job:03d}", stage, tuple(routes[i : i + routes_per_job]))
        for i in range(0, len(routes), routes_per_job)
    ]


def pending(routes: Iterable[Route], done_ids: Iterable[str]) -> list[Route]:
    """Routes with no cache entry yet (resume)."""
    done = set(done_ids)
    return [r for r in routes if r.id not in done]


def plan_stage1(
    mode: str, space: Sequence[SpaceKnob], pinned: dict[str, str] | None = None, max_routes: int | None = None
) -> list[Route]:
    """The routes known before anything is measured: all of `fast` or `full`, stage 1 of `mixed`."""
    if mode in ("fast", "mixed"):
        return plan_fast(space, pinned, max_routes)
    if mode == "full":
        return plan_full(space, pinned, max_routes)
    raise PlanError(f"spec.search.mode must be fast, full or mixed (got {mode!r})")


def plan_listed(
    compiler_knobs: Sequence[Knob],
    space: Sequence[SpaceKnob],
    routes: Sequence[str],
    pinned: dict[str, str] | None = None,
) -> list[Route]:
    """`spec.search.routes`: the default route, then each listed route (pinned knobs applied, as in
    every route), in the order given, once each, their ids as the other planners give them; a knob or
    value the compiler does not have is an error that names the route."""
    pinned = dict(pinned or {})
    by_name = {k.name: k for k in compiler_knobs}
    planned = [baseline(pinned, space)]
    # A listed value is compared with every knob's default as built (a knob the space does not sweep
    # too: `-inter_op_num_threads=2` over that base setting is the default route), a pinned knob's as
    # the baseline holds it.
    defaults = {k.name: k.default for k in compiler_knobs if k.name not in pinned} | _defaults(space)
    for text in routes:
        knobs = parse_route(text)
        for name, value in knobs.items():
            _check_value(by_name, name, value, f"spec.search.routes[{text!r}]")
        route = Route.of({**pinned, **knobs}, defaults)
        if route not in planned:
            planned.append(route)
    return planned
