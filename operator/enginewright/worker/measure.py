"""One route, measured: built in a process forked from the batch's build process
(`process.Builders`), its engine loaded into a
serving process (`server.Server`) and checked for accuracy there, and timed: the default's loads
against each other, a route's loads beside the default's in paired rounds, several kept engines
interleaved for confirmation. Each step returns the route's entry so far; a failure is the entry's
outcome, never an exception, unless it is the batch's (the default's own call raised)."""

from __future__ import annotations

import hashlib
import math
import os
import platform
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from enginewright.api.cache import CacheEntry, Host, Outcome, Versions, now_iso
from enginewright.api.routes import Route
from enginewright.measure.paired import (
    Spread,
    compare,
    engine_of,
    load_key,
    round_order,
    rounds_until,
    stop_after,
    summarise_loads,
)
from enginewright.measure.timing import stats_of
from enginewright.worker.context import WorkerContext
from enginewright.worker.process import Builders, run_child
from enginewright.worker.server import Server, ServerFailed, primer

ROUTE = "route"  # the key a route's engine is loaded by, beside the default's, in the serving process


def failed_entry(entry: CacheEntry, outcome: Outcome, error: str | None) -> CacheEntry:
    """The entry of a route whose step failed: the outcome and its message, finished now."""
    return entry.model_copy(update={"outcome": outcome, "error": error, "finished_at": now_iso()})


@dataclass
class Built:
    """A route after its build step: the entry so far, and the engine file (None if it failed)."""

    route: Route
    entry: CacheEntry
    engine_path: Path | None


def new_entry(ctx: WorkerContext, route: Route, stage: str, batch: str) -> CacheEntry:
    """A route's entry before its build: what it is, where and when it started."""
    return CacheEntry(
        target=ctx.target,
        route_id=route.id,
        route=route.canonical,
        knobs=route.as_dict,
        stage=stage,
        batch=batch,
        outcome=Outcome.ok,
        started_at=now_iso(),
        run=ctx.run,
        fingerprint=ctx.fingerprint.for_route(route.id) if ctx.fingerprint else None,
    )


def fresh_engine_path(ctx: WorkerContext, route: Route) -> Path:
    """Where this batch puts `route`'s engine, built or kept: in the route's folder, emptied first of
    what an earlier batch or a killed run left there."""
    folder = ctx.workdir / "routes" / route.id
    shutil.rmtree(folder, ignore_errors=True)
    return folder / f"engine{ctx.engine_suffix}"


def measured_with_this_fingerprint(ctx: WorkerContext, entry: CacheEntry) -> bool:
    """The entry was measured with the context's fingerprint for its route, part for part (an entry
    or a context without one never was)."""
    return (
        ctx.fingerprint is not None
        and entry.fingerprint is not None
        and entry.fingerprint.digest == ctx.fingerprint.for_route(entry.route_id).digest
    )


def kept_bytes(ctx: WorkerContext, entry: CacheEntry) -> bytes | None:
    """The engine kept for the entry's route, when the stored bytes are the ones it measured; None
    when none is kept or another replaced it (a later run of another fingerprint may have written
    the same key). The store's other errors are raised."""
    try:
        engine = ctx.store.get(ctx.engine_key(entry.route_id))
    except FileNotFoundError:  # the store's MissingObject
        return None
    return engine if hashlib.sha256(engine).hexdigest() == entry.engine_sha256 else None


def kept_engine(ctx: WorkerContext, route: Route, kept: CacheEntry | None, stage: str, batch: str) -> Built | None:
    """The engine an earlier batch of this run kept for `route` (`kept`, its entry), placed where a
    build would have written it, to load instead of building the route again; None (build it) unless
    that batch measured it ok with this context's fingerprint (compiler, CUDA, driver, GPU: a resumed
    `tune` may run on another stack), on this node and a host of the same CPU model and count (a host
    engine's libraries fit the host that compiled them), and the stored bytes are the ones it
    measured. For the default route: a batch after the one that wrote its entry loads the engine that
    is kept and published instead of a rebuild of it (resnet50 on the H100: 16 s a batch)."""
    if kept is None or kept.outcome is not Outcome.ok or kept.engine_sha256 is None or kept.reused:
        return None
    if ctx.fingerprint is not None and not measured_with_this_fingerprint(ctx, kept):
        return None
    node = kept.versions.node if kept.versions else None
    # the node is the Job's NODE_NAME; outside a Job, the host's name or none (as its backend records)
    if node not in {os.environ.get("NODE_NAME") or platform.node(), os.environ.get("NODE_NAME")} or kept.host is None:
        return None
    here = this_host()
    if (kept.host.cpu_model, kept.host.cpus) != (here.cpu_model, here.cpus):
        return None
    engine = kept_bytes(ctx, kept)
    if engine is None:
        return None
    engine_path = fresh_engine_path(ctx, route)
    engine_path.parent.mkdir(parents=True)
    engine_path.write_bytes(engine)
    entry = new_entry(ctx, route, stage, batch).model_copy(
        update={"engine_sha256": kept.engine_sha256, "engine_size": len(engine)}
    )
    return Built(route, entry, engine_path)


def build(ctx: WorkerContext, route: Route, stage: str, batch: str, builders: Builders | None = None) -> Built:
    """Build `route` in a process of its own, forked from one of the batch's `builders` (none given:
    a build process started for this build alone); the engine file stays in the route's folder."""
    engine_path = fresh_engine_path(ctx, route)
    entry = new_entry(ctx, route, stage, batch)
    result = (builders.run if builders is not None else run_child)(
        ctx.child_request(
            "build",
            engine_path.parent,
            engine_path,
            model=str(ctx.model),
            settings=ctx.settings,
            input_shapes=ctx.input_shapes,
            route=route.as_dict,
            inputs=[str(ctx.accuracy.inputs[0])],
        ),
        min(ctx.route_timeout, ctx.time_left()),
        Outcome.build_failed,
    )
    if not result.ok:
        assert result.outcome is not None  # run_child sets it on every failure
        return Built(route, failed_entry(entry, result.outcome, result.error), None)
    engine = engine_path.read_bytes()
    return Built(
        route,
        entry.model_copy(
            update={
                "build_seconds": round(result.data["build_seconds"], 3),
                "engine_sha256": hashlib.sha256(engine).hexdigest(),
                "engine_size": len(engine),
            }
        ),
        engine_path,
    )


def load(
    ctx: WorkerContext, built: Built, key: str, launched: Server | None = None
) -> tuple[CacheEntry, Server | None]:
    """Load the built engine in a fresh serving process (`launched`, when one was launched ahead
    without an engine, `Server.load_first`), check its accuracy there, then load it `timing.loads`
    times more for timing (`load_more`). Returns the entry so far and the warm server (None when
    loading failed; the entry says why). `launched` is closed unless it is the server returned."""
    entry = built.entry
    if built.engine_path is None:
        if launched is not None:
            launched.close()
        return entry, None
    server = launched or Server(
        ctx, primer(key), built.engine_path, built.engine_path.parent / "serve", references=True
    )
    try:
        if launched is None:
            ready = server.start(budget(ctx, entry))
        else:
            ready = server.load_first(built.engine_path, budget(ctx, entry))
        load_more(ctx, server, key, built.engine_path, budget(ctx, entry))
    except ServerFailed as failed:
        server.close()
        return failed_entry(entry, failed.outcome, failed.error), None
    except BaseException:  # anything else (a garbled reply, SIGTERM, Ctrl-C): no process left behind
        server.close()
        raise
    return loaded_entry(ctx, entry, ready), server


def load_more(
    ctx: WorkerContext, server: Server, key: str, engine: Path, timeout: float, loads: int | None = None
) -> list[str]:
    """Load `engine` `loads` (default `timing.loads`) more times into `server`, unchecked, as keys
    `measure.paired.load_key(key, i)`; returns those keys. The first load of an engine in a process
    (its `primer`, which the accuracy check ran on) is never timed: on the H200 the first load
    sat apart from the later loads of the same bytes for its whole life, in one run 2-6% slower
    than all seven later ones, in another 9% faster (bench/load_effects.py); the default is the
    first engine of its process, so timing its first load would tilt every route's comparison."""
    keys = [load_key(key, i) for i in range(loads or ctx.timing.loads)]
    for k in keys:
        server.add(k, engine, engine.parent / "serve" / f"load-{k}", timeout, check=False)
    return keys


def loaded_entry(ctx: WorkerContext, entry: CacheEntry, ready: dict) -> CacheEntry:
    """The entry of an engine that loaded: versions, the host, how it loaded, its accuracy."""
    versions = Versions.model_validate(ready["versions"])
    if os.environ.get("NODE_NAME"):
        versions = versions.model_copy(update={"node": os.environ["NODE_NAME"]})
    update = {
        "versions": versions,
        "host": this_host(),
        "loss": ready.get("loss"),
        "load_info": ready.get("load_info"),
        "objective": ctx.timing.objective.value,
    }
    if entry.fingerprint is not None:  # the stack of the process that measured it
        update["fingerprint"] = entry.fingerprint.measured_with(versions)
    if not ready.get("passed", True):
        update.update(outcome=Outcome.accuracy_rejected, error=ready.get("summary"))
    return entry.model_copy(update=update)


def measure_default(
    ctx: WorkerContext, built: Built, timed: bool = True, launched: Server | None = None
) -> tuple[CacheEntry, Server | None]:
    """Load the default engine (its primer, checked, and `timing.loads` timed loads; into `launched`
    when a process was launched ahead for it, `load`) and, `timed` (for the batch that writes its
    entry), time its loads against each other for `min_rounds` interleaved rounds. The server stays
    loaded: every route of the batch is timed against it."""
    entry, server = load(ctx, built, "default", launched)
    if server is None or not timed:
        return entry, server
    started, busy = time.monotonic(), server.busy_starts
    keys = [load_key("default", i) for i in range(ctx.timing.loads)]

    def time_round(index: int) -> dict[str, float]:
        order = round_order(keys, index)
        return dict(zip(order, server.interleave(order, budget(ctx, entry))))

    try:
        times, _ = rounds_until(time_round, lambda t: "enough" if len(t[keys[0]]) >= ctx.timing.min_rounds else None)
        measurements = server.measurements(budget(ctx, entry), key=keys[0])
    except ServerFailed as failed:
        server.close()
        return failed_entry(entry, failed.outcome, failed.error), None
    except BaseException:
        server.close()
        raise
    per_round = round_means([times[k] for k in keys])
    timing = stats_of(per_round, n=len(per_round) * server.calls_of[keys[0]] * len(keys))
    return entry.model_copy(
        update={
            "timing": timing,
            "baseline_ms": timing.median_ms,
            "measurements": measurements,
            "finished_at": now_iso(),
            "measure_seconds": round(time.monotonic() - started, 3),
            "host": with_busy_starts(entry.host, server.busy_starts - busy),
        }
    ), server


def measure_paired(ctx: WorkerContext, built: Built, default: Server, prior: Spread) -> tuple[CacheEntry, Spread]:
    """Load the route's engine into the default's serving process (a primer, checked, then
    `timing.loads` timed loads), then time every load of both in paired rounds, each round
    interleaved in blocks on that process's one thread (`Server.interleave`), until
    `measure.paired.stop_after` places the route on the spread across loads (pooled with `prior`, the
    loads of the routes measured before it) and rounds, and unload it. Returns the entry and `prior`, with this
    route's loads pooled in when it is ok. A rejected route is timed
    for `min_rounds` rounds only (for the report's time-vs-loss plot). A failure while the route
    is loaded is the route's — the process is closed with whatever the route left in it, and the
    batch loads the default again for the next route (a default that then fails to load fails the
    batch) — unless the serving process says the default's own call raised: that is the batch's."""
    timing = ctx.timing
    entry = built.entry
    if built.engine_path is None:
        return entry.model_copy(update={"finished_at": now_iso()}), prior
    limit = time.monotonic() + budget(ctx, entry)  # the whole measurement: load to last round
    defaults = [load_key("default", i) for i in range(timing.loads)]
    routes = [load_key(ROUTE, i) for i in range(timing.loads)]
    keys = [k for pair in zip(defaults, routes) for k in pair]  # D R D@2 R@2 ...: engines alternate

    def left() -> float:
        remaining = min(limit - time.monotonic(), ctx.time_left())
        if remaining <= 0:
            raise ServerFailed(
                Outcome.timeout,
                f"measuring exceeded the route's {ctx.route_timeout:.0f}s timeout or the run's deadline",
            )
        return remaining

    def time_round(index: int) -> dict[str, float]:
        order = round_order(keys, index)
        return dict(zip(order, default.interleave(order, left())))

    def comparison(times: dict[str, list[float]]):
        return compare([times[k] for k in routes], [times[k] for k in defaults], prior=prior)

    def stop(times: dict[str, list[float]]) -> str | None:
        count = len(times[routes[0]])
        if entry.outcome is Outcome.accuracy_rejected:
            return "rejected" if count >= timing.min_rounds else None
        return stop_after(
            comparison(times),
            count,
            margin=ctx.noise_margin,
            precision=timing.precision,
            min_rounds=timing.min_rounds,
            max_rounds=timing.max_rounds,
            min_rounds_if_slower=timing.min_rounds_if_slower,
        )

    loaded = []
    try:
        entry = loaded_entry(
            ctx, entry, default.add(primer(ROUTE), built.engine_path, built.engine_path.parent / "serve", left())
        )
        loaded.append(primer(ROUTE))
        loaded += load_more(ctx, default, ROUTE, built.engine_path, left())
        started, busy = time.monotonic(), default.busy_starts
        times, stopped = rounds_until(time_round, stop)
        calls = default.calls_of[routes[0]]
        try:
            measurements = default.measurements(left(), key=routes[0])
        except ServerFailed as failed:
            if failed.outcome is not Outcome.timeout:
                raise
            default.close()  # the time ran out after the rounds: they still count
            measurements = None
    except ServerFailed as failed:
        default.close()
        if failed.engine is not None and engine_of(failed.engine) != ROUTE:
            # The default's own call raised: the batch's failure (the Job's retry, or a rerun of
            # `tune`, resumes after the routes already written), not the route's.
            raise RuntimeError(f"the default route's serving process failed: {failed.error}") from None
        return failed_entry(entry, failed.outcome, failed.error), prior
    except BaseException:
        default.close()
        raise
    if default.proc is not None:
        try:
            default.drop(loaded, 60)
        except ServerFailed:
            default.close()  # (the batch loads the default again for the next route)
    result = comparison(times)
    if entry.outcome is Outcome.ok:
        # (a route placed `slower` early joins too: kept apart, the later routes' intervals had fewer
        # degrees of freedom, and simulated batches placed an equal route `faster` 4x as often:
        # bench/early_stop_sim.py)
        prior = prior + Spread.of([times[k] for k in routes])
    route_rounds = round_means([times[k] for k in routes])
    return entry.model_copy(
        update={
            "timing": stats_of(route_rounds, n=len(route_rounds) * calls * len(routes)),
            "baseline_ms": result.b_ms,
            "paired": summarise_loads(result, len(route_rounds), stopped),
            "measurements": measurements,
            "measure_seconds": round(time.monotonic() - started, 3),
            "finished_at": now_iso(),
            "host": with_busy_starts(entry.host, default.busy_starts - busy),
        }
    ), prior


def budget(ctx: WorkerContext, entry: CacheEntry) -> float:
    """Seconds one step of a route's measurement may take: its route timeout less its build."""
    return max(10.0, min(ctx.route_timeout - (entry.build_seconds or 0), ctx.time_left()))


def interleave(
    ctx: WorkerContext,
    engines: dict[str, Path],
    rounds: int,
    folder: Path,
    loads: int = 1,
    settled: Callable[[dict[str, list[float]]], bool] | None = None,
    launched: Server | None = None,
) -> dict[str, list[float]]:
    """Rounds of every engine, each loaded `loads` times (after an untimed primer of each) into
    one serving process, the loads taking turns engine by engine (A B C A@2 B@2 C@2 ...), each
    round interleaved in blocks on its one thread (`Server.interleave`), in `round_order`, at most
    `rounds` of them: fewer when `settled(times so far)`, asked after every round but the last, says
    no candidate can still win (`search.winner.settled`; a check that raises is said and the rounds
    go on). Returns per-round times (ms per call) by load key (`measure.paired.load_key`). `launched`:
    a fresh process launched ahead without an engine (`Server.load_first`), else one started here;
    closed when the rounds end, however they end."""
    names = list(engines)
    server = launched or Server(ctx, primer(names[0]), engines[names[0]], folder / "serve", references=False)
    try:
        if launched is None:
            server.start(ctx.route_timeout)
        else:
            server.load_first(engines[names[0]], ctx.route_timeout, key=primer(names[0]), check=False)
        for name in names[1:]:
            server.add(
                primer(name),
                engines[name],
                folder / "serve" / f"primer-{name}",
                ctx.route_timeout,
                check=False,
            )
        keys = [load_key(name, i) for i in range(loads) for name in names]
        for key in keys:
            server.add(key, engines[engine_of(key)], folder / "serve" / f"load-{key}", ctx.route_timeout, check=False)
        times: dict[str, list[float]] = {key: [] for key in keys}
        for index in range(rounds):
            order = round_order(keys, index)
            for key, ms in zip(order, server.interleave(order, ctx.route_timeout)):
                times[key].append(ms)
            if index + 1 < rounds and settled is not None:
                try:
                    done = settled(times)
                except Exception as exc:  # noqa: BLE001  (a fault of the check must not cost the rounds)
                    ctx.say(
                        f"[confirm] the early-stop check failed ({type(exc).__name__}: {exc}): every round is timed"
                    )
                    done, settled = False, None
                if done:
                    ctx.say(
                        f"[confirm] stopped after {index + 1} of {rounds} rounds: no candidate can still be confirmed"
                    )
                    break
        if server.busy_starts:
            ctx.say(
                f"[confirm] {server.busy_starts} timings began while the serving process's other threads "
                "were still busy (the wait for them gave up after 0.5 s): the host was loaded"
            )
        return times
    except ServerFailed as failed:
        raise RuntimeError(f"confirmation: {failed.error}") from None
    finally:
        server.close()


def round_means(loads: Sequence[Sequence[float]]) -> list[float]:
    """Per round, the geometric mean over an engine's loads (ms per call)."""
    return [math.exp(statistics.fmean(math.log(values[r]) for values in loads)) for r in range(len(loads[0]))]


def with_busy_starts(host: Host | None, busy_starts: int) -> Host:
    """`host` (this one where none) with the count of its route's timings begun beside busy threads."""
    return (host or this_host()).model_copy(update={"busy_starts": busy_starts})


def this_host() -> Host:
    """The CPU model, CPUs and load of the machine measuring (launch-bound times depend on them)."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = round(os.getloadavg()[0], 2)
    except OSError:
        load = None
    return Host(cpu_model=model, cpus=len(os.sched_getaffinity(0)), load_average=load)
